"""The trial driver: one Tune trial = one Ray Train ``TorchTrainer`` run, or the loop inline.

    tune.with_parameters(run_trial, plan=TrialPlan(...))   # built by sweeps.execution.tuner

Runs inside the Tune trial actor. It merges the trial's sampled values into the experiment's fixed
params (that flat dict is the loop's ``config``, as ``train_loop_config`` is in Ray's docs), then
starts a Train run named by the trial id under ``<sweep dir>/train`` whose workers run the user's
loop through ``sweeps.execution.worker`` (which sets ``sweeps.trial_context()`` and notes the config
keys read), with the report bridge (metrics, checkpoint path and the trial's clock back to Tune:
``sweeps.execution.report_bridge``) and the placement-group ledger (``sweeps.placement``). A Train
run resumes from its latest checkpoint when started again with the same (storage path, name), so a
retried or resumed trial picks up where it stopped. With ``plan.inline`` (``trial.executor``) the
loop runs right here instead (rank 0; other ranks in peer processes this one keeps), writing the
same run directory (``sweeps.execution.inline``). A loop that ran out of GPU memory ends its trial
without raising, so Tune does not retry it (``sweeps.execution.gpu_memory``).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sweeps.execution.context import TrialContext
from sweeps.search.outcome import Objective
from sweeps.search.space import deep_merge, unflatten

__all__ = ["TrialPlan", "run_trial", "start_limits", "unseen_reports", "end_out_of_memory"]

log = logging.getLogger(__name__)

START_ATTEMPT_S = 60.0  # Ray Train's own wait per worker-group start attempt


@dataclass(frozen=True)
class TrialPlan:
    """Everything a trial driver needs besides the sampled values (shared by all trials)."""

    sweep_id: str
    trainable: str
    params: dict[str, Any]
    constants: dict[str, Any]
    train_storage: str
    worker_resources: dict[str, float]
    num_workers: int
    use_gpu: bool
    objective: Objective  # the metric, its mode and the epoch budget (scheduler.max_t)
    time_attr: str | None
    checkpoint_every: int
    checkpoint_keep: int
    max_failures: int
    poll_interval_s: float
    start_timeout_s: float
    seed: int
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)  # resumed: ended trials
    # Ray Train's per-run actor that watches for node drains (spot preemption): on a cluster
    # only; on one machine there is no other node to lose and it costs a process per trial.
    preemption_watcher: bool = True
    # experiment.datasets, built and materialized once by the driver (sweeps.execution.datasets)
    datasets: dict[str, Any] = field(default_factory=dict)
    datasets_to_split: list[str] | None = None  # None: all of them (Ray Train's default)
    # trial.executor resolved: the loop runs in the trial process itself, no Train run
    # (1 worker; sweeps.execution.inline)
    inline: bool = False
    # scaling.backend resolved (nccl on GPU, gloo on CPU, or the user's): Ray Train's
    # TorchConfig(backend=...) for a Train run; an inline trial has no DDP peers
    backend: str = "gloo"
    # What the Tune trial driver reserves besides TRIAL_DRIVER_RESOURCES (a Train trial's: on
    # a cluster, a pin to the head node; sweeps.execution.tuner.trial_plan)
    driver_pin: dict[str, float] = field(default_factory=dict)

    def worker_config(self, sampled: dict[str, Any]) -> dict[str, Any]:
        """The ``config`` every Train worker receives: the experiment's params, its constants
        and this trial's sampled values, merged; dotted keys nested. Nothing else.

        Example:
            >>> plan = TrialPlan(**{**_EXAMPLE, "params": {"lr": 0.1, "opt": {"b": 1}}})
            >>> plan.worker_config({"lr": 0.01, "opt": {"b": 2}})
            {'lr': 0.01, 'opt': {'b': 2}}
        """
        return deep_merge(deep_merge(self.params, unflatten(self.constants)), sampled)

    def context(self, trial_id: str) -> TrialContext:
        """What ``sweeps.trial_context()`` returns in this trial's workers."""
        return TrialContext(trial_id=trial_id, run_dir=str(Path(self.train_storage) / trial_id),
                            max_epochs=int(self.objective.budget),
                            checkpoint_every=self.checkpoint_every, seed=self.seed,
                            metric=self.objective.metric, mode=self.objective.mode)


