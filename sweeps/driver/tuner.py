"""Build the Ray Tune ``Tuner`` for a validated sweep config.

    tuner = build_tuner(cfg, space, plan, sweep_dir, callbacks)
    results = tuner.fit()

Search: ``sweeps.search.searchers``. Scheduler: ASHA (MO-ASHA with several objectives), PBT or
FIFO, on the trial's clock (``sweeps.trial.clock``), never Tune's ``training_iteration``, which
restarts at 1 after a restore; all stop a trial at the budget ``scheduler.max_t``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps._ray.tune import newest_trial_statuses, replace_restored_config
from sweeps.config.schema import SweepConfig
from sweeps.driver.resources import ResourcePlan
from sweeps.layout import SweepLayout
from sweeps.resume.removed import removed_classes_load
from sweeps.search.outcome import Objective
from sweeps.search.searchers import make_search_alg, tune_param_space
from sweeps.search.space import Param
from sweeps.storage.location import storage_of, uri_of
from sweeps.trial.backends import backend_for
from sweeps.trial.driver import run_trial
from sweeps.trial.plan import TrialPlan

if TYPE_CHECKING:  # Ray stays off the --help and dry-run path
    from ray.tune import Callback, Tuner

    from sweeps.search.budget import BudgetLedger
    from sweeps.search.schedulers import ResumableASHA, ResumableFIFO
    from sweeps.search.warm_start import WarmStart

__all__ = ["build_tuner", "restore_tuner", "make_search_alg", "make_scheduler", "trial_plan",
           "objective_of", "reuses_process"]


def make_scheduler(cfg: SweepConfig, sweep_dir: Path, params: list[Param],
                   ledger: BudgetLedger | None = None) -> ResumableASHA | ResumableFIFO | Any:
    """ASHA over reported epochs (MO-ASHA, ``sweeps.search.moasha``, with several
    ``experiment.metrics``), PBT over ``params`` (the space ``prepare`` parsed), or FIFO (every
    trial runs ``scheduler.max_t`` epochs); all log their decisions under ``sweep_dir`` so a
    resumed sweep keeps them. With a ``ledger`` (``sweep.budget``), inside
    ``sweeps.search.budget_scheduler.BudgetScheduler``."""
    scheduler = _make_scheduler(cfg, sweep_dir, params)
    scheduler.max_running = cfg.search.max_concurrent_trials
    if ledger is None:
        return scheduler
    from sweeps.search.budget_scheduler import BudgetScheduler

    return BudgetScheduler(scheduler, ledger)


def _make_scheduler(cfg: SweepConfig, sweep_dir: Path,
                    params: list[Param]) -> ResumableASHA | ResumableFIFO | Any:
    from sweeps.search.schedulers import ResumableASHA, ResumableFIFO

    s = cfg.scheduler
    if s.name == "pbt":
        from sweeps.search.pbt import ResumablePBT

        return ResumablePBT(sweep_dir, objective_of(cfg), params, s, cfg.sweep.seed)
    if s.name == "none":
        return ResumableFIFO(sweep_dir, objective_of(cfg))
    if len(cfg.experiment.metrics) > 1:  # MO-ASHA: promotion by non-dominated sort
        from sweeps.search.moasha_scheduler import ResumableMOASHA

        return ResumableMOASHA(sweep_dir, objective_of(cfg), dict(cfg.experiment.metrics),
                               grace_period=s.grace_period, reduction_factor=s.reduction_factor)
    return ResumableASHA(sweep_dir, objective_of(cfg), grace_period=s.grace_period,
                         reduction_factor=s.reduction_factor)


def objective_of(cfg: SweepConfig) -> Objective:
    """The sweep's metric, mode and per-trial epoch budget."""
    return Objective(cfg.experiment.metric, cfg.experiment.mode, cfg.scheduler.max_t)


def trial_plan(cfg: SweepConfig, constants: dict[str, Any], plan: ResourcePlan,
               sweep_dir: Path, sweep_id: str, ended: dict[str, dict[str, Any]] | None = None,
               datasets: dict[str, Any] | None = None) -> TrialPlan:
    """The per-sweep context every trial driver receives (``ended``: trials a resumed sweep
    knows have ended, with their final metrics; ``datasets``: the built Ray Datasets)."""
    e = cfg.experiment
    return TrialPlan(
        sweep_id=sweep_id, trainable=e.trainable, params=dict(e.params), constants=constants,
        train_storage=str(SweepLayout(sweep_dir).train), worker_resources=plan.worker_resources,
        num_workers=plan.num_workers, use_gpu=plan.use_gpu, objective=objective_of(cfg),
        time_attr=e.time_attr, checkpoint_every=cfg.checkpoint.every,
        checkpoint_keep=cfg.checkpoint.keep, max_failures=cfg.trial.max_failures,
        seed=cfg.sweep.seed, ended=ended or {}, datasets=datasets or {}, executor=plan.executor,
        backend_options=backend_for(plan.executor).options(cfg, plan), backend=plan.backend,
        loop_api=plan.loop_api, system_metrics=cfg.tracking.enabled and cfg.tracking.system_metrics,
    )


