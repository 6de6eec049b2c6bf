"""Building the sweep's Tune ``Tuner`` (``sweeps.driver.tuner``) without starting Ray."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
from ray.tune.search.basic_variant import BasicVariantGenerator
from ray.tune.search.optuna import OptunaSearch

from sweeps import compose
from sweeps._ray import placement
from sweeps.driver.resources import ResourcePlan
from sweeps.driver.tuner import (
    build_tuner,
    make_scheduler,
    make_search_alg,
    objective_of,
    trial_plan,
)
from sweeps.placement.reaper import PlacementGroupReaper
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import ResumableASHA, ResumableFIFO
from sweeps.search.space import parse_space


def _plan(max_concurrent: int = 3, cpus: float = 1.5, use_gpu: bool = False) -> ResourcePlan:
    return ResourcePlan(use_gpu=use_gpu, num_workers=2, cpus_per_worker=cpus,
                        gpus_per_worker=0.5 if use_gpu else 0.0,
                        max_concurrent_trials=max_concurrent, trials_that_fit=max_concurrent,
                        cluster_cpus=8.0, cluster_gpus=2.0 if use_gpu else 0.0)


@pytest.fixture(autouse=True)
def _no_ray(monkeypatch: pytest.MonkeyPatch):
    """No test here may reach Ray's cluster: node counts are faked, Ray must stay down."""
    import ray

    monkeypatch.setattr(placement, "alive_nodes", lambda: _nodes(1))
    monkeypatch.setattr(placement, "head_node_pin", lambda: {"node:__internal_head__": 0.001})
    yield
    assert not ray.is_initialized(), "a unit test started Ray"


def _nodes(alive: int) -> dict[str, dict[str, float]]:
    """What ``alive_nodes`` returns with ``alive`` nodes up."""
    return {f"n{i}": {"CPU": 2.0} for i in range(alive)}


def _first_draw(alg: OptunaSearch) -> float:
    study = optuna.create_study(sampler=alg._sampler)
    return study.ask().suggest_float("x", 0.0, 1.0)


def test_random_search_is_a_seeded_basic_variant_generator_with_the_limit() -> None:
    alg = make_search_alg(compose("digits", ["search=random", "sweep.seed=7"]), 3, [])
    assert isinstance(alg, BasicVariantGenerator)
    assert alg.max_concurrent == 3
    same, other = BasicVariantGenerator(random_state=7), BasicVariantGenerator(random_state=8)
    draw = alg._random_state.random()
    assert draw == same._random_state.random() != other._random_state.random()


def test_tpe_is_optuna_search_with_a_seeded_tpe_sampler() -> None:
    cfg = compose("digits", ["search=tpe", "sweep.seed=7", "search.n_startup_trials=6"])
    alg = make_search_alg(cfg, 3, [])
    assert isinstance(alg, OptunaSearch)
    assert isinstance(alg._sampler, optuna.samplers.TPESampler)
    assert alg._sampler._n_startup_trials == 6
    again = make_search_alg(cfg, 3, [])
    reseeded = make_search_alg(compose("digits", ["search=tpe", "sweep.seed=8"]), 3, [])
    assert _first_draw(alg) == _first_draw(again) != _first_draw(reseeded)


def test_asha_gets_grace_period_reduction_factor_and_the_budget(tmp_path: Path) -> None:
    cfg = compose("digits", ["scheduler=asha", "scheduler.grace_period=2",
                             "scheduler.reduction_factor=4", "scheduler.max_t=16"])
    scheduler = make_scheduler(cfg, tmp_path, [])
    assert isinstance(scheduler, ResumableASHA)
    h = scheduler._halving
    assert (h.grace_period, h.rf, h.max_t) == (2, 4, 16)
    assert scheduler._objective == Objective("val_acc", "max", 16)
    assert scheduler.metric == "val_acc"
    assert scheduler.log.path == tmp_path / "state" / "scheduler.jsonl"


def test_no_scheduler_is_resumable_fifo_with_the_budget(tmp_path: Path) -> None:
    scheduler = make_scheduler(compose("digits", ["scheduler=none", "scheduler.max_t=5"]),
                               tmp_path, [])
    assert type(scheduler) is ResumableFIFO
    assert scheduler._objective == Objective("val_acc", "max", 5)
    assert scheduler.log.path == tmp_path / "state" / "scheduler.jsonl"


def test_objective_is_metric_mode_and_max_t() -> None:
    cfg = compose("digits", ["experiment.metric=val_loss", "experiment.mode=min",
                             "scheduler.max_t=5"])
    assert objective_of(cfg) == Objective("val_loss", "min", 5)


