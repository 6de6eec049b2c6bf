"""Optuna's view of the space (define-by-run, names, distributions) and the Tune searcher of each
algorithm, warm start included; on real Optuna studies, Ray never started."""

from __future__ import annotations

import copy
import functools
import pickle
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from sweeps import compose
from sweeps.search.optuna_space import DefineByRun, distribution, optuna_name, optuna_params
from sweeps.search.searchers import (
    STUDY_NAME,
    make_search_alg,
    seeded_storage,
    tune_param_space,
)
from sweeps.search.space import Param, parse_space
from sweeps.search.warm_start import EarlierTrial, WarmStart

SPACE = {
    "opt": "choice(sgd, adam, adamw)",
    "model": {
        "momentum": {"when": {"opt": "sgd"}, "sample": "interval(0.5, 0.99)"},
        "depth": "choice(2, 4)",
        "width": "range(2, 10, 2)",
    },
    "beta1": {"when": {"opt": ["adam", "adamw"]}, "sample": "interval(0.8, 0.99)"},
    "nesterov": {"when": {"opt": "sgd", "model.depth": 4}, "sample": "choice(true, false)"},
    "bs": "tag(log, int(interval(8, 256)))",
    "lr": "range(0.1, 0.3, 0.1)",
    "act": "relu",
}
PARAMS = parse_space(SPACE)[0]
MULTI = ["+experiment.metrics={val_acc: max, val_loss: min}", "scheduler=none"]


@functools.cache
def _composed(*overrides: str) -> Any:
    return compose("digits", list(overrides))


def _cfg(*overrides: str) -> Any:
    return copy.deepcopy(_composed(*overrides))


@pytest.fixture(autouse=True)
def _no_ray() -> Any:
    import ray

    yield
    assert not ray.is_initialized(), "a unit test started Ray"


def _ask(fixed: dict[str, Any], params: list[Param] = PARAMS) -> optuna.trial.FrozenTrial:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial(fixed)
    trial = study.ask()
    DefineByRun(params)(trial)
    study.tell(trial, 0.0)
    return study.trials[0]


@pytest.mark.parametrize(
    ("fixed", "asked"),
    [
        ({"opt": "sgd", "model/depth": 2},
         ["opt", "model/momentum", "model/depth", "model/width", "bs", "lr"]),
        ({"opt": "sgd", "model/depth": 4},
         ["opt", "model/momentum", "model/depth", "model/width", "nesterov", "bs", "lr"]),
        ({"opt": "adam", "model/depth": 4}, ["opt", "model/depth", "model/width", "beta1", "bs",
                                             "lr"]),
        ({"opt": "adamw", "model/depth": 2}, ["opt", "model/depth", "model/width", "beta1", "bs",
                                              "lr"]),
    ],
)
def test_define_by_run_asks_exactly_what_applies(fixed: dict, asked: list[str]) -> None:
    trial = _ask(fixed)
    assert list(trial.params) == asked  # parents first, "/" for ".", constants never asked
    for name, value in fixed.items():
        assert trial.params[name] == value


@pytest.mark.parametrize(
    ("name", "dist"),
    [
        ("opt", CategoricalDistribution(["sgd", "adam", "adamw"])),
        ("model/momentum", FloatDistribution(0.5, 0.99)),
        ("model/depth", CategoricalDistribution([2, 4])),
        ("model/width", IntDistribution(2, 10, step=2)),
        ("nesterov", CategoricalDistribution([True, False])),
        ("bs", IntDistribution(8, 256, log=True)),
        ("lr", FloatDistribution(0.1, 0.3, step=0.1)),
    ],
)
def test_define_by_run_distributions(name: str, dist: Any) -> None:
    trial = _ask({"opt": "sgd", "model/depth": 4})
    assert trial.distributions[name] == dist


@pytest.mark.parametrize(
    ("param", "dist"),
    [
        (Param("d", "int", low=1, high=3, step=1), IntDistribution(1, 3)),
        (Param("d", "int", low=1, high=9, step=4), IntDistribution(1, 9, step=4)),
        (Param("d", "int", low=8, high=256, log=True), IntDistribution(8, 256, log=True)),
        (Param("d", "int", low=1, high=10), IntDistribution(1, 10)),  # int(interval): step 1
        (Param("x", "float", low=1e-4, high=0.1, log=True), FloatDistribution(1e-4, 0.1, log=True)),
        (Param("x", "float", low=0.0, high=1.0, step=0.25), FloatDistribution(0.0, 1.0, step=0.25)),
        (Param("x", "float", low=0, high=1), FloatDistribution(0.0, 1.0)),
        (Param("c", "choice", choices=(1, "a", True)), CategoricalDistribution([1, "a", True])),
    ],
)
def test_distribution(param: Param, dist: Any) -> None:
    assert distribution(param) == dist


