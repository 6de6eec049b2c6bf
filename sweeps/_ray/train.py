"""Ray Train internals a trial driver relies on: default callbacks, the result hand-over, env.

    trainer = trainer_class()(...)               # TorchTrainer minus two per-run actors
    counting = count_handovers(); ...; wait_for_handover(counting, n)
    os.environ.update(controller_env(poll_s=0.1, attempt_s=60, preemption_watcher=False))

``trainer_class`` overrides ``TorchTrainer._create_default_callbacks`` (private) to leave out
``PlacementGroupCleanerCallback`` and an unused ``DatasetsCallback`` (both private classes of
``ray.train.v2._internal.callbacks``). Public route: none yet; Train starts a cleaner actor per
run that polls the State API (ray#54305).

``count_handovers`` swaps the Tune trial session's ``result_queue`` (``ray.train._internal.
session``) for a counting one, to avoid a deadlock between Tune's function runner and Train V2's
report forwarding (the final RESULT_DUPLICATE put while the main thread holds the last report;
reproduced in the CLI test). Public route: a fixed Ray (no upstream issue found at 2.60).

``stop_aware_report_queue`` replaces the queue ``TuneReportCallback.after_report`` puts into (its
private ``_training_actor_item_queue``) by one whose put gives up once the trial is stopped
(``sweeps.trial.backends.report_bridge`` says why). Public route: none at 2.60.

The ``RAY_TRAIN_*`` variables are read by Train's controller from its environment; they are
documented only in ``ray/train/v2/_internal/constants.py``.
"""

from __future__ import annotations

import importlib
import logging
import queue
import time
from collections.abc import Callable
from typing import Any

__all__ = ["trainer_class", "count_handovers", "wait_for_handover", "controller_env",
           "HEALTH_CHECK_ENV", "START_TIMEOUT_ENV", "PREEMPTION_WATCHER_ENV",
           "DEFAULT_CALLBACKS_TO_DROP", "SESSION_MODULE", "stop_aware_report_queue",
           "REPORT_QUEUE_ATTR", "tune_session"]

log = logging.getLogger(__name__)

HEALTH_CHECK_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"
START_TIMEOUT_ENV = "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S"
PREEMPTION_WATCHER_ENV = "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"
DEFAULT_CALLBACKS_TO_DROP = (
    ("ray.train.v2._internal.callbacks.placement_group_callback", "PlacementGroupCleanerCallback"),
    ("ray.train.v2._internal.callbacks.datasets", "DatasetsCallback"),
)
SESSION_MODULE = "ray.train._internal.session"
REPORT_QUEUE_ATTR = "_training_actor_item_queue"  # TuneReportCallback's Train -> Tune queue


def controller_env(poll_s: float, attempt_s: float, preemption_watcher: bool) -> dict[str, str]:
    """Env vars the trial's Train controller reads (Ray propagates ``RAY_TRAIN_*``).

    Example:
        >>> controller_env(0.5, 60.0, False)["RAY_TRAIN_ENABLE_PREEMPTION_WATCHER"]
        '0'
    """
    return {HEALTH_CHECK_ENV: str(poll_s), START_TIMEOUT_ENV: str(attempt_s),
            PREEMPTION_WATCHER_ENV: "1" if preemption_watcher else "0"}


def _callback_class(module: str, name: str) -> type | None:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def trainer_class() -> type:
    """``TorchTrainer`` minus two per-run actors a sweep's trials do not need: Ray Train's
    placement-group cleaner (``sweeps.placement`` does that job without the State API) and,
    when the trainer is given no Ray Datasets, its dataset manager."""
    from ray.train.torch import TorchTrainer

    cleaner, datasets = (_callback_class(m, n) for m, n in DEFAULT_CALLBACKS_TO_DROP)

    class SweepTorchTrainer(TorchTrainer):
        """TorchTrainer without Ray Train's per-run cleaner actor, and without a dataset
        manager when there is no dataset to shard."""

        def _create_default_callbacks(self) -> list:
            callbacks = super()._create_default_callbacks()
            drop = tuple(c for c in (cleaner, datasets if not self.datasets else None) if c)
            return [c for c in callbacks if not isinstance(c, drop)] if drop else callbacks

    return SweepTorchTrainer