def reuses_process(cfg: SweepConfig, executor: str) -> bool:
    """Whether a trial's process runs the next trial too (Tune's ``reuse_actors``): with
    ``trial.reuse_process``, as the trial backend allows (a Train trial not under PBT:
    ``sweeps.trial.backends.train.TrainBackend.reuses_process`` says why)."""
    return backend_for(executor).reuses_process(cfg.trial.reuse_process, cfg.scheduler.name)


def _trainable(trial: TrialPlan) -> Any:
    """``run_trial`` with the plan bound, reserving what the trial's backend costs
    (``TrialBackend.trial_resources``)."""
    from ray import tune

    resources = backend_for(trial.executor).trial_resources(trial)
    return tune.with_resources(tune.with_parameters(run_trial, plan=trial), resources)


def build_tuner(cfg: SweepConfig, params: list[Param], trial: TrialPlan, plan: ResourcePlan,
                sweep_dir: Path, callbacks: list[Callback], warm: WarmStart | None = None,
                resizable: bool = False, ledger: BudgetLedger | None = None) -> Tuner:
    """A ``tune.Tuner`` whose experiment directory is ``sweep_dir`` itself.

    ``resizable``: the trial limit is held by a search algorithm the Tuner keeps (an Optuna
    search wrapped in a ``ConcurrencyLimiter`` here, not by Tune inside ``fit``), so that
    ``sweeps.driver.cluster_watch`` can change it while Tune runs."""
    from ray import tune

    generator = cfg.search.algorithm in ("random", "grid")  # limits its own concurrency
    search_alg = make_search_alg(cfg, plan.max_concurrent_trials, params, warm)
    limit: int | None = None if generator else plan.max_concurrent_trials
    if resizable and not generator:
        from ray.tune.search import ConcurrencyLimiter

        search_alg, limit = ConcurrencyLimiter(search_alg, plan.max_concurrent_trials), None
    return tune.Tuner(
        _trainable(trial),
        param_space=tune_param_space(cfg, params),
        tune_config=tune.TuneConfig(
            metric=cfg.experiment.metric, mode=cfg.experiment.mode, search_alg=search_alg,
            scheduler=make_scheduler(cfg, sweep_dir, params, ledger),
            num_samples=1 if cfg.search.algorithm == "grid" else cfg.search.num_samples,
            max_concurrent_trials=limit, trial_dirname_creator=lambda t: t.trial_id,
            reuse_actors=reuses_process(cfg, trial.executor),
        ),
        run_config=tune.RunConfig(
            name=storage_of(sweep_dir)[1], storage_path=storage_of(sweep_dir)[0],
            callbacks=callbacks, verbose=1 if cfg.sweep.verbose else 0,
            failure_config=tune.FailureConfig(max_failures=cfg.trial.max_retries),
        ),
    )


def restore_tuner(cfg: SweepConfig, params: list[Param], trial: TrialPlan, sweep_dir: Path,
                  callbacks: list[Callback], ledger: BudgetLedger | None = None,
                  grown: bool = False, reopened: list[str] | None = None) -> Tuner:
    """``Tuner.restore`` of the sweep in ``sweep_dir``: finished trials stay finished,
    unfinished and errored ones continue from their checkpoints, the searcher's state is
    reloaded. This run's callbacks, scheduler and retry limit replace the pickled ones (the
    scheduler rebuilds its rungs from its log, see ``sweeps.search.schedulers``). ``grown``:
    the sweep grew on this or an earlier start (``sweeps.resume.grow``): its searcher suggests
    up to this ``search.num_samples`` (Tune's saved search state may predate the growth, e.g.
    after a kill -9 right after the grown record was saved; the trials a larger ``max_t``
    continues were reopened before). ``reopened``: ended trials this start runs again (a grown
    ``max_t``, a raised budget), counted in the search's trial limit."""
    from ray import tune

    with removed_classes_load():  # a callback class an earlier version pickled, since removed
        tuner = tune.Tuner.restore(uri_of(sweep_dir), _trainable(trial), resume_unfinished=True,
                                   resume_errored=True,
                                   param_space=tune_param_space(cfg, params, restoring=True))
    replace_restored_config(tuner, make_scheduler(cfg, sweep_dir, params, ledger), callbacks,
                            verbose=1 if cfg.sweep.verbose else 0,
                            failure_config=tune.FailureConfig(max_failures=cfg.trial.max_retries))
    from sweeps._ray.tune_grow import grow_search

    grow_search(tuner, 0 if cfg.search.algorithm == "grid" else cfg.search.num_samples,
                reopened, newest_trial_statuses(sweep_dir))
    return tuner
