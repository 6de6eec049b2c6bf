"""The inline executor: a trial's loop runs in the Tune trial process, no Train run.

    python -m sweeps +experiment=digits scaling.num_workers=1       # trial.executor=auto
    python -m sweeps +experiment=digits scaling.num_workers=2       # the same, on CPUs
    run_inline(plan, trial_id, run_dir, config, clock)     # from sweeps.execution.trial_driver

With more than one worker, rank 0 runs here and ranks 1.. in peer processes this process keeps
for its next trial (``sweeps.execution.peers``): every ``report`` is then a collective of all
ranks, rank 0's metrics are the trial's, and each rank's checkpoint files go into the one
checkpoint directory rank 0 names and registers, as a Train run merges them.

A Ray Train run of one worker costs a controller, a worker, a synchronization and a queue
process per trial, each a cold Python start that imports Ray and torch: about 10 s per trial on
2 cores, for a world of size 1 that needs no process group. Here the loop runs in the Tune
trial actor, with Ray Train's per-worker API served in-process (``sweeps._ray.train_fn``):
``ray.train.report``, ``get_checkpoint``, ``get_context`` (world size 1, rank 0),
``get_dataset_shard`` and ``ray.train.torch.prepare_model``/``prepare_data_loader``/
``get_device`` behave as in a 1-worker Train run.

What the loop and the rest of the sweep see is what a Train run leaves: each reported
checkpoint is copied into the trial's run directory (``<sweep dir>/train/<trial id>/<name>``,
atomically), registered in Train's run snapshot (``checkpoint_manager_snapshot.json``, the best
``checkpoint.keep`` by the sweep metric plus the latest, as Train keeps them), stamped with the
trial's clock, appended to the report log and handed to Tune with its ``checkpoint_path``,
before ``report`` returns; the report that reaches the budget (``scheduler.max_t``) is handed
over when the loop returns or reports again, so the loop's code after its last report runs, as
it does in a Train run. So resume, the best checkpoint, MLflow and a later
``trial.executor=train`` run of the same trial all read it unchanged. A loop that raises is
restarted from its latest checkpoint up to ``trial.max_failures`` times, as Train restarts its
worker group (not after running out of GPU memory: ``sweeps.execution.gpu_memory``); a trial
process that dies is Tune's to retry (``trial.max_retries``).

The device: the trial process holds the worker's resources (``scaling.gpus_per_worker`` of a GPU
too, a share below 1 included), so Ray sets its ``CUDA_VISIBLE_DEVICES`` to the GPU it was given,
and ``ray.train.torch.get_device()``/``prepare_model`` answer from that assignment as in a Train
worker: ``cuda:0`` (the one visible GPU) with a GPU, ``cpu`` without one, even on a node whose
GPUs the process can see (``sweeps._ray.train_fn``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps import files
from sweeps._ray import train_snapshot
from sweeps.protocol import CHECKPOINT_PATH_KEY, CLOCK_KEY
from sweeps.storage.location import filesystem

if TYPE_CHECKING:
    from sweeps.execution.clock import TrialClock
    from sweeps.execution.peers import PeerGroup, RankZeroReports
    from sweeps.execution.trial_driver import TrialPlan

__all__ = ["InlineRun", "run_inline", "score_key"]

log = logging.getLogger(__name__)


def score_key(metrics: dict[str, Any], metric: str, mode: str) -> tuple[bool, float]:
    """Train's checkpoint order (``_CheckpointManager._get_checkpoint_score``): NaN first, then
    worst to best; nested metrics by ``a/b`` path; a missing metric counts as -inf before the
    mode's sign; any number type (numpy's too); a value that is not a number is refused.

    Example:
        >>> sorted([{"acc": 0.5}, {"acc": float("nan")}, {"acc": 0.9}],
        ...        key=lambda m: score_key(m, "acc", "max"))
        [{'acc': nan}, {'acc': 0.5}, {'acc': 0.9}]
    """
    from ray.tune.utils import flatten_dict

    value = flatten_dict(metrics).get(metric, -math.inf)
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise ValueError(f"checkpoint score {metric}={value!r} is not a number; the sweep "
                         f"ranks checkpoints by experiment.metric, so report it as one")
    value = float(value)
    return (False, -math.inf) if math.isnan(value) else (True, value if mode == "max" else -value)


def reported_checkpoints(run_dir: Path) -> list[tuple[Any, dict[str, Any]]]:
    """``ray.train.get_all_reported_checkpoints()`` of an inline trial: (checkpoint, metrics)
    of every checkpoint the run keeps, in the order Train's checkpoint manager keeps them
    (worst to best by the sweep metric, ties by report), read from its run snapshot."""
    snap = train_snapshot.load(Path(run_dir))
    if snap is None:
        return []
    return [(checkpoint_at(run_dir, r["checkpoint_dir_name"]), dict(r.get("metrics") or {}))
            for r in snap["checkpoint_results"]]


def checkpoint_at(run_dir: Path, name: str | None) -> Any:
    """The ``ray.train.Checkpoint`` of the run's checkpoint directory ``name`` (None: None)."""
    if name is None:
        return None
    from ray.train import Checkpoint

    remote = filesystem(Path(run_dir) / name)
    if remote is not None:  # an object store: Ray downloads it in as_directory()
        return Checkpoint(remote[1], filesystem=remote[0])
    return Checkpoint(str(Path(run_dir) / name))


