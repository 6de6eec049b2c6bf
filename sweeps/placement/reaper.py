"""The driver side of placement-group release: free each ended trial's workers within seconds.

    reaper = PlacementGroupReaper(sweep_id)            # a Tune callback of the sweep
    ...; reaper.join(); release_all(sweep_id, keep_stop_flags=True)

Runs in the sweep driver; ``sweeps.placement`` explains the whole mechanism.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import ray
from ray.tune import Callback
from ray.util import placement_group_table

from sweeps._ray import kv
from sweeps._ray.placement import actor_state, remove_group
from sweeps.placement.ledger import kv_key

__all__ = ["PlacementGroupReaper", "release_all", "live_controllers", "job_groups",
           "release_new_groups", "held_groups", "held_job_groups", "HELD"]

log = logging.getLogger(__name__)
HELD = ("CREATED", "PENDING", "RESCHEDULING")  # placement-group states that hold resources


class PlacementGroupReaper(Callback):
    """Tune callback in the sweep driver: releases each ended trial's placement group.

    One watcher thread serves every ended trial: each ``poll_s`` it lists the sweep's recorded
    groups once (``pg/<sweep>/``) and reads only the keys of trials it watches, so its cost does
    not grow with the trials ended in the last ``watch_s`` (a thread and two GCS calls per
    trial and poll did: ~150 threads and 1,200 calls a second on 2 cores at 15 trials a
    second). A group it removed is not asked about again; a new one under the same key (a
    restart that slipped in) is removed in turn."""

    def __init__(self, sweep_id: str, watch_s: float = 10.0, poll_s: float = 0.25) -> None:
        self.sweep_id, self.watch_s, self.poll_s = sweep_id, watch_s, poll_s
        self.released: dict[str, float] = {}  # trial id -> seconds from trial end to release
        # trial id -> how many of the watcher's polls read its recorded group before one
        # removed it (1: the first poll after the trial ended, no failed call in between)
        self.release_polls: dict[str, int] = {}
        self._init_watch()

    def _init_watch(self) -> None:
        self._watched: dict[str, float] = {}  # trial id -> when it ended (monotonic)
        self._removed: dict[str, str] = {}  # trial id -> the last group this reaper removed
        self._reads: dict[str, int] = {}  # trial id -> polls that read its key since it ended
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks with the experiment; the watch (thread, lock) stays behind."""
        return {"sweep_id": self.sweep_id, "watch_s": self.watch_s, "poll_s": self.poll_s,
                "released": dict(self.released), "release_polls": dict(self.release_polls)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_watch()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._start(trial.trial_id)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._start(trial.trial_id)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """Tune retries the trial (its driver died or raised): free the old attempt's group
        now, so the retry's workers can be placed (no stop flag: the trial goes on)."""
        try:
            value = kv.get(kv_key(self.sweep_id, trial.trial_id))
            if value and remove_group(value):
                log.debug("released the placement group of retried trial %s", trial.trial_id)
        except Exception as exc:
            log.debug("could not release the group of retried trial %s: %s", trial.trial_id, exc)

    def watching(self) -> list[str]:
        """The ended trials whose keys the watcher still reads."""
        with self._lock:
            return list(self._watched)

    def _start(self, trial_id: str) -> None:
        kv.put(kv_key(self.sweep_id, trial_id, "stop"), b"1")
        with self._lock:
            self._watched[trial_id] = time.monotonic()
            if self._thread is None and not self._done.is_set():
                self._thread = threading.Thread(target=self._loop, daemon=True,
                                                name=f"sweeps-reaper-{self.sweep_id}")
                self._thread.start()
        self._wake.set()

    def _loop(self) -> None:
        """Poll every watched trial at once: at each new end (woken), then every ``poll_s``;
        a trial is polled at least once (also when the sweep ends meanwhile), and dropped
        ``watch_s`` after it ended. Ends with the sweep, or when Ray is gone."""
        while True:
            self._wake.clear()
            with self._lock:
                watched = dict(self._watched)
            if watched and not self._poll(watched) or self._done.is_set():
                break
            now = time.monotonic()
            with self._lock:
                for trial_id, ended in watched.items():
                    if now - ended > self.watch_s and self._watched.get(trial_id) == ended:
                        del self._watched[trial_id]
                idle = not self._watched
            self._wake.wait(None if idle else self.poll_s)
        with self._lock:
            self._thread = None  # a trial ending later starts a new watcher (unless done)

    def _poll(self, watched: dict[str, float]) -> bool:
        """Remove each watched trial's recorded group unless this reaper already did; False
        when Ray is gone (shut down under us: nothing left to hold). A failed call is tried
        again at the next poll."""
        try:
            recorded = set(kv.keys(f"pg/{self.sweep_id}/"))
        except Exception as exc:
            log.debug("reaper of sweep %s could not list its groups: %s", self.sweep_id, exc)
            return _ray_up()
        for trial_id, ended in watched.items():
            key = kv_key(self.sweep_id, trial_id)
            if key not in recorded:
                continue
            try:
                value = kv.get(key)
                if not value or value == self._removed.get(trial_id):
                    continue
                self._reads[trial_id] = self._reads.get(trial_id, 0) + 1
                if remove_group(value):  # its poll count first: readers wait on released
                    self.release_polls[trial_id] = self._reads[trial_id]
                    self.released[trial_id] = time.monotonic() - ended
                    log.debug("released placement group of trial %s", trial_id)
                self._removed[trial_id] = value
                self._reads.pop(trial_id)  # a later group under the key counts from zero
            except Exception as exc:
                log.debug("could not release the group of trial %s: %s", trial_id, exc)
        return True

    def join(self, timeout: float | None = None) -> None:
        """At sweep end, before ``release_all``: end the watcher and wait (at most ``watch_s``)
        until no Train controller of the sweep is alive. A live one (a stopped trial's, dying) may
        still create a worker group; a dead one cannot, and every group it created was recorded at
        creation, so ``release_all`` then finds them all. Typically well under a second, where
        watching the last trial's key for its full ``watch_s`` cost ~10 s a sweep."""
        self._done.set()
        self._wake.set()
        deadline = time.monotonic() + (self.watch_s if timeout is None else timeout)
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        while live_controllers(self.sweep_id) and time.monotonic() < deadline:
            time.sleep(self.poll_s / 2)


def _ray_up() -> bool:
    """Whether this process is still connected to Ray."""
    return ray.is_initialized()


def live_controllers(sweep_id: str) -> list[str]:
    """Train controllers of ``sweep_id`` (recorded by their ledgers) not yet dead. An actor
    whose state cannot be read counts as alive (the caller's wait is bounded)."""
    alive = []
    for key in kv.keys(f"ctl/{sweep_id}/"):
        actor_id = kv.get(key)
        try:
            state = actor_state(actor_id) if actor_id else "DEAD"
        except Exception:
            state = None
        if state != "DEAD":
            alive.append(key)
    return alive


def release_all(sweep_id: str, keep_stop_flags: bool = False) -> int:
    """Remove every worker placement group a trial of ``sweep_id`` recorded; clear its keys.
    Call it once no trial of the sweep runs.

    ``keep_stop_flags`` (at sweep end): leave the ended trials' "stopped" flags. A stopped
    trial's Train controller can outlive the sweep by seconds and keeps trying to restart its
    workers; the flag is what refuses it (seen: a group created after the flags were cleared).
    A resumed sweep clears them when it starts.

    Returns how many Train worker groups were still held (and are now removed).
    """
    removed = 0
    for key in kv.keys(f"pg/{sweep_id}/"):
        value = kv.get(key)
        try:
            if value and remove_group(value):
                removed += 1
        except Exception as exc:  # removed by Train meanwhile
            log.debug("placement group %s: %s", value, exc)
    for kind in ("pg", "ctl") + (() if keep_stop_flags else ("stop",)):
        kv.delete_prefix(f"{kind}/{sweep_id}/")
    return removed


def _job_group_states() -> dict[str, str]:
    """State of every placement group this job (this driver: Tune's trial groups and the
    trials' worker groups) has created in the connected Ray instance. A group id ends with the
    id of the job that created it."""
    job = ray.get_runtime_context().get_job_id()
    return {pg_id: pg.get("state") for pg_id, pg in placement_group_table().items()
            if pg_id.endswith(job)}


def job_groups() -> set[str]:
    """Ids of the placement groups this job has created, held or removed (at sweep start)."""
    return set(_job_group_states())


def release_new_groups(before: set[str]) -> int:
    """Once a sweep's trials and Train controllers are gone: remove every group this job
    created since ``before`` (``job_groups()`` at sweep start) that is still held, and return
    how many. Tune removes its trial groups asynchronously after ``fit`` returns, and a group
    it staged for a trial that never started is recorded nowhere."""
    removed = 0
    for pg_id, state in _job_group_states().items():
        if pg_id in before or state not in HELD:
            continue
        try:
            removed += remove_group(pg_id)
        except Exception as exc:  # removed meanwhile
            log.debug("placement group %s: %s", pg_id, exc)
    return removed


def held_job_groups() -> int:
    """Placement groups this job (the sweep's driver) created that still hold (or wait for)
    resources: what a sweep on a cluster it joined checks at its end."""
    return sum(1 for state in _job_group_states().values() if state in HELD)


def held_groups() -> int:
    """Placement groups still holding (or waiting for) resources in this Ray instance; a sweep
    that started its own instance checks this is 0 before shutting it down."""
    return sum(1 for pg in placement_group_table().values() if pg.get("state") in HELD)