@pytest.mark.parametrize(("path", "name"), [("lr", "lr"), ("model.hidden", "model/hidden"),
                                            ("a.b.c", "a/b/c")])
def test_optuna_name(path: str, name: str) -> None:
    assert optuna_name(path) == name


def test_int_steps_and_log_are_respected_over_many_trials() -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    space = DefineByRun(PARAMS)
    for _ in range(30):
        trial = study.ask()
        space(trial)
        study.tell(trial, 0.0)
    widths = {t.params["model/width"] for t in study.trials}
    assert widths <= {2, 4, 6, 8, 10} and len(widths) > 1
    assert all(8 <= t.params["bs"] <= 256 and isinstance(t.params["bs"], int)
               for t in study.trials)
    assert {round(t.params["lr"], 9) for t in study.trials} <= {0.1, 0.2, 0.3}
    assert all(("model/momentum" in t.params) == (t.params["opt"] == "sgd") for t in study.trials)


def test_define_by_run_survives_pickle() -> None:
    space = DefineByRun(PARAMS)
    again = pickle.loads(pickle.dumps(space))
    assert again.params == space.params
    assert repr(again) == ("DefineByRun(['opt', 'model.momentum', 'model.depth', 'model.width', "
                           "'beta1', 'nesterov', 'bs', 'lr'])")
    fixed = {"opt": "sgd", "model/depth": 4}
    assert _ask(fixed, again.params).params == _ask(fixed, space.params).params


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"opt": "sgd", "model.momentum": 0.9, "model.depth": 2, "bs": 16, "lr": 0.1},
         {"opt": "sgd", "model/momentum": 0.9, "model/depth": 2, "bs": 16, "lr": 0.1}),
        # a conditional value where its condition fails is left out, as are unknown keys
        ({"opt": "adam", "model.momentum": 0.9, "beta1": 0.9, "model.depth": 2, "x": 1},
         {"opt": "adam", "beta1": 0.9, "model/depth": 2}),
        ({}, {}),
    ],
)
def test_optuna_params(values: dict, names: dict) -> None:
    got, dists = optuna_params(values, PARAMS)
    assert got == names
    assert set(dists) == set(names)


@pytest.mark.parametrize(
    ("overrides", "seed"),
    [(("search=random", "sweep.seed=5"), 5), (("search=grid", "sweep.seed=0"), 0),
     (("search=random", "sweep.seed=123"), 123)],
)
@pytest.mark.parametrize("max_concurrent", [0, 3])
def test_random_and_grid_get_a_seeded_basic_variant_generator(overrides: tuple[str, ...],
                                                               seed: int,
                                                               max_concurrent: int) -> None:
    import numpy as np
    from ray.tune.search.basic_variant import BasicVariantGenerator

    alg = make_search_alg(_cfg(*overrides), max_concurrent, PARAMS[:1])
    assert type(alg) is BasicVariantGenerator
    assert alg.max_concurrent == max_concurrent
    assert alg._random_state.random() == np.random.default_rng(seed).random()


@pytest.mark.parametrize(
    ("overrides", "metric", "mode", "sampler"),
    [
        (("search=tpe",), "val_acc", "max", "TPESampler"),
        (("search=optuna", "search.sampler._target_=optuna.samplers.CmaEsSampler"), "val_acc",
         "max", "CmaEsSampler"),
        (tuple(MULTI), ["val_acc", "val_loss"], ["max", "min"], "TPESampler"),
        (("+experiment.metrics={val_loss: min, val_acc: max}", "scheduler=none", "search=optuna",
          "search.sampler._target_=optuna.samplers.NSGAIISampler"),
         ["val_loss", "val_acc"], ["min", "max"], "NSGAIISampler"),
    ],
)
def test_optuna_search_of_tpe_and_optuna(overrides: tuple[str, ...], metric: Any, mode: Any,
                                         sampler: str) -> None:
    from ray.tune.search.optuna import OptunaSearch

    from sweeps.search.optuna_searcher import MetricTolerantOptunaSearch

    alg = make_search_alg(_cfg(*overrides), 2, PARAMS)
    assert type(alg) is MetricTolerantOptunaSearch and isinstance(alg, OptunaSearch)
    assert (alg._metric, alg._mode) == (metric, mode)
    assert type(alg._sampler).__name__ == sampler
    assert isinstance(alg._space, DefineByRun) and alg._space.params == PARAMS
    assert alg._study_name == STUDY_NAME and alg._storage is None  # no warm start