class InlineRun:
    """One trial's Train run directory, written by the trial process the way Train writes it."""

    def __init__(self, run_dir: Path, metric: str, mode: str, keep: int,
                 clock: TrialClock, budget: float = math.inf) -> None:
        self.run_dir, self.metric, self.mode, self.keep = Path(run_dir), metric, mode, keep
        self.clock, self.budget = clock, budget
        self.ranks: RankZeroReports | None = None  # the peers' side of each report, if any
        # The report that reached the budget, handed to Tune when the loop returns (or reports
        # again): Tune stops the trial at it, and the loop's code after it should still run.
        self.pending: dict[str, Any] | None = None
        snap = train_snapshot.load(self.run_dir)
        latest = train_snapshot.latest(snap)
        self.kept: list[tuple[str, dict[str, Any], int]] = []
        if snap is not None and latest is not None:
            metrics = {r["checkpoint_dir_name"]: dict(r.get("metrics") or {})
                       for r in snap["checkpoint_results"]}
            self.kept = [(name, metrics[name], index)
                         for name, index in train_snapshot.entries(snap)]
        self.latest = latest[0] if latest else None
        # What get_checkpoint() answers rank 0: the latest checkpoint when the attempt
        # started, then the latest one rank 0 itself passed to report (a Train worker's own
        # latest: a checkpoint made of other ranks' files only does not change it).
        self.own = self.latest
        self.next_index = int(snap.get("current_report_index") or 0) if snap and latest else 0

    def checkpoint(self) -> Any:
        """What ``ray.train.get_checkpoint()`` returns on rank 0, or None."""
        return checkpoint_at(self.run_dir, self.own)

    def reported(self) -> list[tuple[Any, dict[str, Any]]]:
        """``ray.train.get_all_reported_checkpoints()``."""
        return reported_checkpoints(self.run_dir)

    def restart(self) -> None:
        """Before the loop runs again from the latest checkpoint: the report count goes back
        to the reports that checkpoint covers (as a retried trial's does, from the report
        log; Train's report index also counts reports lost before earlier restarts)."""
        from sweeps.execution import report_log

        self.clock.count = report_log.reports_before(self.run_dir)
        self.own = self.latest

    def report(self, metrics: dict[str, Any], checkpoint: Any = None,
               checkpoint_dir_name: str | None = None, delete_source: bool = False,
               upload: Any = None) -> None:
        """``ray.train.report``: persist and register the checkpoint, stamp the clock, log the
        report, hand it to Tune (which blocks until Tune has taken it, or raises to stop)."""
        try:
            self._report(metrics, checkpoint, checkpoint_dir_name, delete_source, upload)
        except BaseException as exc:  # Tune stopped the trial (SystemExit), or it failed
            if self.ranks is not None:  # the other ranks end their reports now, before any
                self.ranks.meet.abort(_ended(exc))  # collective in the loop's unwind
            raise

    def _report(self, metrics: dict[str, Any], checkpoint: Any, checkpoint_dir_name: str | None,
                delete_source: bool, upload: Any) -> None:
        from ray import tune

        from sweeps.execution import report_log

        self.flush()  # a report past the budget: Tune ends the trial here
        path = None
        # With peers, every rank reports here together, and any rank's checkpoint makes one.
        some = self.ranks.arrive(checkpoint is not None) if self.ranks else checkpoint is not None
        name = None
        if some:
            name = checkpoint_dir_name or f"checkpoint_{datetime.now():%Y-%m-%d_%H-%M-%S.%f}"
            if checkpoint is not None:
                path = str(self._persist(checkpoint, name, delete_source, upload))
                self.own = name
            else:  # the other ranks' parts only: none of an earlier attempt's files
                files.remove_tree(self.run_dir / name)
                path = str(self.run_dir / name)
        if self.ranks:
            self.ranks.stored(name)
        if name is not None:
            self._register(name, dict(metrics))
        self.next_index += 1
        stamped = report_log.record(self.clock, dict(metrics), path)
        handover = {**stamped, CHECKPOINT_PATH_KEY: path} if path else stamped
        if float(stamped[CLOCK_KEY]) >= self.budget:
            self.pending = handover  # Tune would stop the loop inside this call
        else:
            tune.report(handover)
        if self.ranks:
            self.ranks.go()

    def flush(self) -> None:
        """Hand Tune the budget's last report, if one waits (Tune then ends the trial: in this
        thread that is a ``SystemExit`` raised here, as at any report of a stopped trial)."""
        from ray import tune

        pending, self.pending = self.pending, None
        if pending is not None:
            tune.report(pending)

    def _persist(self, checkpoint: Any, name: str, delete_source: bool, upload: Any) -> Path:
        target = self.run_dir / name
        remote = filesystem(target)
        if remote is None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        if upload is not None:  # the loop's checkpoint_upload_fn, called as Train calls it
            uploaded = upload(checkpoint, name)
            path = str(getattr(uploaded, "path", ""))
            if (path != remote[1]) if remote else (Path(path).resolve() != target.resolve()):
                raise ValueError(f"ray.train.report(checkpoint_upload_fn=...) returned "
                                 f"{getattr(uploaded, 'path', uploaded)!r}; an inline trial "
                                 f"keeps its checkpoints in {target}: return "
                                 "ray.train.Checkpoint(<that path>), or run the sweep with "
                                 "trial.executor=train")
            return target
        source = Path(checkpoint.path)
        if remote is None and source.resolve() == target.resolve():
            return target
        files.put_tree(source, target)  # replaces the same name reported again after a restart
        if delete_source:
            shutil.rmtree(source, ignore_errors=True)
        return target

    def _register(self, name: str, metrics: dict[str, Any]) -> None:
        """Add a checkpoint as Train's checkpoint manager does: ordered by score (ties by
        report), the worst beyond ``keep`` deleted unless latest; the snapshot rewritten."""
        kept = [k for k in self.kept if k[0] != name] + [(name, metrics, self.next_index)]
        kept.sort(key=lambda k: (score_key(k[1], self.metric, self.mode), k[2]))
        self.latest = name
        dropped = [k for k in kept[:-self.keep] if k[0] != name]  # checkpoint.keep >= 1
        self.kept = [k for k in kept if k not in dropped]
        train_snapshot.write(self.run_dir, train_snapshot.rebuilt(
            self.kept, latest_name=name, next_index=self.next_index + 1))
        for old, _, _ in dropped:
            files.remove_tree(self.run_dir / old)