def test_trial_plan_takes_every_field_from_the_config(tmp_path: Path) -> None:
    cfg = compose("digits", [
        "trial.max_failures=3", "trial.poll_interval_s=0.5", "trial.start_timeout_s=120",
        "checkpoint.every=2", "checkpoint.keep=4", "sweep.seed=11", "scheduler.max_t=12",
        "experiment.metric=val_loss", "experiment.mode=min"])
    ended = {"t9": {"val_loss": 0.5}}
    plan = trial_plan(cfg, {"net.width": 3}, _plan(cpus=1.5), tmp_path / "sw", "sid", ended)
    assert plan.sweep_id == "sid"
    assert plan.trainable == "trainables.digits:train_mlp"
    assert plan.params == dict(cfg.experiment.params) and plan.params["lr"] == 0.05
    assert plan.constants == {"net.width": 3}
    assert plan.train_storage == str(tmp_path / "sw" / "train")
    assert (plan.worker_resources, plan.num_workers, plan.use_gpu) == ({"CPU": 1.5}, 2, False)
    assert plan.objective == Objective("val_loss", "min", 12)
    assert plan.time_attr == cfg.experiment.time_attr
    assert (plan.checkpoint_every, plan.checkpoint_keep) == (2, 4)
    opts = plan.backend_options
    assert (plan.max_failures, opts.poll_interval_s, opts.start_timeout_s) == (3, 0.5, 120.0)
    assert plan.seed == 11 and plan.ended == ended
    assert plan.system_metrics and plan.context("t1").system_metrics  # tracking's default


@pytest.mark.parametrize(("overrides", "sampled"), [
    ([], True),
    (["tracking.system_metrics=false"], False),
    (["tracking.enabled=false"], False),  # no MLflow run to show them: none sampled
    (["tracking.enabled=false", "tracking.system_metrics=true"], False),
])
def test_trial_plan_samples_system_metrics_only_for_mlflow(tmp_path: Path, overrides,
                                                           sampled) -> None:
    plan = trial_plan(compose("digits", overrides), {}, _plan(), tmp_path, "sid")
    assert plan.context("t1").system_metrics is sampled


def test_trial_plan_with_gpus_and_no_ended_trials(tmp_path: Path) -> None:
    plan = trial_plan(compose("digits"), {}, _plan(use_gpu=True), tmp_path, "sid")
    assert plan.worker_resources == {"CPU": 1.5, "GPU": 0.5} and plan.use_gpu
    assert plan.ended == {}


@pytest.mark.parametrize("address, alive, watcher", [
    (None, 1, False),    # one machine: no node to lose, no watcher actor per trial
    (None, 3, True),     # a local instance others joined
    ("auto", 1, True),   # a cluster, whatever its size right now
])
def test_preemption_watcher_only_on_a_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              address: str | None, alive: int,
                                              watcher: bool) -> None:
    monkeypatch.setattr(placement, "alive_nodes", lambda: _nodes(alive))
    overrides = [f"ray.address={address}"] if address else []
    plan = trial_plan(compose("digits", overrides), {}, _plan(), tmp_path, "sid")
    assert plan.backend_options.preemption_watcher is watcher


@pytest.mark.parametrize("algorithm, tune_limit", [("tpe", 3), ("random", None)])
def test_build_tuner_wires_search_scheduler_and_run_config_without_ray(
        tmp_path: Path, algorithm: str, tune_limit: int | None) -> None:
    import ray
    from ray import tune

    cfg = compose("digits", [f"search={algorithm}", "search.num_samples=5",
                             "trial.max_retries=2", "scheduler.max_t=6"])
    params, constants = parse_space(cfg.experiment.search_space)
    sweep_dir = tmp_path / "outputs" / "my_sweep"
    plan = _plan(max_concurrent=3)
    callbacks = [PlacementGroupReaper("sid")]
    tuner = build_tuner(cfg, params, trial_plan(cfg, constants, plan, sweep_dir, "sid"), plan,
                        sweep_dir, callbacks)
    assert isinstance(tuner, tune.Tuner)
    assert not ray.is_initialized()
    inner = tuner._local_tuner
    tc, rc = inner._tune_config, inner._run_config
    assert (tc.metric, tc.mode, tc.num_samples) == ("val_acc", "max", 5)
    assert tc.max_concurrent_trials == tune_limit  # random search holds the limit itself
    if algorithm == "random":
        assert isinstance(tc.search_alg, BasicVariantGenerator)
        assert tc.search_alg.max_concurrent == 3
        assert set(inner._param_space) == {p.path.split(".")[0] for p in params}
    else:  # Optuna asks define-by-run: the searcher holds the space, the Tuner none
        assert isinstance(tc.search_alg, OptunaSearch)
        assert [p.path for p in tc.search_alg._space.params] == [p.path for p in params]
        assert inner._param_space == {}
    assert isinstance(tc.scheduler, ResumableASHA) and tc.scheduler._halving.max_t == 6
    assert tc.reuse_actors is True  # Train trials too (their stopped runs' reports are dropped)
    assert tc.trial_dirname_creator(SimpleNamespace(trial_id="ab12_00001")) == "ab12_00001"
    assert (rc.name, rc.storage_path) == ("my_sweep", str(tmp_path / "outputs"))
    assert rc.callbacks == callbacks
    assert rc.failure_config.max_failures == 2


