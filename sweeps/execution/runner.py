"""Run a sweep from a validated config: plan, start (or join) Ray, fit, summarize, release.

    from sweeps import compose, run_sweep
    result = run_sweep(compose("digits", ["search.num_samples=4"]))
    result.best["checkpoint"]

Every check that can fail on user input runs before Ray starts (``prepare``). A Ray instance
this function starts is shut down by it; a running one (``ray.init`` done by the caller, or
``ray.address``) is left running, with every placement group of the sweep released.

The steps live in their own modules: ``prepare`` (input checks, Ray-free), ``ray_session``
(Ray, its log file, SIGTERM), ``fit`` (Tune's run and the sweep's end),
``sweeps.report.console`` (the printout of ``python -m sweeps``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.config.schema import SweepConfig
from sweeps.errors import SweepInterrupted
from sweeps.execution.prepare import Prepared, prepare, sweep_dir_of
from sweeps.execution.ray_session import ray_session
from sweeps.layout import SweepLayout

if TYPE_CHECKING:  # Ray and pandas (via sweeps.report.summary) stay off the --help / --cfg path
    from ray.tune import ResultGrid

    from sweeps.report.summary import Summary
    from sweeps.tracking.target import TrackingTarget

__all__ = ["Prepared", "SweepResult", "SweepInterrupted", "prepare", "run_sweep",
           "sweep_dir_of"]

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    """What a finished sweep produced."""

    sweep_dir: Path
    summary: Summary
    results: ResultGrid
    released: dict[str, float]  # trial id -> seconds from trial end to its workers' release
    tracking_unsent: int = 0  # tracking records still waiting in the journal at the end
    tracking: TrackingTarget | None = None  # where MLflow runs went (None: tracking off)
    plots: list[Path] | None = None  # PNGs under <sweep dir>/plots (None: too few trials)
    plots_note: str | None = None  # why there are no plots
    unread_keys: list[str] | None = None  # searched keys the loop never read (first trial)

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


def run_sweep(cfg: SweepConfig, prepared: Prepared | None = None) -> SweepResult:
    """Run the sweep ``cfg`` describes to the end (resuming the one in ``sweep.dir`` if
    ``sweep.resume`` says so) and return its summary; ``SweepInterrupted`` on Ctrl-C/SIGTERM.

    Example:
        >>> result = run_sweep(compose("digits", ["search.num_samples=4"]))  # doctest: +SKIP
        >>> result.best["trial_id"]  # doctest: +SKIP
        '9a6685fe'
    """
    from sweeps._ray import compat
    from sweeps.execution.fit import fit  # it imports SweepResult from here

    prep = prepared or prepare(cfg)
    compat.check()  # a Ray whose internals changed fails here, in one line, before anything starts
    for warning in prep.warnings:
        log.warning(warning)
    res = prep.resources
    if res.max_concurrent_trials > res.trials_that_fit:
        log.warning("search.max_concurrent_trials=%d but only %d trial(s) fit at once; the "
                    "rest wait for resources", res.max_concurrent_trials, res.trials_that_fit)
    prep.sweep_dir.mkdir(parents=True, exist_ok=True)
    with ray_session(cfg, prep) as interrupt:
        return fit(prep, interrupt)
