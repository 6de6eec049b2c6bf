"""The search defaults settled by the sweep's size (``sweeps.search.defaults``): every rule as a
table, the TPE sampler they build, and the refusals of ``validate``."""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import pytest

from sweeps import compose
from sweeps.config import search_path
from sweeps.config.validate import validate
from sweeps.errors import ConfigError
from sweeps.search.defaults import (
    budget_note,
    first_point,
    params_first,
    search_story,
    settle_defaults,
    startup_trials,
    tpe_arguments,
)
from sweeps.search.samplers import build_sampler
from sweeps.search.space import parse_space

TWO_METRICS = "+experiment.metrics={val_acc: max, val_loss: min}"
TAIL = ("at 4 trials it found no better than random search with the same first trial "
        "(bench/results/search_sim.json); consider search.num_samples >= 8")


@functools.cache
def _composed(experiment: str, *overrides: str) -> Any:
    return compose(experiment, list(overrides))


def _cfg(*overrides: str, experiment: str = "digits") -> Any:
    """The composed config (cached: composing takes ~0.1 s; a copy, so a test cannot leak)."""
    return copy.deepcopy(_composed(experiment, *overrides))


def _with_params(params: dict[str, Any]) -> Any:
    cfg = _cfg()
    return dataclasses.replace(cfg, experiment=dataclasses.replace(cfg.experiment, params=params))


@pytest.mark.parametrize(("num_samples", "startup"), [
    (1, 2), (2, 2), (4, 2), (5, 2), (6, 2), (7, 2), (8, 3), (10, 3), (11, 4), (16, 4), (24, 4),
    (100, 4)])
def test_startup_trials_are_a_third_of_the_sweep_within_2_to_4(num_samples, startup) -> None:
    assert startup_trials(num_samples) == startup


@pytest.mark.parametrize(("overrides", "expected"), [
    ((), {"seed": 0, "n_startup_trials": 3, "constant_liar": True, "multivariate": True}),
    (("sweep.seed=7", "search.num_samples=24"),
     {"seed": 7, "n_startup_trials": 4, "constant_liar": True, "multivariate": True}),
    (("search.n_startup_trials=0",),
     {"seed": 0, "n_startup_trials": 0, "constant_liar": True, "multivariate": True}),
    (("search.n_startup_trials=12",),  # the user's count, above the default's 4 at most
     {"seed": 0, "n_startup_trials": 12, "constant_liar": True, "multivariate": True}),
    ((TWO_METRICS,),  # several objectives: Optuna's own choice, not multivariate
     {"seed": 0, "n_startup_trials": 3, "constant_liar": True}),
])
def test_tpe_arguments(overrides, expected) -> None:
    cfg = _cfg(*overrides)
    assert cfg.sweep.seed == expected["seed"]
    assert tpe_arguments(cfg) == expected


@pytest.mark.parametrize(("overrides", "identity", "startup"), [
    ((), None, 3),  # a new sweep of 8
    (("search.num_samples=16",), None, 4),
    (("search.n_startup_trials=0",), None, 0),  # the user's value is kept ...
    (("search.n_startup_trials=7",), {"search.n_startup_trials": "4"}, 7),  # ... over the record
    ((), {"search.n_startup_trials": "4"}, 4),  # a sweep started under the old default
    (("search.num_samples=16",), {"search.n_startup_trials": "3"}, 3),  # grown: keeps its count
    ((), {"search.n_startup_trials": "None"}, 3),  # not a count: the default
    ((), {"search.n_startup_trials": "-1"}, 3),
    ((), {"search.n_startup_trials": ""}, 3),
    ((), {"search.algorithm": "random"}, 3),  # a record without the key
    ((), {}, 3),
])
def test_settle_startup_trials(overrides, identity, startup) -> None:
    assert settle_defaults(_cfg(*overrides), identity).search.n_startup_trials == startup


@pytest.mark.parametrize(("overrides", "first"), [
    (("search=tpe",), True),
    (("search=optuna",), False),  # a named sampler samples as it was designed to
    (("search=optuna", "search.params_first=true"), True),
    (("search=random",), False),
    (("search=grid",), False),
    (("search=tpe", "search.params_first=false"), False),
    (("search=optuna", "search.params_first=false"), False),
    (("search=random", "search.params_first=true"), True),
])
def test_settle_params_first_per_search(overrides, first) -> None:
    cfg = _cfg(*overrides)
    assert params_first(cfg) is first
    assert settle_defaults(cfg).search.params_first is first


