"""Ranks 1.. of an inline trial of several workers: peer processes the trial process keeps.

    python -m sweeps +experiment=digits scaling.num_workers=2     # trial.executor=auto, CPU
    group = peer_group(plan)        # in the Tune trial process (rank 0): backends.inline
    refs = group.start(jobs)        # each peer runs the loop as its rank (sweeps...backends.peer)

What a Train run costs per trial: ``sweeps.trial.backends.inline``. An inline trial of N
workers runs rank 0 in the Tune trial process and ranks 1..N-1 in peers: Ray actors the trial
process creates in its own placement group (Tune reserves one bundle per worker) and keeps,
with their imports, for the next trial Tune gives that process (``trial.reuse_process``). Each
attempt of a trial's loop makes a new ``torch.distributed`` process group over rank 0's store
(``sweeps.trial.backends.rendezvous``).

What a peer serves of Ray Train's API: ``sweeps.trial.backends.peer`` (rank 0's metrics are the
trial's). When any rank fails, rank 0 restarts the attempt from the latest checkpoint
(``trial.max_failures``) with the peers still alive and new ones for any that died.
"""


from __future__ import annotations

import threading
import uuid
from typing import Any

import ray

from sweeps.trial.backends.peer import Peer, PeerJob, traceback_of
from sweeps.trial.backends.rank_error import PeerError
from sweeps.trial.backends.rendezvous import (
    STORE_TIMEOUT,
    PeerFailed,
    Rendezvous,
    ReportMismatch,
    WorldSpec,
    open_store,
)

__all__ = ["PeerJob", "PeerGroup", "peer_group", "attempt_prefix", "FINISH_TIMEOUT_S",
           "STOP_GRACE_S"]

FINISH_TIMEOUT_S = 30.0  # how long rank 0 waits for a kept peer to answer before replacing it
STOP_GRACE_S = 2.0  # after rank 0 stopped or raised: a peer still running then is killed