def test_the_searcher_searches_the_params_it_is_given_not_the_configs_space() -> None:
    alg = make_search_alg(_cfg("search=tpe"), 0, PARAMS[:1])
    assert alg._space.params == PARAMS[:1] != PARAMS


WARM = WarmStart("sweep dir outputs/earlier", [
    EarlierTrial({"opt": "sgd", "model.momentum": 0.6, "model.depth": 4, "model.width": 6,
                  "nesterov": True, "bs": 32, "lr": 0.2}, {"val_acc": 0.9, "val_loss": 0.3}, "t0"),
    # model.momentum does not apply under adam: left out of the study
    EarlierTrial({"opt": "adam", "model.momentum": 0.7, "beta1": 0.85, "model.depth": 2,
                  "model.width": 2, "bs": 64, "lr": 0.1}, {"val_acc": 0.8, "val_loss": 0.2}, "t1"),
])
STORED = [
    {"opt": "sgd", "model/momentum": 0.6, "model/depth": 4, "model/width": 6, "nesterov": True,
     "bs": 32, "lr": 0.2},
    {"opt": "adam", "model/depth": 2, "model/width": 2, "beta1": 0.85, "bs": 64, "lr": 0.1},
]


@pytest.mark.parametrize(
    ("objectives", "values"),
    [
        ({"val_acc": "max"}, [[0.9], [0.8]]),
        ({"val_loss": "min"}, [[0.3], [0.2]]),
        ({"val_acc": "max", "val_loss": "min"}, [[0.9, 0.3], [0.8, 0.2]]),
        ({"val_loss": "min", "val_acc": "max"}, [[0.3, 0.9], [0.2, 0.8]]),
    ],
)
def test_seeded_storage_holds_the_warm_trials(objectives: dict, values: list) -> None:
    storage = seeded_storage(objectives, PARAMS, WARM)
    study = optuna.load_study(study_name=STUDY_NAME, storage=storage)
    expected = [optuna.study.StudyDirection.MINIMIZE if d == "min" else
                optuna.study.StudyDirection.MAXIMIZE for d in objectives.values()]
    assert study.directions == expected
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 2
    assert [t.params for t in study.trials] == STORED
    assert [t.values for t in study.trials] == values
    assert [t.user_attrs for t in study.trials] == [
        {"warm_start": "sweep dir outputs/earlier", "trial_id": "t0"},
        {"warm_start": "sweep dir outputs/earlier", "trial_id": "t1"}]


@pytest.mark.parametrize(
    ("overrides", "n_values"),
    [(("search=tpe",), 1), (tuple(MULTI), 2),
     (("search=optuna", "search.sampler._target_=optuna.samplers.CmaEsSampler"), 1)],
)
def test_optuna_search_sees_warm_trials_as_complete(overrides: tuple[str, ...],
                                                    n_values: int) -> None:
    alg = make_search_alg(_cfg(*overrides), 0, PARAMS, WARM)
    assert alg._storage is not None
    config = alg.suggest("t9")
    trials = alg._ot_study.trials
    assert len(trials) == 3
    assert [t.state for t in trials[:2]] == [optuna.trial.TrialState.COMPLETE] * 2
    assert [t.params for t in trials[:2]] == STORED
    assert all(len(t.values) == n_values for t in trials[:2])
    assert trials[2].state == optuna.trial.TrialState.RUNNING
    assert "model" in config and "depth" in config["model"]  # nested back by "/"
    assert "act" not in config  # constants are the trial driver's, not the searcher's


def test_no_storage_without_warm_trials() -> None:
    empty = WarmStart("nowhere", [])
    alg = make_search_alg(_cfg("search=tpe"), 0, PARAMS, empty)
    assert alg._storage is None
    alg.suggest("t0")
    assert len(alg._ot_study.trials) == 1