class CountingQueue(queue.Queue):
    """The trial session's result queue, counting what was put into it."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.puts = 0

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        self.puts += 1


def tune_session() -> Any:
    """This process's Tune trial session (``get_session()`` of ``SESSION_MODULE``)."""
    return importlib.import_module(SESSION_MODULE).get_session()


def count_handovers() -> CountingQueue | None:
    """Make the Tune trial session's result queue count its puts (None on a Ray without it).

    Tune's session hands each Train report (taken off the Train -> Tune actor queue by the trial
    actor's main thread) to Tune through a one-slot result queue. When the trial's function returns,
    Tune's function runner puts a final "duplicate" result into the same queue from the training
    thread. If that happens while the main thread holds the last Train report, the main thread
    blocks forever on a full queue that only it empties: the trial hangs with its workers gone.
    Counting the puts lets the trial wait until every report it forwarded was handed over.
    """
    try:
        session = tune_session()
        counting = CountingQueue(session.result_queue.maxsize)
        session.result_queue = counting
        return counting
    except Exception:  # a Ray without this internal: fall back to the actor-queue check
        return None


def wait_for_handover(counting: CountingQueue | None, expected: int,
                      timeout_s: float = 10.0) -> None:
    """Return once ``expected`` results went into the session's result queue (see
    ``count_handovers``), so the function runner's final result cannot overtake the last one."""
    if counting is None:
        _wait_for_last_report()
        return
    deadline = time.monotonic() + timeout_s
    while counting.puts < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    if counting.puts < expected:
        log.warning("%d Train report(s) were not handed to Tune within %.0f s",
                    expected - counting.puts, timeout_s)


def _wait_for_last_report(timeout_s: float = 5.0) -> None:
    """Return once Tune took the last result off the Train -> Tune actor queue (the session's
    ``_inter_actor_queue``); a Ray without it: nothing to wait for."""
    try:
        actor_queue = getattr(tune_session(), "_inter_actor_queue", None)
    except Exception:
        return
    if actor_queue is None:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if actor_queue.empty():
                return
        except Exception:  # the queue actor is gone: nothing left in it
            return
        time.sleep(0.02)
    log.warning("the last Train report was not taken by Tune within %.0f s", timeout_s)


class StopAwareQueue:
    """A Train -> Tune queue whose ``put`` waits for room only while ``stopped()`` is false,
    asking it every ``recheck_s``; a report of a stopped trial is dropped (logged)."""

    def __init__(self, queue: Any, stopped: Callable[[], bool], recheck_s: float) -> None:
        self.queue, self.stopped, self.recheck_s = queue, stopped, recheck_s

    def put(self, item: dict[str, Any]) -> None:
        from ray.util.queue import Full

        while True:
            try:
                self.queue.put(item, timeout=self.recheck_s)
                return
            except Full:
                if self._stopped():
                    log.info("trial stopped by the sweep: a report (%s) stays in its report "
                             "log only", ", ".join(f"{k}={item[k]}" for k in
                                                   ("epoch", "sweeps_epoch") if k in item))
                    return

    def _stopped(self) -> bool:
        """The flag, or False when it cannot be read (a report of a running trial is never
        dropped; the put is retried)."""
        try:
            return bool(self.stopped())
        except Exception as exc:
            log.debug("could not read the trial's stop flag: %s", exc)
            return False


def stop_aware_report_queue(callback: Any, stopped: Callable[[], bool], recheck_s: float) -> None:
    """Make ``callback`` (a ``TuneReportCallback``) drop its reports once ``stopped()``
    instead of waiting forever for room in the trial session's one-slot queue."""
    queue = getattr(callback, REPORT_QUEUE_ATTR)
    setattr(callback, REPORT_QUEUE_ATTR, StopAwareQueue(queue, stopped, recheck_s))
