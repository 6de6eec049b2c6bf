"""Every path of a sweep directory, named once.

    layout = SweepLayout(prepared.sweep_dir)     # or prepared.layout
    layout.ray_log, layout.config(record.starts), layout.error_file(trial_id)

What each path holds: docs/running.md#what-a-sweep-writes, and each property's docstring below.
Only paths: nothing here touches the file system.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["SweepLayout", "TRACKING_RUNS"]

TRACKING_RUNS = "runs.json"  # in tracking/: the MLflow ids the sink has made


@dataclass(frozen=True)
class SweepLayout:
    """The paths of the sweep directory ``root``.

    Example:
        >>> layout = SweepLayout(Path("/runs/digits"))
        >>> layout.record.relative_to(layout.root).as_posix(), layout.config(3).name
        ('state/sweep.json', 'config.start3.yaml')
        >>> layout.error_file("a1b2").relative_to(layout.root).as_posix()
        'a1b2/error.txt'
    """

    root: Path

    # The sweep's own state
    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def record(self) -> Path:
        return self.state / "sweep.json"

    @property
    def end(self) -> Path:  # placement groups still held at the end
        return self.state / "end.json"

    def config(self, start: int) -> Path:
        """The config of the sweep's ``start``-th start (1: ``config.yaml``)."""
        return self.root / ("config.yaml" if start == 1 else f"config.start{start}.yaml")

    @property
    def ray_log(self) -> Path:
        return self.root / "ray.log"

    # Trials
    @property
    def train(self) -> Path:
        """Train's storage: one run directory per trial, named by trial id."""
        return self.root / "train"

    def run_dir(self, trial_id: str) -> Path:
        return self.train / trial_id

    def trial_dir(self, trial_id: str) -> Path:
        """Tune's directory of the trial."""
        return self.root / trial_id

    def error_file(self, trial_id: str) -> Path:
        return self.trial_dir(trial_id) / "error.txt"

    # Tracking
    @property
    def tracking(self) -> Path:
        return self.root / "tracking"

    @property
    def tracking_journal(self) -> Path:
        return self.tracking / "journal.jsonl"

    @property
    def tracking_meta(self) -> Path:  # the tracking settings (driver.tracking_run)
        return self.tracking / "meta.json"

    @property
    def tracking_held(self) -> Path:  # what the sweep's end left unsent, and why
        return self.tracking / "held.json"

    @property
    def tracking_runs(self) -> Path:
        """The MLflow experiment id and the run id of the sweep and of each trial."""
        return self.tracking / TRACKING_RUNS

    @property
    def tensorboard(self) -> Path:
        """TensorBoard's runs, one per trial (``tensorboard --logdir <sweep dir>/tensorboard``)."""
        return self.root / "tensorboard"

    def tensorboard_run(self, trial_id: str) -> Path:
        return self.tensorboard / trial_id

    # The sweep's end
    @property
    def summary_csv(self) -> Path:
        return self.root / "summary.csv"

    @property
    def pareto_json(self) -> Path:  # a multi-objective sweep's front (sweeps.report.pareto)
        return self.root / "pareto.json"

    @property
    def optuna_log(self) -> Path:  # optuna-dashboard's file (sweeps.tracking.optuna_log)
        return self.root / "optuna.log"

    @property
    def importance(self) -> Path:  # the searched params ranked (sweeps.report.importance)
        return self.root / "importance.json"

    @property
    def summary_parquet(self) -> Path:
        return self.root / "summary.parquet"

    @property
    def best(self) -> Path:
        return self.root / "best.json"

    @property
    def plots(self) -> Path:
        return self.root / "plots"