@pytest.mark.parametrize(
    ("algorithm", "expected"),
    [
        ("grid", {"a": {"grid_search": [1, 2]}, "m": {"b": {"grid_search": [1, 2, 3]}}}),
        ("random", {"a": ("Categorical", [1, 2]), "m": {"b": ("Integer", (1, 4))}}),
        ("tpe", {}),
        ("optuna", {}),
    ],
)
def test_tune_param_space(algorithm: str, expected: dict) -> None:
    params = parse_space({"a": "choice(1, 2)", "m": {"b": "range(1, 3)"}, "c": "const"})[0]
    space = tune_param_space(_cfg(f"search={algorithm}"), params)
    if algorithm != "random":
        assert space == expected
        return
    assert set(space) == {"a", "m"} and set(space["m"]) == {"b"}
    assert (type(space["a"]).__name__, space["a"].categories) == expected["a"]
    b = space["m"]["b"]
    assert (type(b).__name__, (b.lower, b.upper)) == expected["m"]["b"]  # upper is exclusive


def test_a_trial_its_saved_state_never_knew_is_asked_with_its_config_and_told(tmp_path) -> None:
    """Issue 50's chaos run: killed between Tune's experiment state and the searcher's, a
    resume had Tune run a trial the restored searcher never suggested, and Ray's OptunaSearch
    raised KeyError at its first result: the sweep could never resume. Restored here from a
    save made before trial "b", the searcher takes b with b's own params and tells its value."""
    from ray.tune.search import Searcher
    from ray.tune.utils import flatten_dict

    alg = make_search_alg(_cfg(), 2, PARAMS)
    alg.suggest("a")
    alg.save(str(tmp_path / "before_b.pkl"))
    config_b = alg.suggest("b")
    restored = make_search_alg(_cfg(), 2, PARAMS)
    restored.restore(str(tmp_path / "before_b.pkl"))
    assert "b" not in restored._ot_trials and isinstance(restored, Searcher)
    metric = restored._metric
    result = flatten_dict({"config": config_b, metric: 0.5, "training_iteration": 1},
                          delimiter="/")
    restored.on_trial_result("b", result)
    restored.on_trial_complete("b", {**result, metric: 0.7})
    (told,) = [t for t in restored._ot_study.trials if t.number == restored._ot_trials["b"].number]
    assert told.state.name == "COMPLETE" and told.value == 0.7
    assert told.params == {optuna_name(k): v for k, v in flatten_dict(config_b, ".").items()}


@pytest.mark.parametrize(("saved", "known", "counted"), [(6, 7, 7), (7, 7, 7), (7, 0, 7)])
def test_a_restored_search_counts_every_trial_tunes_state_holds(saved, known, counted) -> None:
    """The search's saved count lags Tune's trials after a kill between their files: it counts
    Tune's (``known``), so a 20-trial sweep does not run a 21st; never fewer than it saved."""
    from sweeps._ray.tune_grow import _GrowingSearch

    statuses = {f"t{i}": "TERMINATED" for i in range(known)}
    search = _GrowingSearch(make_search_alg(_cfg(), 2, PARAMS), 0, [], statuses)
    search.set_state({"counter": saved, "total_samples": 20, "finished": False,
                      "experiment": None})
    assert (search._counter, search._total_samples) == (counted, 20)


def test_a_restored_limiter_holds_live_what_tunes_state_runs() -> None:
    """The reviewer's hang: the limiter's saved state still held trial a live (Tune's newer
    state had it ended) and not b (Tune added it): at one trial at once nothing would ever be
    suggested again. Restored, it holds Tune's unended trials and this start's reopened ones."""
    from ray.tune.search import ConcurrencyLimiter

    from sweeps._ray.tune_grow import _GrowingSearch

    limiter = ConcurrencyLimiter(make_search_alg(_cfg(), 2, PARAMS), max_concurrent=1)
    search = _GrowingSearch(limiter, 0, ["r"], {"a": "TERMINATED", "b": "RUNNING",
                                                "c": "ERROR", "r": "TERMINATED"})
    limiter.set_state({**limiter.get_state(), "live_trials": {"a"},
                       "num_unfinished_live_trials": 1})
    search.set_state({"counter": 3, "total_samples": 20, "finished": False, "experiment": None})
    assert limiter.live_trials == {"b", "c", "r"} and limiter.num_unfinished_live_trials == 3
    assert search._counter == 4