_EXAMPLE: dict[str, Any] = dict(  # a minimal plan, for the docstring examples
    sweep_id="s", trainable="m:f", params={}, constants={}, train_storage="/tmp/train",
    worker_resources={"CPU": 1.0}, num_workers=1, use_gpu=False,
    objective=Objective("val_acc", "max", 9), time_attr="epoch", checkpoint_every=1,
    checkpoint_keep=2, max_failures=0, poll_interval_s=0.1, start_timeout_s=60.0, seed=0)


def run_trial(sampled: dict[str, Any], plan: TrialPlan) -> None:
    """Tune function trainable: run this trial's Train run to completion (or until stopped)."""
    from ray import tune
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig

    from sweeps._ray.train import controller_env, count_handovers, trainer_class, wait_for_handover
    from sweeps.config.validate import import_trainable
    from sweeps.execution.clock import TrialClock
    from sweeps.execution.report_bridge import SweepReportCallback
    from sweeps.execution.worker import loop_entry
    from sweeps.placement.ledger import PlacementGroupLedger, trial_stopped
    from sweeps.storage.location import uri_of

    trial_id = tune.get_context().get_trial_id()
    if trial_id in plan.ended:
        # Ended before the sweep was interrupted (Tune's saved state lagged behind): report the
        # final result again so Tune and the scheduler close it; train nothing.
        tune.report(dict(plan.ended[trial_id]))
        return
    from sweeps.execution import report_log
    from sweeps.execution.exploit import take_exploit
    from sweeps.resume.train_runs import claim_run, repair_run

    run_dir = Path(plan.train_storage) / trial_id
    # PBT: a pending exploit reseeds the run from its donor's checkpoint, with explored values.
    sampled = take_exploit(run_dir, trial_id, sampled, plan.sweep_id)
    config = plan.worker_config(sampled)
    for note in claim_run(run_dir, config) + repair_run(run_dir):
        log.warning(note)
    clock = TrialClock.load(run_dir, plan.time_attr, report_log.reports_before(run_dir))
    counting = None if plan.inline else count_handovers()
    unseen = unseen_reports(run_dir, Path(plan.train_storage).parent, trial_id)
    for metrics in unseen:
        tune.report(metrics)  # trained and checkpointed before an interruption; Tune never saw
    from sweeps._ray.tune import THREAD_TIMEOUT_ENV

    # Tune reuses this process for the next trial only if this thread ends within its wait
    # (2 s by default), else it fails that trial; a loop's cleanup may take longer.
    os.environ.setdefault(THREAD_TIMEOUT_ENV, "60")
    from sweeps.execution import gpu_memory

    gpu_memory.clear(run_dir)  # this attempt runs the loop, whatever an earlier one ran into
    if plan.inline:
        from sweeps.execution.inline import run_inline

        try:
            run_inline(plan, trial_id, run_dir, config, clock)
        except Exception:
            if gpu_memory.noted(run_dir) is None:
                raise
        else:
            return
        end_out_of_memory(plan, run_dir)  # outside the except: its tensors are released
        return
    logged_before = len(report_log.records(run_dir))
    # Read by the Train controller this process starts (Ray propagates RAY_TRAIN_* env vars).
    attempt_s, start_failures = start_limits(plan.start_timeout_s)
    os.environ.update(controller_env(plan.poll_interval_s, attempt_s, plan.preemption_watcher))
    trainer = trainer_class()(
        train_loop_per_worker=loop_entry(import_trainable(plan.trainable),
                                         plan.context(trial_id)),
        train_loop_config=config,
        torch_config=TorchConfig(backend=plan.backend),
        datasets=dict(plan.datasets) or None,
        dataset_config=data_config(plan.datasets_to_split),
        scaling_config=ScalingConfig(num_workers=plan.num_workers, use_gpu=plan.use_gpu,
                                     resources_per_worker=dict(plan.worker_resources)),
        run_config=RunConfig(
            name=trial_id,
            storage_path=uri_of(plan.train_storage),  # the URI itself on an object store
            checkpoint_config=CheckpointConfig(
                num_to_keep=plan.checkpoint_keep,
                checkpoint_score_attribute=plan.objective.metric,
                checkpoint_score_order=plan.objective.mode),
            failure_config=FailureConfig(max_failures=plan.max_failures,
                                         controller_failure_limit=start_failures),
            callbacks=[SweepReportCallback(clock, partial(trial_stopped, plan.sweep_id, trial_id)),
                       PlacementGroupLedger(plan.sweep_id, trial_id)],
        ),
    )
    ran_out = False
    try:
        trainer.fit()
    except Exception as exc:
        if gpu_memory.noted(run_dir) is None:
            from sweeps.execution.rank_error import from_train_run

            own = from_train_run(exc, plan.num_workers)
            if own is exc:
                raise
            raise own from None  # the failing rank's error; the others' in its notes
        ran_out = True  # a worker ran out of GPU memory: end the trial, do not raise
    # Every report the bridge forwarded (one log line each) must reach Tune before returning;
    # a trial the sweep stopped had its late reports dropped (sweeps.execution.report_bridge).
    if not trial_stopped(plan.sweep_id, trial_id):
        wait_for_handover(counting,
                          len(unseen) + len(report_log.records(run_dir)) - logged_before)
    if ran_out:
        end_out_of_memory(plan, run_dir)