@contextlib.contextmanager
def world_of_one(use_gpu: bool) -> Iterator[None]:
    """What a 1-worker Train run gives its loop besides the API: a torch.distributed process
    group of size 1 (so ``dist.barrier()``, ``dist.get_rank()``, Accelerate and Lightning work
    unguarded) and the ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/... variables; both undone after."""
    from sweeps.execution.rendezvous import WorldSpec, joined_world

    with joined_world(WorldSpec(1, 0, 0, 1, 0, "127.0.0.1", 0, ""), None, use_gpu):
        yield


@contextlib.contextmanager
def _attempt(plan: TrialPlan, trial_id: str, run: InlineRun, config: dict[str, Any],
             datasets: dict[str, Any]) -> Iterator[None]:
    """One attempt of the loop, whose body runs rank 0: alone, or with the process's peers
    running ranks 1.. (``sweeps.execution.peers``) in a process group made for it."""
    from sweeps._ray.train_fn import serving

    if plan.num_workers == 1:
        with world_of_one(plan.use_gpu), serving(name=trial_id, report=run.report,
                                                 get_checkpoint=run.checkpoint,
                                                 reported=run.reported, datasets=datasets):
            yield
        return
    from sweeps.execution.peers import PeerJob, RankZeroReports, attempt_prefix, peer_group
    from sweeps.execution.rank_error import attempt_error, first_reason, peer_failure
    from sweeps.execution.rendezvous import RETURNED, Rendezvous, ReportMismatch, joined_world

    group = peer_group(plan.num_workers, plan.worker_resources)
    group.ensure()
    store = group.rank_zero_store()
    prefix = attempt_prefix(trial_id)
    worlds = group.worlds(store.host, store.port, prefix, plan.backend)
    meet = Rendezvous(store, prefix, 0, plan.num_workers, alive=group.alive)
    run.ranks = RankZeroReports(meet)
    group.start([PeerJob(trial_id=trial_id, trainable=plan.trainable,
                         context=plan.context(trial_id), config=dict(config), world=world,
                         run_dir=str(run.run_dir), latest=run.latest) for world in worlds[1:]],
                meet)
    ended = None
    try:
        # Every peer reached its loop's start (the process group would wait for a peer that
        # died meanwhile for its whole timeout; this wait notices).
        meet.barrier("ready")
        with joined_world(worlds[0], store), serving(
                name=trial_id, report=run.report, get_checkpoint=run.checkpoint,
                reported=run.reported, datasets=datasets, world=worlds[0], meet=meet):
            try:
                yield
            except BaseException as exc:
                ended = _ended(exc)
                raise
            else:
                ended = RETURNED
            finally:  # before the process group goes: a peer in a collective then sees why
                meet.abort(ended)
    except BaseException as exc:  # before the loop started, or raised by it
        ended = ended or _ended(exc)
        meet.abort(ended)
        failed = _finish(group, trial_id, ended)
        if not isinstance(exc, Exception) or isinstance(exc, ReportMismatch):
            raise
        own = attempt_error(exc, failed, group.errors.get(failed[0]) if failed else None,
                            plan.num_workers, first_reason(meet))
        if own is exc:
            raise
        raise own from None  # the failing rank's own error, not gloo's "Connection closed"
    else:
        meet.abort(RETURNED)
        failed = _finish(group, trial_id, RETURNED)
        if failed:  # a peer raised or died after rank 0 returned: a Train run fails then too
            raise peer_failure(failed, group.errors.get(failed[0]), plan.num_workers) from None
    finally:
        run.ranks = None


