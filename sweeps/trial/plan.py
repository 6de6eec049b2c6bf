"""What every trial of a sweep shares: the ``TrialPlan`` the driver builds once.

    plan = trial_plan(cfg, prep.params, sweep_dir, ...)           # sweeps.driver.tuner
    tune.with_parameters(run_trial, plan=plan)                     # one plan, every trial

The plan travels to each Tune trial process (pickled into Ray's object store) and tells
``sweeps.trial.driver.run_trial`` and its backend everything besides the trial's sampled
values: the loop to run, its fixed params, the storage, the scaling, the objective, the
checkpoint and failure policy, which backend runs the trial (``executor``) and what that
backend built for itself (``backend_options``: ``TrialBackend.options``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps.loop.context import TrialContext
from sweeps.search.outcome import Objective
from sweeps.search.space import deep_merge, unflatten

__all__ = ["TrialPlan"]


@dataclass(frozen=True)
class TrialPlan:
    """Everything a trial driver needs besides the sampled values (shared by all trials).

    Example:
        >>> TrialPlan(**_EXAMPLE).context("t1").run_dir
        '/tmp/train/t1'
    """

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
    seed: int
    ended: dict[str, dict[str, Any]] = field(default_factory=dict)  # resumed: ended trials
    # experiment.datasets, built and materialized once by the driver (sweeps.driver.datasets)
    datasets: dict[str, Any] = field(default_factory=dict)
    # trial.executor resolved: the trial backend that runs it (sweeps.trial.backends), and what
    # it built for itself (TrialBackend.options: a Train trial's TrainOptions; None: nothing)
    executor: str = "train"
    backend_options: Any = None
    # scaling.backend resolved (nccl on GPU, gloo on CPU, or the user's): the torch.distributed
    # backend of the trial's ranks (Ray Train's TorchConfig(backend=...)), not the trial backend
    backend: str = "gloo"
    # "tune" for a Ray Tune function trainable (ray.tune.report), else "train"
    # (sweeps.config.loop_api): which of Ray's APIs its loop is served
    loop_api: str = "train"
    system_metrics: bool = False  # tracking.system_metrics, off without tracking.enabled

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
                            metric=self.objective.metric, mode=self.objective.mode,
                            system_metrics=self.system_metrics)


_EXAMPLE: dict[str, Any] = dict(  # a minimal plan, for the docstring examples
    sweep_id="s", trainable="m:f", params={}, constants={}, train_storage="/tmp/train",
    worker_resources={"CPU": 1.0}, num_workers=1, use_gpu=False,
    objective=Objective("val_acc", "max", 9), time_attr="epoch", checkpoint_every=1,
    checkpoint_keep=2, max_failures=0, seed=0)
