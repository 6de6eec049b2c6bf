"""Prestarted processes for Train-backend trials: a Train run starts the next trial's processes.

    RunConfig(callbacks=[PrestartNextTrial(sweep_id, num_workers)])   # TrainBackend.run
    callbacks=[PrestartGate(sweep_id, trials)]                        # the sweep driver's Tuner

A Train run's controller, ``SynchronizationActor`` and workers are each a new Python process
that imports ``ray.train`` and torch (about 1.5 s of CPU each): on 2 cores most of a 2-worker
trial's orchestration (``docs/train-backend-costs.md``). ``PrestartNextTrial`` runs in a
trial's Train controller: once this trial's workers are up, it asks this node's raylet for the
processes of a trial still to start, which import Train and torch as they start
(``sweeps._ray.prestart``), so that trial's ``fit()`` finds them idle and ready. They are the
processes Ray would have started, with the runtime env Train gives them.

Bounded: ``PrestartGate`` (in the driver) publishes how many trials are still to start, counting
each (re)start, and each of those starts gets at most one set of processes (a ticket in Ray's
key-value store, claimed by the first controller to ask), so the last trials, a worker-group
restart or several trials at once prestart nothing extra. An unused process is dropped by Ray
once idle past its keep-alive: three times the longest trial so far (2 min at least, an hour
before any trial ended), or with the job. On a cluster of several nodes only the processes on
the controller's node are prestarted (the workers' nodes are the placement group's choice).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

from ray.tune import Callback

from sweeps._ray import kv
from sweeps._ray.placement import WorkerGroupCallback

__all__ = ["PrestartNextTrial", "PrestartGate", "gate_key", "trials_left", "keep_alive_s",
           "Gate", "start_in_batches", "release_prestart_tickets"]

log = logging.getLogger(__name__)

KEEP_MIN_S, KEEP_MAX_S = 120.0, 3600.0


def gate_key(sweep_id: str, suffix: str = "") -> str:
    return f"warm/{sweep_id}{suffix}"


def trials_left(trials: list, total: int) -> int:
    """How many trial starts are still to come: trials not made yet, and made ones waiting
    (``PENDING``, or ``PAUSED`` by PBT).

    Example:
        >>> class T:
        ...     def __init__(self, status): self.status = status
        >>> trials_left([T("RUNNING")], 3), trials_left([T("RUNNING"), T("TERMINATED")], 2)
        (2, 0)
        >>> trials_left([T("RUNNING"), T("PENDING")], 2)
        1
    """
    waiting = sum(1 for t in trials if t.status in ("PENDING", "PAUSED"))
    return max(0, total - len(trials)) + waiting


def keep_alive_s(longest_trial_s: float | None) -> float:
    """How long a prestarted process may wait idle: three trial lengths, within bounds.

    Example:
        >>> keep_alive_s(None), keep_alive_s(10.0), keep_alive_s(600.0), keep_alive_s(7200.0)
        (3600.0, 120.0, 1800.0, 3600.0)
    """
    if longest_trial_s is None:
        return KEEP_MAX_S
    return min(KEEP_MAX_S, max(KEEP_MIN_S, 3.0 * longest_trial_s))


def release_prestart_tickets(sweep_id: str) -> None:
    """Forget the sweep's gate and tickets (at its end; a resumed sweep publishes anew)."""
    try:
        kv.delete_prefix(gate_key(sweep_id, "/"))
        kv.delete_prefix(gate_key(sweep_id))  # the gate itself (and, by prefix, any uid
        # extending this one: uids are fixed-length, so none does)
    except Exception as exc:
        log.debug("prestart keys of %s left in Ray's key-value store: %s", sweep_id, exc)


class Gate:
    """What the driver publishes: trial starts so far, starts to come, and the keep-alive."""

    def __init__(self, started: int, left: int, keep_s: float) -> None:
        self.started, self.left, self.keep_s = started, left, keep_s

    def text(self) -> str:
        return json.dumps({"started": self.started, "left": self.left, "keep_s": self.keep_s})

    @classmethod
    def read(cls, sweep_id: str) -> Gate | None:
        """The sweep's gate, or None (not published, or unreadable: prestart nothing)."""
        try:
            found = json.loads(kv.get(gate_key(sweep_id)) or "null")
            return None if found is None else cls(int(found["started"]), int(found["left"]),
                                                  float(found["keep_s"]))
        except Exception:
            return None