def end_out_of_memory(plan: TrialPlan, run_dir: Path) -> None:
    """End a trial whose loop ran out of GPU memory, without raising: its reason goes to Tune
    as ``ERROR_KEY`` and the scheduler fails the trial, so Tune does not retry it
    (``sweeps.execution.gpu_memory`` says why)."""
    from ray import tune

    from sweeps.execution import gpu_memory
    from sweeps.protocol import ERROR_KEY

    found = gpu_memory.noted(run_dir) or {}
    gpu_memory.release_cached_memory()
    text = gpu_memory.reason(found, plan.worker_resources.get("GPU"))
    log.warning("trial %s: %s", run_dir.name, text)
    tune.report({ERROR_KEY: text})


def data_config(datasets_to_split: list[str] | None) -> Any:
    """Ray Train's ``DataConfig`` splitting the named datasets (None: its default, all)."""
    from ray.train import DataConfig

    return DataConfig(datasets_to_split="all" if datasets_to_split is None
                      else list(datasets_to_split))


def start_limits(start_timeout_s: float) -> tuple[float, int]:
    """(seconds per worker-group start attempt, start failures tolerated) for a trial whose
    workers may wait ``start_timeout_s`` for resources (-1: forever, Ray Train's default).

    Example:
        >>> start_limits(600), start_limits(20), start_limits(-1)
        ((60.0, 9), (20.0, 0), (60.0, -1))
    """
    if start_timeout_s == -1:
        return START_ATTEMPT_S, -1
    attempt_s = min(START_ATTEMPT_S, float(start_timeout_s))
    return attempt_s, max(0, math.ceil(start_timeout_s / attempt_s) - 1)


def unseen_reports(run_dir: Path, sweep_dir: Path, trial_id: str) -> list[dict[str, Any]]:
    """Reports the trial made before an interruption that never reached Tune (its scheduler
    log has no judgement of them) and that its restored checkpoint covers, oldest first.

    Re-reporting them before training resumes lets ASHA judge them (and stop the trial at a
    rung it would otherwise skip) and MLflow log them (``sweeps.execution.report_log``).
    """
    from sweeps.execution import report_log
    from sweeps.execution.exploit import judged_clock
    from sweeps.search.schedulers import decision_log

    return report_log.unseen(run_dir, judged_clock(decision_log(sweep_dir).records(), trial_id))