def _finish(group: PeerGroup, trial_id: str, ended: str) -> tuple[int, str] | None:
    """Wait for the peers to end the attempt rank 0 ended (``ended``: why); log what went
    wrong with them; the peer failure that caused the end (its rank, a sentence), if any: the
    first the watch saw unless it is only a symptom, then the lowest rank with an error of its
    own (a process that died counts as one). After a failed attempt (any rank raised or died)
    the peers are replaced for the next one, as Ray Train replaces its worker group; after a
    stop or a return they are kept."""
    from sweeps.execution.rank_error import is_consequence
    from sweeps.execution.rendezvous import RETURNED, STOPPED

    failures = []
    for rank, (kind, text) in enumerate(group.finish(returned=ended == RETURNED), start=1):
        if kind in ("raised", "died"):
            failures.append((rank, text))
        elif ended == RETURNED and kind != "returned":
            log.warning("trial %s: rank 0's loop returned, but %s", trial_id, text)
    if group.failed and group.failed_rank is not None:  # read after finish() joined the watch
        failures.sort(key=lambda f: f[0] != group.failed_rank)
    own = [f for f in failures
           if f[0] not in group.errors or not is_consequence(group.errors[f[0]].error)]
    failed = (own or failures or [None])[0]
    if failed or ended not in (RETURNED, STOPPED):
        group.replace()
    return failed


def _ended(exc: BaseException) -> str:
    """Why rank 0 ended an attempt, as the peers read it: stopped by Tune (the ``SystemExit``
    of a report), or raised."""
    from sweeps.execution.rendezvous import STOPPED

    if not isinstance(exc, Exception):
        return STOPPED
    return f"rank 0 raised {type(exc).__name__}: {exc}"


def run_inline(plan: TrialPlan, trial_id: str, run_dir: Path, config: dict[str, Any],
               clock: TrialClock) -> None:
    """Run the trial's loop here (rank 0; the other ranks in this process's peers) until it
    returns, restarting it from its latest checkpoint when a rank raises or a peer dies (up to
    ``plan.max_failures``; -1: always), except after it ran out of GPU memory
    (``sweeps.execution.gpu_memory``: the same values would allocate the same again)."""
    from sweeps.config.validate import import_trainable
    from sweeps.execution import gpu_memory
    from sweeps.execution.worker import loop_entry

    run = InlineRun(run_dir, plan.objective.metric, plan.objective.mode, plan.checkpoint_keep,
                    clock, float(plan.objective.budget))
    entry = loop_entry(import_trainable(plan.trainable), plan.context(trial_id))
    datasets = {name: ds.iterator() for name, ds in plan.datasets.items()}
    failures = 0
    while True:
        started = time.monotonic()
        try:
            with _attempt(plan, trial_id, run, config, datasets):
                entry(config)
                run.flush()
            return
        except Exception as exc:
            from sweeps.execution.rendezvous import ReportMismatch

            if isinstance(exc, ReportMismatch):  # the same again on every restart
                raise
            if run.pending is not None:  # raised after its last report: the trial is done
                log.warning("trial %s: the loop raised %s: %s after its last report",
                            trial_id, type(exc).__name__, exc)
                run.flush()
                return
            if gpu_memory.noted(run_dir) is not None:  # out of GPU memory: not rerun
                raise
            if plan.max_failures != -1 and failures >= plan.max_failures:
                raise
            failures += 1
            log.warning("trial %s: the loop raised %s: %s after %.1f s; restarting it from "
                        "%s (failure %d of %s, trial.max_failures)", trial_id,
                        type(exc).__name__, exc, time.monotonic() - started,
                        run.latest or "the start", failures,
                        "unlimited" if plan.max_failures == -1 else plan.max_failures)
            run.restart()