class PeerGroup:
    """Rank 0's peers: created in bundles 1.. of the trial's placement group, kept across
    trials while the process lives, replaced when one died or did not end its attempt."""

    def __init__(self, num_workers: int, resources: dict[str, float]) -> None:
        self.num_workers, self.resources = num_workers, dict(resources)
        self.peers: list[Any] = []
        self.nodes: list[str] = []
        self.refs: list[Any] = []
        self.store: Any = None
        self.failed: str | None = None  # set by the watch: a peer of this attempt failed
        self.failed_rank: int | None = None  # ... which one
        self.errors: dict[int, PeerError] = {}  # what each peer of this attempt raised
        self._watching: Any = None
        self._watcher: Any = None
        self._starting: set[int] = set()  # peers started by ensure(wait=False), not yet up

    def _options(self, index: int) -> dict[str, Any]:
        from ray.util.placement_group import get_current_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        res = dict(self.resources)
        options: dict[str, Any] = {"num_cpus": res.pop("CPU", 0.0), "num_gpus": res.pop("GPU", 0.0)}
        if "memory" in res:
            options["memory"] = res.pop("memory")
        if res:
            options["resources"] = res
        group = get_current_placement_group()
        if group is not None:
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=group, placement_group_bundle_index=index)
        return options

    def ensure(self, trainable: str | None = None, wait: bool = True) -> None:
        """Peers for ranks 1..N-1, alive: the kept ones, and new ones where one died, each
        importing ``trainable`` as it starts. ``wait=False`` only starts the missing ones, so
        they come up while rank 0 imports the loop; the next ``ensure()`` waits for them."""
        actor = ray.remote(Peer)
        while len(self.peers) < self.num_workers - 1:
            self.peers.append(None)
            self.nodes.append("")
        for index, peer in enumerate(self.peers):
            if peer is not None and (not wait or index in self._starting):
                continue
            if peer is not None:
                try:
                    ray.get(peer.node.remote(), timeout=FINISH_TIMEOUT_S)
                    continue
                except Exception:  # died with its last attempt: replace it
                    ray.kill(peer, no_restart=True)
            self.peers[index] = actor.options(**self._options(index + 1)).remote(trainable)
            self._starting.add(index)
        if wait:
            try:
                self.nodes = ray.get([p.node.remote() for p in self.peers])
            finally:  # (a peer that died starting is checked, and replaced, by the next call)
                self._starting.clear()

    def worlds(self, host: str, port: int, prefix: str, backend: str) -> list[WorldSpec]:
        """Every rank's place: rank 0 here, then the peers; local ranks by node, nodes
        numbered in order of first appearance (rank 0's first), as Ray Train numbers them."""
        nodes = [ray.get_runtime_context().get_node_id(), *self.nodes]
        order = list(dict.fromkeys(nodes))
        return [WorldSpec(world_size=len(nodes), rank=rank, local_rank=nodes[:rank].count(node),
                          local_world_size=nodes.count(node), node_rank=order.index(node),
                          host=host, port=port, prefix=prefix, backend=backend)
                for rank, node in enumerate(nodes)]

    def start(self, jobs: list[PeerJob], meet: Rendezvous) -> None:
        """Start ranks 1..N-1 of an attempt (``jobs[i]`` for rank i + 1), and a watch that
        ends the attempt for every rank as soon as one of them fails (``_watch``)."""
        self.refs = [peer.run.remote(job) for peer, job in zip(self.peers, jobs, strict=True)]
        self.failed = self.failed_rank = None
        self.errors = {}
        self._watching = threading.Event()
        self._watching.set()
        self._watcher = threading.Thread(target=self._watch, args=(meet, list(self.refs)),
                                         name="sweeps-peer-watch", daemon=True)
        self._watcher.start()

    def _watch(self, meet: Rendezvous, refs: list[Any]) -> None:
        """While the attempt runs: when a peer's loop raised or its process died, end the
        attempt and kill every peer. Rank 0 may be inside a gloo collective with that peer,
        which no store key reaches and which a raising rank does not release (its process
        group lives on in the loop's traceback); closed sockets end it at once, as Ray Train
        ends a failed run by killing its worker group. The peers are replaced at the next
        attempt."""
        pending = list(refs)
        while pending and self._watching.is_set():
            done, pending = ray.wait(pending, num_returns=1, timeout=0.2)
            for ref in done:
                kind, text = self._outcome(refs.index(ref) + 1, ref)
                if kind in ("raised", "died") and self._watching.is_set():
                    self.failed_rank = refs.index(ref) + 1
                    self.failed = text
                    meet.abort(text)
                    self.replace()
                    return

    def alive(self) -> None:
        """While rank 0 waits on its peers: raise ``PeerFailed`` when a peer failed, and
        ``ReportMismatch`` when a peer's loop returned (it reported fewer times than rank 0)."""
        if self.failed is not None:
            raise PeerFailed(self.failed)
        done, _ = ray.wait(self.refs, num_returns=1, timeout=0)
        if done:
            kind, text = self._outcome(self.refs.index(done[0]) + 1, done[0])
            if kind == "returned":
                raise ReportMismatch(
                    f"{text} while rank 0 waits for it at a ray.train.report: every rank "
                    "must call ray.train.report as often as rank 0 (Ray Train's rule)")
            raise PeerFailed(text)

    def _outcome(self, rank: int, ref: Any) -> tuple[str, str]:
        """(returned | stopped | ended | raised | died, a sentence) of a peer's finished run;
        what a peer raised is kept in ``errors`` (its own exception, and its traceback)."""
        try:
            kind = ray.get(ref)
            return kind, f"rank {rank} ended its loop ({kind})"
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            self.errors.setdefault(rank, PeerError(rank, cause, traceback_of(exc)))
            return "raised", f"rank {rank} raised {type(cause).__name__}: {cause}"
        except ray.exceptions.RayError as exc:  # the actor died (or could not run it)
            return "died", f"rank {rank}'s process died: {str(exc).splitlines()[0]}"

    def finish(self, returned: bool) -> list[tuple[str, str]]:
        """Wait for every peer to end the attempt (rank 0 has ended its own) and stop the
        watch; what each did, as (returned | stopped | ended | raised | died | late, a
        sentence). After rank 0's loop returned, a peer may still work on its own (waits can
        no longer block it) for up to the process group's timeout, as a Train run waits for
        every worker; after rank 0 stopped or raised, a peer still running after
        ``STOP_GRACE_S`` is blocked in a collective with rank 0 and is killed (and replaced
        at the next attempt)."""
        if not self.refs:
            return []
        wait_s = STORE_TIMEOUT.total_seconds() if returned else STOP_GRACE_S
        _, late = ray.wait(self.refs, num_returns=len(self.refs), timeout=wait_s)
        self._watching.clear()
        self._watcher.join()
        outcomes = []
        for rank, ref in enumerate(self.refs, start=1):
            if ref in late:
                outcomes.append(("late", f"rank {rank} was still in its loop {wait_s:g} s "
                                         "after rank 0 ended it; its process is replaced"))
                ray.kill(self.peers[rank - 1], no_restart=True)
            else:
                outcomes.append(self._outcome(rank, ref))
        self.refs = []
        return outcomes

    def replace(self) -> None:
        """End every peer now; the next ``ensure`` starts new ones."""
        for peer in self.peers:
            if peer is not None:
                ray.kill(peer, no_restart=True)

    def rank_zero_store(self) -> Any:
        """Rank 0's store (``sweeps.trial.backends.rendezvous``), opened once per process."""
        if self.store is None:
            self.store = open_store()
        return self.store


_GROUP: PeerGroup | None = None  # this trial process's peers, kept for its next trial


def peer_group(num_workers: int, resources: dict[str, float]) -> PeerGroup:
    """This process's peers for trials of ``num_workers`` workers of ``resources`` each."""
    global _GROUP
    if _GROUP is None or (_GROUP.num_workers, _GROUP.resources) != (num_workers, resources):
        _GROUP = PeerGroup(num_workers, resources)
    return _GROUP


def attempt_prefix(trial_id: str) -> str:
    """Keys of one attempt (a new one per start and restart of the loop)."""
    return f"{trial_id}/{uuid.uuid4().hex[:12]}"
