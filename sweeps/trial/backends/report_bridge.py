"""The trial's Train -> Tune bridge: Ray's ``TuneReportCallback`` plus the trial's clock.

    callbacks=[SweepReportCallback(TrialClock.load(run_dir, "epoch",
                                                   report_log.reports_before(run_dir)),
                                   partial(trial_stopped, sweep_id, trial_id))]

Runs in the trial's Ray Train controller and sees every report of the trial, in order, before Tune
does (right after Train registered its checkpoint). It adds ``sweeps_epoch`` and ``sweeps_step``
(``sweeps.trial.clock``) to rank 0's metrics, appends the report to the trial's durable report
log (``sweeps.trial.report_log``: what a resumed trial hands Tune again), and forwards it to the
trial's Tune session exactly as Ray's callback does (the checkpoint path as ``checkpoint_path``).
Nothing else in the loop's metrics changes.

One divergence from Ray's callback: a report of a trial the sweep has stopped is dropped (it is
in the report log) instead of waiting forever for a Tune session that no longer reads it. Tune
keeps a stopped trial's process for the next trial (``reuse_actors``) without ending its Train
run; until the sweep releases the run's workers, the loop goes on reporting, and Ray's callback
would block the controller's only event loop on the one-slot queue for good. The "stopped" flag
is the one the sweep's placement-group reaper sets (``sweeps.placement``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.tune.integration.ray_train import TuneReportCallback

from sweeps._ray.train import stop_aware_report_queue
from sweeps.files import named_in
from sweeps.trial import report_log
from sweeps.trial.backends.rank_error import is_consequence
from sweeps.trial.clock import TrialClock

__all__ = ["SweepReportCallback", "RECHECK_S"]

log = logging.getLogger(__name__)

RECHECK_S = 0.5  # how often a report waiting for Tune checks whether its trial was stopped


class SweepReportCallback(TuneReportCallback):
    """``TuneReportCallback`` that stamps the trial's clock on every result and drops the
    reports of a trial the sweep has stopped (``stopped()``: the sweep's flag for it)."""

    def __init__(self, clock: TrialClock, stopped: Callable[[], bool],
                 max_failures: int = 0, world: int = 1) -> None:
        super().__init__()
        self.clock, self.max_failures, self.world, self.failures = clock, max_failures, world, 0
        self._seen: tuple | None = None  # the last failure noted, until a report follows it
        stop_aware_report_queue(self, stopped, RECHECK_S)

    def after_exception(self, run_context: Any, worker_exceptions: dict[int, Exception]) -> None:
        """Ranks raised: when Train restarts the workers from the latest checkpoint
        (``trial.max_failures`` not spent), say which rank raised what (its own error, not a
        peer's "connection closed"), in the log and on every later report."""
        # Train calls this at every poll that finds errors (repeatedly while it waits out a
        # preemption): one failure counts once, until the restarted workers report again.
        seen = tuple(sorted((r, repr(e)[:300]) for r, e in worker_exceptions.items()))
        if not worker_exceptions or seen == self._seen:
            return
        self._seen = seen
        self.failures += 1
        if self.max_failures != -1 and self.failures > self.max_failures:
            return  # the run fails: the trial's error says it
        ranks = sorted(worker_exceptions)
        own = [r for r in ranks if not is_consequence(
            getattr(worker_exceptions[r], "cause", None) or worker_exceptions[r])] or ranks
        who = ("the loop" if self.world == 1 else f"rank {own[0]}"
               + (f" of {self.world}" if self.world > 1 else ""))  # 0: elastic, sizes vary
        log.warning("%s", self.clock.restarted(
            who, worker_exceptions[own[0]], self.failures + 1,
            -1 if self.max_failures == -1 else self.max_failures + 1,
            report_log.restored_clock(self.clock.run_dir) if self.clock.run_dir else None))

    def after_report(self, run_context: Any, metrics: list[dict[str, Any]],
                     checkpoint: Any) -> None:
        self._seen = None  # a failure after this report is a new one
        if checkpoint is not None and self.clock.run_dir:
            # the sweep's name for it (on an object store Train's is the bucket's object path)
            checkpoint = _Located(str(named_in(self.clock.run_dir, checkpoint.path)))
        if metrics:
            metrics = [report_log.record(self.clock, metrics[0],
                                         checkpoint.path if checkpoint else None), *metrics[1:]]
        super().after_report(run_context, metrics, checkpoint)


@dataclass(frozen=True)
class _Located:
    """What ``TuneReportCallback.after_report`` reads of a checkpoint: its ``path``."""

    path: str