class PrestartGate(Callback):
    """Tune callback in the sweep driver: publishes the sweep's ``Gate``."""

    def __init__(self, sweep_id: str, total_trials: int) -> None:
        self.sweep_id, self.total = sweep_id, total_trials
        self._init()

    def _init(self) -> None:
        self._started, self._began, self._longest = 0, {}, None
        self._said: str | None = None

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._started += 1
        self._began[trial.trial_id] = time.monotonic()
        # At once, so a controller up now does not claim this start (still PENDING here).
        self._publish(trials, starting=1)

    def _ended(self, trial: Any) -> None:
        began = self._began.pop(trial.trial_id, None)
        if began is not None:
            self._longest = max(self._longest or 0.0, time.monotonic() - began)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trial)

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        self._publish(trials)

    def _publish(self, trials: list, starting: int = 0) -> None:
        """``starting``: trials of ``trials`` starting now (PENDING still, started already)."""
        text = Gate(self._started, max(0, trials_left(trials, self.total) - starting),
                    keep_alive_s(self._longest)).text()
        if text == self._said:
            return
        try:
            if self._said is None:  # a resumed sweep counts its starts anew: old tickets go
                release_prestart_tickets(self.sweep_id)
            kv.put(gate_key(self.sweep_id), text)
            self._said = text
        except Exception as exc:  # retried at the next step; prestarting is optional
            log.debug("prestart gate not published: %s", exc)

    def __getstate__(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "total": self.total}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init()


class PrestartNextTrial(WorkerGroupCallback):
    """Train controller callback: once this run's workers are up, prestart a trial still to
    start (its controller, synchronization actor and, on a one-node cluster, workers)."""

    def __init__(self, sweep_id: str, num_workers: int) -> None:
        self.sweep_id, self.num_workers = sweep_id, num_workers

    def after_worker_group_start(self, worker_group: Any) -> None:
        # In a thread: the raylet calls must not delay this run's training.
        threading.Thread(target=self._prestart, name="sweeps-prestart", daemon=True).start()

    def _prestart(self) -> None:
        try:
            self.prestart()
        except Exception as exc:  # a head start only: never fail the run
            log.debug("nothing prestarted for the next trial: %s", exc)

    def prestart(self) -> int:
        """Claim a start still to come and prestart its processes; return how many."""
        from sweeps._ray.placement import alive_nodes
        from sweeps._ray.prestart import child_env_string, own_env_string

        gate = Gate.read(self.sweep_id)
        if gate is None:
            return 0
        ticket = next((i for i in range(gate.started + 1, gate.started + gate.left + 1)
                       if kv.claim(gate_key(self.sweep_id, f"/{i}"))), None)
        if ticket is None:
            return 0
        own = own_env_string()
        # The next controller is created as this one was; the synchronization actor inherits
        # its env as is; workers get it merged with Train's env vars (re-serialized by Ray).
        wanted = [own, own] + ([child_env_string(own)] * self.num_workers
                               if alive_nodes() == 1 else [])
        return start_in_batches(wanted, gate.keep_s)


def start_in_batches(envs: list[str], keep_s: float, boot_timeout_s: float = 8.0) -> int:
    """Prestart one process per entry of ``envs`` (serialized runtime envs), in order, as many
    at a time as the raylet starts at once (it drops the rest of a larger request), waiting
    for each batch to be up (idle) before the next; return how many were asked for."""
    from sweeps._ray.prestart import idle_processes, prestart, startup_concurrency

    batch = startup_concurrency()
    asked = 0
    while asked < len(envs):
        chunk = envs[asked:asked + batch]
        before = idle_processes()
        for env, count in _runs(chunk):
            if not prestart(env, count, keep_s):
                return asked
        asked += len(chunk)
        deadline = time.monotonic() + boot_timeout_s
        while (asked < len(envs) and before >= 0 and time.monotonic() < deadline
               and idle_processes() < before + len(chunk)):
            time.sleep(0.5)
    return asked


def _runs(envs: list[str]) -> list[tuple[str, int]]:
    """``envs`` as (env, how many in a row).

    Example:
        >>> _runs(["a", "a", "b"])
        [('a', 2), ('b', 1)]
    """
    out: list[tuple[str, int]] = []
    for env in envs:
        if out and out[-1][0] == env:
            out[-1] = (env, out[-1][1] + 1)
        else:
            out.append((env, 1))
    return out
