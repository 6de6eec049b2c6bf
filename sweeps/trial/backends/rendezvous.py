"""Where the ranks of an inline trial of several workers meet: a key-value store of rank 0's.

    store = open_store()                                  # rank 0, once per trial process
    meet = Rendezvous(store, prefix, rank, world_size)    # every rank, once per attempt
    meet.barrier("r3/arrive"); meet.set("r3/name", name); meet.wait("r3/name")

Rank 0 (the Tune trial process) serves a ``torch.distributed.TCPStore``; ranks 1.. (the peers,
``sweeps.trial.backends.peers``) connect to it. One attempt of a trial's loop uses one key prefix,
so a restarted attempt never reads an earlier one's keys; its process group is built on the
same store (``joined_world``), as ``torchrun`` builds one on its rendezvous store.

A rank that ends the attempt early (Tune stopped the trial, a loop raised) sets ``abort``;
every wait of every rank polls it and raises ``TrialStopped`` (stopped) or ``PeerFailed``
(a rank failed), so no rank waits on a rank that will not come. Waits poll with ``check``
(no timed ``wait``: torch logs a warning line per timed-out wait).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["TrialStopped", "PeerFailed", "ReportMismatch", "Rendezvous", "WorldSpec", "open_store",
           "joined_world", "STOPPED", "RETURNED"]

STOPPED = "stopped"  # the abort reason when Tune stopped the trial (ASHA, the budget)
RETURNED = "rank 0 returned"  # the abort reason after rank 0's loop returned
STORE_TIMEOUT = datetime.timedelta(minutes=30)  # Ray Train's TorchConfig.timeout_s


class TrialStopped(BaseException):
    """Raised in a peer's loop when Tune stopped the trial: a ``BaseException``, like the
    ``SystemExit`` Tune raises in rank 0's ``report``, so a loop's ``except Exception`` does
    not catch it and its ``finally`` blocks run."""


class PeerFailed(RuntimeError):
    """Another rank of the attempt failed (its loop raised, or its process died)."""


class ReportMismatch(PeerFailed):
    """The ranks call ``ray.train.report`` (or a ``ray.train.collective`` call) a different
    number of times: one rank waits for a rank whose loop returned. The same again on a
    restart, so the trial is not restarted."""


@dataclass(frozen=True)
class WorldSpec:
    """One rank's place in one attempt of a trial (what Ray Train's context answers)."""

    world_size: int
    rank: int
    local_rank: int
    local_world_size: int
    node_rank: int
    host: str  # rank 0's address: the store, and MASTER_ADDR
    port: int
    prefix: str  # this attempt's keys
    backend: str = "gloo"


def open_store() -> Any:
    """Rank 0's store, on a free port of this node's address (peers on other nodes reach it)."""
    import ray
    import torch.distributed as dist

    host = ray.util.get_node_ip_address() if ray.is_initialized() else "127.0.0.1"
    return dist.TCPStore(host, 0, None, True, timeout=STORE_TIMEOUT, wait_for_workers=False)


def connect_store(host: str, port: int) -> Any:
    """A peer's client of rank 0's store."""
    import torch.distributed as dist

    return dist.TCPStore(host, port, None, False, timeout=STORE_TIMEOUT)


class Rendezvous:
    """One rank's view of one attempt's keys; ``alive`` is called while waiting (rank 0
    checks there that its peers still run, and raises ``PeerFailed`` when one ended)."""

    def __init__(self, store: Any, prefix: str, rank: int, world_size: int,
                 alive: Callable[[], None] | None = None) -> None:
        import torch.distributed as dist

        self.store = dist.PrefixStore(f"{prefix}/", store)
        self.rank, self.world_size, self.alive = rank, world_size, alive
        self.collectives = 0  # ray.train.collective calls made so far (the same on every rank)

    def set(self, key: str, value: str | bytes) -> None:
        self.store.set(key, value)

    def abort(self, reason: str) -> None:
        """End the attempt for every rank: their waits raise (reason ``STOPPED``: stopped)."""
        with contextlib.suppress(Exception):  # the store may be gone with a dead rank 0
            self.store.compare_set("abort", "", reason)  # the first reason stays

    def aborted(self) -> str | None:
        return self.store.get("abort").decode() if self.store.check(["abort"]) else None

    def wait(self, key: str) -> bytes:
        """The value of ``key`` once a rank sets it; raises if the attempt was aborted first."""
        pause = 0.001
        while not self.store.check([key]):
            reason = self.aborted()
            if reason is not None and not self.store.check([key]):  # set just before: taken
                raise TrialStopped() if reason == STOPPED else PeerFailed(reason)
            if self.alive is not None:
                self.alive()
            time.sleep(pause)
            pause = min(pause * 2, 0.05)
        return self.store.get(key)

    def barrier(self, key: str) -> None:
        """Return once every rank has reached ``barrier(key)``."""
        if self.store.add(key, 1) == self.world_size:
            self.store.set(f"{key}/all", b"1")
        self.wait(f"{key}/all")

    def collective_barrier(self) -> None:
        """``ray.train.collective.barrier()``."""
        self.collectives += 1
        with self._outliving("barrier"):
            self.barrier(f"c{self.collectives}")

    def broadcast_from_rank_zero(self, data: Any) -> Any:
        """``ray.train.collective.broadcast_from_rank_zero(data)``: rank 0's data on every rank."""
        self.collectives += 1
        key = f"c{self.collectives}/data"
        if self.rank == 0:
            self.store.set(key, pickle.dumps(data))
            return data
        with self._outliving("broadcast_from_rank_zero"):
            return pickle.loads(self.wait(key))

    @contextlib.contextmanager
    def _outliving(self, call: str) -> Iterator[None]:
        """A collective that rank 0's returned loop never made: ``ReportMismatch`` naming it
        (Ray Train's synchronization actor would wait for rank 0 forever)."""
        try:
            yield
        except PeerFailed as exc:
            if str(exc) != RETURNED or isinstance(exc, ReportMismatch):
                raise
            raise ReportMismatch(
                f"rank {self.rank} called ray.train.collective.{call}() (its collective "
                f"{self.collectives}), but rank 0's loop returned without making it: every rank "
                "must make the same collective calls as rank 0 (Ray Train's rule; a Train run "
                "waits for it forever, or RAY_TRAIN_COLLECTIVE_TIMEOUT_S)") from None


