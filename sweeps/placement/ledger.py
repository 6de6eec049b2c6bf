"""The controller side of placement-group release: record each worker group, refuse restarts.

    RunConfig(callbacks=[PlacementGroupLedger(sweep_id, trial_id)])  # trial_driver

Runs in the trial's Train controller; ``sweeps.placement`` explains the whole mechanism.
"""

from __future__ import annotations

from typing import Any

import ray

from sweeps._ray import kv
from sweeps._ray.placement import (
    WorkerGroupCallback,
    group_of,
    record_groups_on_creation,
    remove_group,
)

__all__ = ["PlacementGroupLedger", "TrialStoppedError", "kv_key", "trial_stopped"]


def kv_key(sweep_id: str, trial_id: str, kind: str = "pg") -> str:
    """Key of a trial's record: ``pg/<sweep_id>/<trial_id>`` (or ``stop/...``)."""
    return f"{kind}/{sweep_id}/{trial_id}"


def trial_stopped(sweep_id: str, trial_id: str) -> bool:
    """Whether the sweep has ended the trial (its reaper's flag; a trial's Train run may
    outlive that for a moment)."""
    return bool(kv.get(kv_key(sweep_id, trial_id, "stop")))


class TrialStoppedError(RuntimeError):
    """Raised in a Train controller that tries to start workers for a trial the sweep ended."""


class PlacementGroupLedger(WorkerGroupCallback):
    """Train controller callback: records the trial's placement group, refuses stopped restarts."""

    def __init__(self, sweep_id: str, trial_id: str) -> None:
        self.sweep_id, self.trial_id = sweep_id, trial_id

    def before_worker_group_start(self, worker_group_context: Any) -> None:
        # Each group Train creates is recorded at once, not when its workers are up.
        record_groups_on_creation(self.record)
        # Refused before its record: an orphaned controller leaves none after the sweep's end.
        if trial_stopped(self.sweep_id, self.trial_id):
            raise TrialStoppedError(f"trial {self.trial_id} was ended by the sweep; "
                                    "not starting another worker group")
        # This controller, so that the sweep's end can wait for it to be gone (see join).
        kv.put(kv_key(self.sweep_id, self.trial_id, "ctl"),
               ray.get_runtime_context().get_actor_id() or "")
        # A group recorded by an earlier attempt of this trial whose driver died (Tune retry)
        # still holds its workers' resources: release it before asking for a new one.
        previous = kv.get(kv_key(self.sweep_id, self.trial_id))
        if previous:
            remove_group(previous)

    def record(self, pg: Any) -> None:
        """Record ``pg`` as this trial's worker group (replacing an earlier attempt's)."""
        kv.put(kv_key(self.sweep_id, self.trial_id), pg.id.hex())

    def after_worker_group_start(self, worker_group: Any) -> None:
        # Already recorded at creation; again here in case a Ray without the hook got through.
        self.record(group_of(worker_group))
