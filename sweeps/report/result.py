"""What a finished sweep produced: ``run_sweep``'s (and ``fit``'s) return value.

    result = run_sweep(cfg)
    result.best["checkpoint"], result.failed, result.layout.summary_csv
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.layout import SweepLayout

if TYPE_CHECKING:  # Ray and pandas stay off the --help / --cfg path
    from ray.tune import ResultGrid

    from sweeps.report.summary import Summary
    from sweeps.tracking.target import TrackingTarget

__all__ = ["SweepResult"]


@dataclass
class SweepResult:
    """What a finished sweep produced."""

    sweep_dir: Path
    summary: Summary
    results: ResultGrid
    released: dict[str, float]  # trial id -> seconds from trial end to its workers' release
    # tracking records still waiting in the journal at the end (-1: the sweep's end itself),
    # why, and what sends them
    tracking_held: tuple[int, str, str] = (0, "", "")
    tracking: TrackingTarget | None = None  # where MLflow runs went (None: tracking off)
    plots: list[Path] | None = None  # PNGs under <sweep dir>/plots (None: too few trials)
    plots_note: str | None = None  # why there are no plots
    unread_keys: list[str] | None = None  # searched keys the loop never read (first trial)
    # trial id -> how many polls of the reaper read its workers' group before one removed it
    # (1: the first poll after the trial ended)
    release_polls: dict[str, int] = field(default_factory=dict)

    @property
    def layout(self) -> SweepLayout:
        return SweepLayout(self.sweep_dir)

    @property
    def tracking_uri(self) -> str | None:
        return self.tracking.uri if self.tracking else None

    @property
    def failed(self) -> dict[str, str]:
        """Trial id -> why it failed (the loop raised, or never reported the metric)."""
        return self.summary.failed

    @property
    def best(self) -> dict[str, Any] | None:
        """The best trial's row: ``trial_id``, ``value``, ``epoch``, ``config``,
        ``checkpoint``, ... (None when no trial reported the metric)."""
        return self.summary.best