@contextlib.contextmanager
def joined_world(spec: WorldSpec, store: Any, use_gpu: bool = False) -> Iterator[None]:
    """What a Train run gives each worker's loop besides the API: the default
    ``torch.distributed`` process group of the attempt's ranks (on ``store``; none is made
    when one exists already) and the ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/... variables;
    both undone after. A world of one needs no peer and uses an in-process store."""
    import torch.distributed as dist

    env = {"RANK": str(spec.rank), "WORLD_SIZE": str(spec.world_size),
           "LOCAL_RANK": str(spec.local_rank), "LOCAL_WORLD_SIZE": str(spec.local_world_size),
           "NODE_RANK": str(spec.node_rank), "MASTER_ADDR": spec.host,
           "MASTER_PORT": str(spec.port)}
    if use_gpu:
        env["ACCELERATE_TORCH_DEVICE"] = "cuda:0"
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    created = dist.is_available() and not dist.is_initialized()
    if created:
        on = (dist.HashStore() if spec.world_size == 1
              else dist.PrefixStore(f"{spec.prefix}/pg/", store))
        dist.init_process_group(spec.backend, store=on, rank=spec.rank,
                                world_size=spec.world_size, timeout=STORE_TIMEOUT)
    try:
        yield
    finally:
        if created and dist.is_initialized():
            dist.destroy_process_group()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