def test_settle_keeps_the_config_when_nothing_changes_and_its_source_otherwise() -> None:
    cfg = compose("digits")
    settled = settle_defaults(cfg)
    assert settled is not cfg and cfg.search.n_startup_trials is None  # the input is not changed
    assert (settled.search.n_startup_trials, settled.search.params_first) == (3, True)
    assert search_path.source_of(settled) == search_path.source_of(cfg) is not None
    assert settle_defaults(settled) is settled
    assert settle_defaults(settled, {"search.n_startup_trials": "4"}) is settled  # set: kept
    user = _cfg("search.n_startup_trials=7", "search.params_first=false")
    assert settle_defaults(user) is user


@pytest.mark.parametrize(("experiment", "expected"), [
    ("digits", {"lr": 0.05, "hidden": 128, "depth": 2, "dropout": 0.1, "batch_size": 64}),
    # weight_decay 0.0 lies outside tag(log, interval(1e-6, 1e-2)): the sampler draws it
    ("digits_cnn", {"lr": 0.01, "channels": 32, "blocks": 2}),
])
def test_first_point_of_the_built_in_experiments(experiment, expected) -> None:
    cfg = _cfg(experiment=experiment)
    assert first_point(cfg, parse_space(cfg.experiment.search_space)[0]) == expected


SPACE = {"c": "choice(a, b)", "flag": "choice(1, 2)", "s": "range(0.1, 0.9, 0.2)",
         "n": "range(2, 10, 2)", "x": "interval(0.0, 1.0)", "lg": "tag(log, interval(1e-3, 1))"}


@pytest.mark.parametrize(("params", "expected"), [
    ({"c": "a", "flag": 2, "s": 0.5, "n": 6, "x": 1.0, "lg": 1e-3},
     {"c": "a", "flag": 2, "s": 0.5, "n": 6, "x": 1.0, "lg": 1e-3}),  # all inside, bounds too
    ({"c": "z"}, {}),  # not one of the choices
    ({"flag": True}, {}),  # True is not the choice 1 (same_value)
    ({"flag": 1.0}, {"flag": 1}),  # 1.0 is, and the point holds the choice itself
    ({"n": 6.0}, {"n": 6}),  # an int param gets an int
    ({"x": 0}, {"x": 0.0}),  # a float param a float
    ({"s": 0.4}, {}),  # off the grid 0.1, 0.3, ...
    ({"n": 5}, {}),
    ({"n": 6.5}, {}),
    ({"n": 12}, {}),  # beyond the range
    ({"x": 1.5}, {}),
    ({"x": True}, {}),  # a bool is no number here
    ({"x": "0.5"}, {"x": 0.5}),  # a number written as text, as warm start reads MLflow's
    ({"lg": 0.0}, {}),  # outside the log interval
    ({"other": 3}, {}),  # not searched
])
def test_first_point_takes_only_values_inside_the_space(params, expected) -> None:
    point = first_point(_with_params(params), parse_space(SPACE)[0])
    assert point == expected
    assert {k: type(v) for k, v in point.items()} == {k: type(v) for k, v in expected.items()}


@pytest.mark.parametrize("space", [{"model.hidden": "choice(32, 64)"},
                                   {"model": {"hidden": "choice(32, 64)"}}])
def test_first_point_of_nested_params_by_optuna_name(space) -> None:
    cfg = _with_params({"model": {"hidden": 64, "depth": 2}})
    assert first_point(cfg, parse_space(space)[0]) == {"model/hidden": 64}


@pytest.mark.parametrize(("overrides", "trials", "note"), [
    (("search.num_samples=3",), 3, "3 trials: TPE models only trial 3, after 2 start-up trials; "),
    (("search.num_samples=4",), 4, "4 trials: TPE models only trials 3-4, after 2 start-up "
                                   "trials; "),
    (("search.num_samples=5",), 5, "5 trials: TPE models only trials 3-5, after 2 start-up "
                                   "trials; "),
    (("search.num_samples=4", "search.n_startup_trials=3"), 4,
     "4 trials: TPE models only trial 4, after 3 start-up trials; "),
    (("search.num_samples=4", "search.n_startup_trials=4"), 4,
     "4 trials: TPE models no trial, after 4 start-up trials; "),
    (("search.num_samples=4", "search.n_startup_trials=9"), 4,
     "4 trials: TPE models no trial, after 9 start-up trials; "),
    (("search.num_samples=6",), 6, None),
    (("search.num_samples=8",), 8, None),
    (("search.num_samples=100",), 100, None),
    (("search.num_samples=6", "search.n_startup_trials=6"), 6, None),  # enough trials: silent
    (("search=random", "search.num_samples=3"), 3, None),  # not TPE
    (("search=optuna", "search.num_samples=3"), 3, None),
])
def test_budget_note(overrides, trials, note) -> None:
    cfg = settle_defaults(_cfg(*overrides))
    assert budget_note(cfg, trials) == (note + TAIL if note else None)


