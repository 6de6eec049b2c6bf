"""The inline executor: a trial's loop runs in the Tune trial process, no Train run.

    python -m sweeps +experiment=digits scaling.num_workers=1       # trial.executor=auto
    python -m sweeps +experiment=digits scaling.num_workers=2       # the same, on CPUs
    InlineBackend().run(attempt)            # from sweeps.trial.driver.run_trial

With more than one worker, rank 0 runs here and ranks 1.. in peer processes this process keeps
for its next trial (``sweeps.trial.backends.peers``), reporting as a Train run's ranks do.

A Ray Train run of one worker costs a controller, a worker, a synchronization and a queue process
per trial, each a cold Python start that imports Ray and torch: about 10 s per trial on 2 cores, for
a world of size 1 that needs no process group. Here the loop runs in the Tune trial actor, with Ray
Train's per-worker API served in-process (``sweeps._ray.train_fn``; which calls, and what a rank is
served: docs/backends.md#trial-backends-inline-or-a-ray-train-run), and the run directory is written
as Train writes it (``sweeps.trial.backends.inline_run``). A loop that raises is restarted from its
latest checkpoint up to ``trial.max_failures`` times, as Train restarts its worker group (not after
running out of GPU memory: ``sweeps.loop.gpu_memory``); a trial process that dies is Tune's to retry
(``trial.max_retries``).

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.config.usercode import import_trainable
from sweeps.trial.backends.base import BackendRequest, Refusal, TrialAttempt, TrialBackend
from sweeps.trial.backends.inline_run import InlineRun, RankZeroReports, ended_by

if TYPE_CHECKING:
    from sweeps.trial.backends.peers import PeerGroup
    from sweeps.trial.clock import TrialClock
    from sweeps.trial.plan import TrialPlan

__all__ = ["InlineBackend", "InlineRun", "run_inline", "world_of_one"]

log = logging.getLogger(__name__)


class InlineBackend(TrialBackend):
    """The loop in the Tune trial process, ranks 1.. in peers it keeps (module docstring)."""

    name = "inline"

    @classmethod
    def refusal(cls, request: BackendRequest) -> Refusal | None:
        """Elastic trials, datasets split over several ranks, a Train API call it does not
        serve, GPU ranks of several workers: checked in that order."""
        n = request.num_workers
        if request.elastic:  # its peers are a fixed set; Ray Train's elastic policy resizes
            return Refusal("runs a fixed set of ranks and cannot grow or shrink a trial "
                           "(scaling.num_workers=[min, max])",
                           "set trial.executor=auto or trial.executor=train (a Ray Train run "
                           "resizes elastic trials), or a fixed scaling.num_workers",
                           "elastic trials (scaling.num_workers=[min, max]) run as Ray Train "
                           "runs, which resize them (trial.executor=train)")
        if n > 1 and request.datasets:
            return Refusal(f"runs ranks 1.. of a {n}-worker trial in peer processes, which do "
                           "not split experiment.datasets (Ray Train's DataConfig does)",
                           "set trial.executor=auto (a Train run for a trial with datasets "
                           "and more workers)")
        from sweeps.trial.backends.unserved import unserved_calls

        calls = ", ".join(unserved_calls(request.trainable) if request.trainable else [])
        if calls:
            return Refusal(f"runs the loop in the trial's own processes, which do not serve "
                           f"{calls} (the loop's module calls it)",
                           "set trial.executor=auto or trial.executor=train",
                           f"the loop calls {calls}, which the inline backend does not serve: "
                           "its trials run as Ray Train runs (trial.executor=train)")
        if n > 1 and request.use_gpu:
            return Refusal(f"runs the {n} ranks of a trial in the trial's own processes on "
                           "CPUs only (GPU ranks are not tested there in this release)",
                           "set trial.executor=auto (a Ray Train run for GPU trials of "
                           "several workers), or scaling.use_gpu=false")
        return None

    @classmethod
    def chosen_by_auto(cls, request: BackendRequest) -> bool:
        """A 1-worker trial anywhere; more workers on CPUs, without experiment.datasets, on a
        private local instance. ``auto`` keeps Ray Train runs for multi-worker trials on GPUs
        (nccl), for datasets (Train's DataConfig splits them) and on a cluster
        (``ray.address``, where a lost node costs Train only the workers that ran there).

        Example:
            >>> [InlineBackend.chosen_by_auto(BackendRequest(2, gpu)) for gpu in (False, True)]
            [True, False]
        """
        return request.num_workers == 1 or not (request.use_gpu or request.datasets
                                                or request.cluster)

    @classmethod
    def trial_resources(cls, plan: TrialPlan) -> Any:
        """The worker's share for the trial process (it trains); with more workers, a bundle
        more for each peer."""
        share = {"CPU": 0.0, **plan.worker_resources}
        if plan.num_workers == 1:
            return share
        from ray import tune

        return tune.PlacementGroupFactory([share] * plan.num_workers, strategy="PACK")

    @classmethod
    def describe(cls, num_workers: int, ddp_backend: str, api: str = "train") -> str | None:
        if api == "tune":
            return "inline: the Tune function runs in the trial's own process, as under a Tuner"
        if num_workers == 1:
            return ("inline: the loop runs in the trial's own process, no Train controller or "
                    "workers; trial.executor=train for a Ray Train run")
        return (f"{ddp_backend}, inline: rank 0 runs in the trial's own process, ranks 1.. in "
                "peer processes it keeps for its next trial, no Train controller; "
                "trial.executor=train for a Ray Train run")

    def run(self, attempt: TrialAttempt) -> None:
        """``run_inline``; a loop that ran out of GPU memory returns (its note is in the run
        directory: ``run_trial`` ends the trial outside this frame, its tensors released)."""
        from sweeps.loop import gpu_memory

        try:
            run_inline(attempt.plan, attempt.trial_id, attempt.run_dir, attempt.config,
                       attempt.clock)
        except Exception:
            if gpu_memory.noted(attempt.run_dir) is None:
                raise


@contextlib.contextmanager
def world_of_one(use_gpu: bool) -> Iterator[None]:
    """What a 1-worker Train run gives its loop besides the API: a torch.distributed process
    group of size 1 (so ``dist.barrier()``, ``dist.get_rank()``, Accelerate and Lightning work
    unguarded) and the ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/... variables; both undone after."""
    from sweeps.trial.backends.rendezvous import WorldSpec, joined_world

    with joined_world(WorldSpec(1, 0, 0, 1, 0, "127.0.0.1", 0, ""), None, use_gpu):
        yield


@contextlib.contextmanager
def _attempt(plan: TrialPlan, trial_id: str, run: InlineRun, config: dict[str, Any],
             datasets: dict[str, Any]) -> Iterator[None]:
    """One attempt of the loop, whose body runs rank 0: alone, or with the process's peers
    running ranks 1.. (``sweeps.trial.backends.peers``) in a process group made for it."""
    from sweeps._ray.train_fn import serving

    if plan.num_workers == 1:
        # a Tune function gets no process group and no RANK/WORLD_SIZE, as under a Tuner
        world = contextlib.nullcontext() if plan.loop_api == "tune" else world_of_one(plan.use_gpu)
        with world, serving(name=trial_id, report=run.report, get_checkpoint=run.checkpoint,
                            reported=run.reported, datasets=datasets):
            yield
        return
    from sweeps.trial.backends.peers import PeerJob, attempt_prefix, peer_group
    from sweeps.trial.backends.rank_error import attempt_error, first_reason, peer_failure
    from sweeps.trial.backends.rendezvous import RETURNED, Rendezvous, ReportMismatch, joined_world

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
                ended = ended_by(exc)
                raise
            else:
                ended = RETURNED
            finally:  # before the process group goes: a peer in a collective then sees why
                meet.abort(ended)
    except BaseException as exc:  # before the loop started, or raised by it
        ended = ended or ended_by(exc)
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
    from sweeps.trial.backends.rank_error import is_consequence
    from sweeps.trial.backends.rendezvous import RETURNED, STOPPED

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


def run_inline(plan: TrialPlan, trial_id: str, run_dir: Path, config: dict[str, Any],
               clock: TrialClock) -> None:
    """Run the trial's loop here (rank 0; the other ranks in this process's peers) until it
    returns, restarting it from its latest checkpoint when a rank raises or a peer dies (up to
    ``plan.max_failures``; -1: always), except after it ran out of GPU memory
    (``sweeps.loop.gpu_memory``: the same values would allocate the same again)."""
    from sweeps.loop import gpu_memory
    from sweeps.loop.worker import loop_entry

    # A Tune function's report that reaches the budget is Tune's to stop at, as under a Tuner
    # (it does not return); a Train loop's returns first, as in a Train run (InlineRun)
    run = InlineRun(run_dir, plan.objective.metric, plan.objective.mode, plan.checkpoint_keep,
                    clock, math.inf if plan.loop_api == "tune" else float(plan.objective.budget))
    if plan.num_workers > 1:  # the peers come up while this process imports the loop
        from sweeps.trial.backends.peers import peer_group

        peer_group(plan.num_workers, plan.worker_resources).ensure(plan.trainable, wait=False)
    entry = loop_entry(import_trainable(plan.trainable), plan.context(trial_id), plan.loop_api)
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
            from sweeps.report.failure import rank_of
            from sweeps.trial.backends.rendezvous import ReportMismatch
            from sweeps.trial.report_log import restored_clock

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
            rank = rank_of(exc) or ((0, plan.num_workers) if plan.num_workers > 1 else None)
            log.warning("trial %s: %s (after %.1f s)", trial_id, clock.restarted(
                f"rank {rank[0]} of {rank[1]}" if rank else "the loop", exc, failures + 1,
                -1 if plan.max_failures == -1 else plan.max_failures + 1,
                restored_clock(run_dir)), time.monotonic() - started)
            run.restart()
