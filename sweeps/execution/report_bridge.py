"""The trial's Train -> Tune bridge: Ray's ``TuneReportCallback`` plus the trial's clock.

    callbacks=[SweepReportCallback(TrialClock.load(run_dir, "epoch",
                                                   report_log.reports_before(run_dir)))]

Runs in the trial's Ray Train controller and sees every report of the trial, in order, before Tune
does (right after Train registered its checkpoint). It adds ``sweeps_epoch`` and ``sweeps_step``
(``sweeps.execution.clock``) to rank 0's metrics, appends the report to the trial's durable report
log (``sweeps.execution.report_log``: what a resumed trial hands Tune again), and forwards it to the
trial's Tune session exactly as Ray's callback does (the checkpoint path as ``checkpoint_path``).
Nothing else in the loop's metrics changes.
"""

from __future__ import annotations

from typing import Any

from ray.tune.integration.ray_train import TuneReportCallback

from sweeps.execution import report_log
from sweeps.execution.clock import TrialClock

__all__ = ["SweepReportCallback"]


class SweepReportCallback(TuneReportCallback):
    """``TuneReportCallback`` that stamps the trial's clock on every result."""

    def __init__(self, clock: TrialClock) -> None:
        super().__init__()
        self.clock = clock

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Any) -> None:
        if metrics:
            metrics = [report_log.record(self.clock, metrics[0],
                                         checkpoint.path if checkpoint else None), *metrics[1:]]
        super().after_report(run_context, metrics, checkpoint)