@pytest.mark.parametrize(("overrides", "message"), [
    (("search.n_startup_trials=-1",),
     "search.n_startup_trials: -1 must be >= 0 or null; leave it null (a third of "
     "search.num_samples, 2 to 4), or set search.n_startup_trials=4"),
    (("search=grid", "search.params_first=true"),
     "search.params_first: True is set, but search=grid runs every point of its grid once; "
     "drop search.params_first, or use search=tpe"),
])
def test_validate_refuses(overrides, message) -> None:
    with pytest.raises(ConfigError) as caught:
        validate(_cfg(*overrides))
    assert str(caught.value) == message


@pytest.mark.parametrize("overrides", [
    ("search.n_startup_trials=0",), ("search=grid", "search.params_first=false"),
    ("search=random", "search.params_first=true"), ()])
def test_validate_accepts(overrides) -> None:
    validate(_cfg(*overrides))


@pytest.mark.parametrize(("overrides", "startup", "multivariate"), [
    ((), 3, True),
    (("search.num_samples=30",), 4, True),
    (("search.n_startup_trials=7",), 7, True),
    ((TWO_METRICS,), 3, None),  # Optuna 5 decides per study: False for several objectives
])
def test_the_tpe_sampler_is_built_with_them(overrides, startup, multivariate) -> None:
    import optuna

    sampler = build_sampler(settle_defaults(_cfg(*overrides)))
    assert type(sampler) is optuna.samplers.TPESampler
    # Optuna's private attributes (5.0: optuna/samplers/_tpe/sampler.py, TPESampler.__init__)
    assert sampler._n_startup_trials == startup
    assert sampler._multivariate is multivariate
    assert sampler._constant_liar is True
    directions = ["maximize", "minimize"][:1 if multivariate else 2]
    study = optuna.create_study(directions=directions, sampler=sampler)
    assert sampler._is_multivariate(study) is bool(multivariate)  # what it samples with


@pytest.mark.parametrize(("overrides", "trials", "models"), [
    (("search.num_samples=5",), 5, None),  # below FEW_TRIALS: budget_note's warning instead
    (("search.num_samples=6",), 6, "trials 3-6"),
    ((), 8, "trials 4-8"),
    (("search.num_samples=15",), 15, "trials 5-15"),
    (("search.num_samples=16",), 16, None),
    (("search=random",), 8, None),
    (("search=optuna",), 8, None),
])
def test_size_note_between_few_and_enough_trials(overrides, trials, models) -> None:
    from sweeps.search.defaults import size_note

    note = size_note(settle_defaults(_cfg(*overrides)), trials)
    if models is None:
        assert note is None
    else:
        assert note == (f"{trials} trials: TPE models {models}; in bench/results/search_sim.json "
                        "it reached random search's median best clearly sooner with 8 trials "
                        "only on digits (0.57x its epochs; 0.96x and 1.05x on digits_data and "
                        "digits_cnn), with 16 on all three; consider search.num_samples >= 16 "
                        "where trials are cheap")


CONDITIONAL_SPACE = ("+experiment.search_space.momentum="
                     "{when: {hidden: 32}, sample: 'interval(0.5, 0.9)'}")


@pytest.mark.parametrize(("overrides", "group"), [
    ((), None),  # no conditional param: plain multivariate TPE
    ((CONDITIONAL_SPACE,), True),  # grouped: momentum is modelled with the trials that have it
    ((CONDITIONAL_SPACE, "+experiment.metrics={val_acc: max, val_loss: min}"), None),
])
def test_tpe_is_grouped_where_the_space_has_conditional_params(overrides, group) -> None:
    cfg = _cfg(*overrides)
    conditional = any(p.when for p in parse_space(cfg.experiment.search_space)[0])
    assert conditional is bool(overrides)
    assert tpe_arguments(cfg, conditional).get("group") is group
    sampler = build_sampler(cfg, conditional=conditional)
    assert sampler._group is bool(group)


def test_warm_start_trials_replace_the_first_point_and_the_size_note(tmp_path) -> None:
    from sweeps.search.searchers import make_search_alg
    from sweeps.search.warm_start import EarlierTrial, WarmStart

    cfg = settle_defaults(_cfg())
    params = parse_space(dict(cfg.experiment.search_space))[0]
    warm = WarmStart("earlier", [EarlierTrial({"lr": 0.05}, {"val_acc": 0.9}, "t0")], {})
    assert make_search_alg(cfg, 0, params)._points_to_evaluate  # no warm start: enqueued
    assert not make_search_alg(cfg, 0, params, warm)._points_to_evaluate
    assert search_story(cfg, params, warm=1) == (" (TPE models once 3 trials have finished, 1 "
                                                 "warm-start trials among them)")
    assert search_story(cfg, params, warm=3) == " (TPE models from the start (3 warm-start trials))"
