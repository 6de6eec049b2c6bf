"""A peer process: one rank (1..) of an inline trial of several workers, as its loop sees it.

    Peer.run(job)        # a Ray actor the trial process keeps (sweeps.trial.backends.peers)

It serves Ray Train's per-worker API as a Train worker does: ``get_context()`` answers its
rank, ``report`` is its half of the report collective (its checkpoint files go into the
directory rank 0 names), ``get_checkpoint()`` is the trial's latest checkpoint. When Tune stops
the trial, the loop ends at its next wait with ``TrialStopped``; when another rank fails, its
waits and collectives fail and it ends its attempt.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps._ray.train_fn import serving
from sweeps.config.usercode import import_trainable
from sweeps.loop.context import TrialContext
from sweeps.loop.worker import loop_entry
from sweeps.storage import trees
from sweeps.trial.backends.inline_run import checkpoint_at, reported_checkpoints
from sweeps.trial.backends.rank_error import first_reason, is_consequence
from sweeps.trial.backends.rendezvous import (
    RETURNED,
    STOPPED,
    PeerFailed,
    Rendezvous,
    ReportMismatch,
    TrialStopped,
    WorldSpec,
    connect_store,
    joined_world,
)

__all__ = ["Peer", "PeerJob", "PeerReports", "traceback_of"]


@dataclass(frozen=True)
class PeerJob:
    """What one peer runs for one attempt of a trial."""

    trial_id: str
    trainable: str  # "module:function"
    context: TrialContext
    config: dict[str, Any]
    world: WorldSpec
    run_dir: str
    latest: str | None  # the latest checkpoint's directory name when the attempt starts


def traceback_of(exc: Any) -> str:
    """A peer's traceback from Ray's task error, without Ray's "ray::Peer.run()" header."""
    lines = str(exc).splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("File ")), 0)
    return "\n".join(lines[start:])


class PeerReports:
    """A peer's ``ray.train.report``/``get_checkpoint``: its half of the report collective."""

    def __init__(self, meet: Rendezvous, run_dir: Path, latest: str | None) -> None:
        self.meet, self.run_dir, self.latest, self.count = meet, Path(run_dir), latest, 0

    def report(self, metrics: dict[str, Any], checkpoint: Any = None,
               checkpoint_dir_name: str | None = None, delete_source: bool = False,
               upload: Any = None) -> None:
        if upload is not None and checkpoint is not None:
            raise ValueError("ray.train.report(checkpoint_upload_fn=...) on a rank other than "
                             "0 of an inline trial; run the sweep with trial.executor=train")
        self.count += 1
        key = f"r{self.count}"
        self.meet.store.add(f"{key}/checkpoints", int(checkpoint is not None))
        try:
            self.meet.barrier(f"{key}/arrived")
        except PeerFailed as exc:
            if str(exc) != RETURNED:
                raise
            raise ReportMismatch(  # Ray Train's barrier would wait here forever
                f"rank {self.meet.rank} called ray.train.report (its report {self.count}), but "
                "rank 0's loop returned without making it: every rank must call "
                "ray.train.report as often as rank 0 (Ray Train's rule; a Train run waits "
                "for it forever, or RAY_TRAIN_COLLECTIVE_TIMEOUT_S)") from None
        name = self.meet.wait(f"{key}/name").decode()
        if name and checkpoint is not None:
            trees.add_tree(checkpoint.path, self.run_dir / name)
            if delete_source:
                shutil.rmtree(checkpoint.path, ignore_errors=True)
        self.meet.barrier(f"{key}/stored")
        self.meet.wait(f"{key}/go")  # Tune took rank 0's report (a stop raises TrialStopped)
        if name and checkpoint is not None:  # this rank's own latest, as a Train worker's
            self.latest = name

    def checkpoint(self) -> Any:
        return checkpoint_at(self.run_dir, self.latest)

    def reported(self) -> list[tuple[Any, dict[str, Any]]]:
        return reported_checkpoints(self.run_dir)


class Peer:
    """A peer process: runs one rank of one attempt at a time (``ray.remote`` in
    ``PeerGroup``); its store client and imports stay for the next attempt."""

    def __init__(self, trainable: str | None = None) -> None:
        self._stores: dict[tuple[str, int], Any] = {}
        if trainable:  # imported while rank 0 imports it; run() raises what this one may
            with contextlib.suppress(Exception, SystemExit):
                import_trainable(trainable)

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def run(self, job: PeerJob) -> str:
        """Run the loop as ``job.world.rank`` until it returns ("returned") or Tune stops the
        trial ("stopped"); raise what the loop raised, after telling the other ranks."""
        world = job.world
        address = (world.host, world.port)
        if address not in self._stores:
            self._stores = {address: connect_store(*address)}  # one rank 0 at a time
        store = self._stores[address]
        meet = Rendezvous(store, world.prefix, world.rank, world.world_size)
        reports = PeerReports(meet, Path(job.run_dir), job.latest)
        try:
            entry = loop_entry(import_trainable(job.trainable), job.context)
            meet.barrier("ready")
            with joined_world(world, store), serving(
                    name=job.trial_id, report=reports.report, get_checkpoint=reports.checkpoint,
                    reported=reports.reported, datasets={}, world=world, meet=meet):
                try:
                    entry(job.config)
                except TrialStopped:
                    raise
                except BaseException as exc:
                    # Decided, and the other ranks told, while the process group still lives:
                    # leaving the block destroys it, which closes rank 0's gloo connections,
                    # and rank 0 would then end the attempt first with "Connection closed".
                    ended = _ended_by_another(meet, exc)
                    if ended is not None:
                        return ended
                    meet.abort(f"rank {world.rank} raised {type(exc).__name__}: {exc}")
                    raise
        except TrialStopped:
            return STOPPED
        except BaseException as exc:  # before the loop: its import or the ready barrier
            ended = _ended_by_another(meet, exc)
            if ended is not None:
                return ended
            meet.abort(f"rank {world.rank} raised {type(exc).__name__}: {exc}")
            raise
        return "returned"


def _ended_by_another(meet: Rendezvous, exc: BaseException) -> str | None:
    """``stopped`` or ``ended`` when ``exc`` is only how this rank learnt that another rank
    ended the attempt (Tune's stop, a closed connection, an abort it read); None when it is
    this rank's own error, which the trial must fail with (also after rank 0 returned: a
    Train run fails when any worker raises). A report or collective that outlived rank 0's
    loop (``ReportMismatch``) is its own error."""
    reason = first_reason(meet)
    if reason is None or isinstance(exc, ReportMismatch) or not is_consequence(exc):
        return None
    return STOPPED if reason == STOPPED else "ended"