@pytest.mark.parametrize("reuse", [True, False])
def test_inline_trials_reserve_the_workers_share_and_reuse_their_process(
        tmp_path: Path, reuse: bool) -> None:
    """An inline trial's own process trains: Tune reserves the worker's CPUs for it (a Train
    trial's driver reserves none), and trial.reuse_process keeps its process for the next trial
    (a Train trial's driver process too, except under PBT)."""
    from dataclasses import replace

    cfg = compose("digits", ["scaling.num_workers=1", f"trial.reuse_process={reuse}"])
    params, constants = parse_space(cfg.experiment.search_space)
    plan = replace(_plan(cpus=1.0), num_workers=1, executor="inline")
    trial = trial_plan(cfg, constants, plan, tmp_path / "sw", "sid")
    assert (trial.executor, trial.backend_options) == ("inline", None)  # it builds nothing
    tuner = build_tuner(cfg, params, trial, plan, tmp_path / "sw", [])
    inner = tuner._local_tuner
    assert inner._tune_config.reuse_actors is reuse
    assert inner._trainable._resources.required_resources["CPU"] == 1.0
    train = build_tuner(cfg, params, trial_plan(cfg, constants, _plan(), tmp_path / "t", "sid"),
                        _plan(), tmp_path / "t", [])._local_tuner
    assert train._tune_config.reuse_actors is reuse
    assert train._trainable._resources.required_resources.get("CPU", 0) == 0


def test_pbt_gives_each_train_trial_a_new_process(tmp_path: Path) -> None:
    """A trial PBT pauses is not stopped: its Train run would go on in a cached process."""
    from dataclasses import replace

    cfg = compose("digits", ["scheduler=pbt"])
    params, constants = parse_space(cfg.experiment.search_space)
    train = trial_plan(cfg, constants, _plan(), tmp_path / "t", "sid")
    assert build_tuner(cfg, params, train, _plan(), tmp_path / "t", [])._local_tuner \
        ._tune_config.reuse_actors is False
    inline_plan = replace(_plan(cpus=1.0), num_workers=1, executor="inline")
    inline = trial_plan(cfg, constants, inline_plan, tmp_path / "i", "sid")
    assert build_tuner(cfg, params, inline, inline_plan, tmp_path / "i", [])._local_tuner \
        ._tune_config.reuse_actors is True


@pytest.mark.parametrize("algorithm", ["tpe", "random"])
def test_a_resizable_tuner_holds_a_limit_that_changes_while_tune_runs(
        tmp_path: Path, algorithm: str) -> None:
    from ray.tune.search import ConcurrencyLimiter

    from sweeps._ray.tune import concurrency_limit

    cfg = compose("digits", [f"search={algorithm}", "search.num_samples=5"])
    params, constants = parse_space(cfg.experiment.search_space)
    sweep_dir, plan = tmp_path / "sweep", _plan(max_concurrent=3)
    tuner = build_tuner(cfg, params, trial_plan(cfg, constants, plan, sweep_dir, "sid"), plan,
                        sweep_dir, [], resizable=True)
    tc = tuner._local_tuner._tune_config
    assert tc.max_concurrent_trials is None  # Tune must not wrap (and fix) it again
    alg = tc.search_alg
    if algorithm == "tpe":
        assert isinstance(alg, ConcurrencyLimiter) and isinstance(alg.searcher, OptunaSearch)
    else:
        assert isinstance(alg, BasicVariantGenerator)
    assert alg.max_concurrent == 3
    assert concurrency_limit(tuner)(5) is True
    assert alg.max_concurrent == 5


def test_a_tuner_whose_limit_tune_wraps_has_none_to_change(tmp_path: Path) -> None:
    from sweeps._ray.tune import concurrency_limit

    cfg = compose("digits", ["search=tpe"])
    params, constants = parse_space(cfg.experiment.search_space)
    sweep_dir, plan = tmp_path / "sweep", _plan(max_concurrent=3)
    tuner = build_tuner(cfg, params, trial_plan(cfg, constants, plan, sweep_dir, "sid"), plan,
                        sweep_dir, [])
    assert concurrency_limit(tuner) is None


@pytest.mark.parametrize("address, alive, workers, pinned", [
    (None, 1, 2, False),    # one machine: it is the head
    ("auto", 1, 2, True),   # a cluster: a Train trial's driver (and controller) on the head
    (None, 3, 2, True),     # a local instance others joined
    ("auto", 3, 1, False),  # an inline trial's process trains: it goes where the CPUs are
])
def test_on_a_cluster_a_train_trials_driver_runs_on_the_head_node(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, address: str | None, alive: int,
        workers: int, pinned: bool) -> None:
    from dataclasses import replace

    monkeypatch.setattr(placement, "alive_nodes", lambda: _nodes(alive))
    overrides = ([f"ray.address={address}"] if address else []) + [
        f"scaling.num_workers={workers}"]
    cfg = compose("digits", overrides)
    params, constants = parse_space(cfg.experiment.search_space)
    plan = replace(_plan(cpus=1.0), num_workers=workers,
                   executor="inline" if workers == 1 else "train")
    trial = trial_plan(cfg, constants, plan, tmp_path / "sw", "sid")
    required = build_tuner(cfg, params, trial, plan, tmp_path / "sw",
                           [])._local_tuner._trainable._resources.required_resources
    assert ("node:__internal_head__" in required) is pinned
    assert required.get("CPU", 0) == (1.0 if workers == 1 else 0)
