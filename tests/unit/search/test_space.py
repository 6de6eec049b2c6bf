"""Search-space grammar: expressions -> Param, bound edges, nesting, and every rejection."""

from __future__ import annotations

import random

import pytest

from sweeps.errors import SearchSpaceError
from sweeps.search.space import Param, deep_merge, flatten, parse_space, unflatten
from sweeps.search.tune_space import to_tune_space


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("choice(64, 128)", Param("x", "choice", choices=(64, 128))),
        ("choice(relu, tanh)", Param("x", "choice", choices=("relu", "tanh"))),
        ("choice(true, false)", Param("x", "choice", choices=(True, False))),
        ("choice(0.1, 1, a)", Param("x", "choice", choices=(0.1, 1, "a"))),
        ("range(1, 3)", Param("x", "int", low=1, high=3, step=1)),
        ("range(3)", Param("x", "int", low=0, high=3, step=1)),
        ("range(0, 10, 2)", Param("x", "int", low=0, high=10, step=2)),
        ("range(5, 5)", Param("x", "int", low=5, high=5, step=1)),
        ("range(0.1, 0.5, 0.1)", Param("x", "float", low=0.1, high=0.5, step=0.1)),
        ("range(-1.0, 1.0, 0.1)", Param("x", "float", low=-1.0, high=1.0, step=0.1)),
        ("range(1.0, 1.0000001, 1e-15)", Param("x", "float", low=1.0, high=1.0000001,
                                                step=1e-15)),  # above the resolution
        ("range(2.5, 2.5, 0.1)", Param("x", "float", low=2.5, high=2.5, step=0.1)),
        ("range(-6, 6, 4)", Param("x", "int", low=-6, high=6, step=4)),
        ("interval(1, 10)", Param("x", "float", low=1.0, high=10.0)),
        ("interval(-1.5, 0.5)", Param("x", "float", low=-1.5, high=0.5)),
        ("int(interval(1, 10))", Param("x", "int", low=1, high=10)),
        ("tag(log, interval(1e-4, 1e-1))", Param("x", "float", low=1e-4, high=1e-1, log=True)),
        ("tag(log, int(interval(8, 256)))", Param("x", "int", low=8, high=256, log=True)),
    ],
)
def test_expression_parses_to_param(expr: str, expected: Param) -> None:
    params, constants = parse_space({"x": expr})
    assert params == [expected]
    assert constants == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("relu", "relu"), ("0.5", 0.5), ("3", 3), (0.9, 0.9), (7, 7), (True, True),
     ("[1, 2]", [1, 2]), ([4, 5], [4, 5])],
)
def test_plain_values_are_constants(value: object, expected: object) -> None:
    params, constants = parse_space({"x": value})
    assert params == []
    assert constants == {"x": expected}


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("interval(0.1, 0.01)", "has low > high; write interval(0.01, 0.1)"),
        ("int(interval(10, 1))", "has low > high; write int(interval(1, 10))"),
        ("range(5, 1)", "has low > high; write range(1, 5, 1)"),
        ("interval(2, 2)", "is empty (low == high)"),
        ("tag(log, interval(0, 1))", "log range with low <= 0"),
        ("tag(log, interval(-1, 1))", "log range with low <= 0"),
        ("tag(log, int(interval(0, 8)))", "log range with low <= 0"),
        ("range(1, 10, 2)", "write range(1, 9, 2)"),
        ("range(0.1, 1.0, 0.2)", "cannot reach its upper bound 1.0 from 0.1 in steps of 0.2 "
         "(ranges include the upper bound); write range(0.1, 0.9, 0.2)"),  # 0.9, no float noise
        ("range(-1.0, 0.95, 0.1)", "write range(-1.0, 0.9, 0.1)"),
        ("range(0, 1, 0.3333333333)", "write range(0, 0.9999999999, 0.3333333333)"),  # exact
        ("range(1.0, 1.0000001, 1e-17)", "has a step of 1e-17, below the float resolution of its "
         "bounds (floats near 1.0000001 are 2.22e-16 apart, so 1.0 + 1e-17 is 1.0); use a step "
         "of at least 4.44e-16, or interval(1.0, 1.0000001) for a continuous range"),
        ("range(0.0, 1.0, 1e-300)", "below the float resolution"),  # 0 + 1e-300 != 0, 1 + it == 1
        ("range(-2.0, -1.0, 2e-16)", "below the float resolution"),
        ("range(1e20, 1e20, 1.0)", "or the constant 1e+20"),  # 1e20 + 1.0 == 1e20
        ("range(0, inf)", "has a bound or step that is not a finite number"),
        ("range(0.0, 1.0, nan)", "not a finite number"),
        ("interval(0, inf)", "has a bound that is not a finite number"),
        ("tag(log, interval(1e-3, inf))", "not a finite number"),
        ("range(1, 5, 0)", "step <= 0"),
        ("range(9, 1, -2)", "has a step <= 0; write range(1, 9, 2)"),
        ("range(0.0, 1.0, -0.1)", "has a step <= 0; write range(0.0, 1.0, 0.1)"),
        ("range(0, 100000000000000000000, 2)", "more than the 4611686018427387904 a search can "
         "index"),  # numpy and Tune draw the index as an int64
        ("interval(0.1,", "does not parse"),
        ("choice()", "does not parse"),
        ("choice(a, a)", "repeats a choice"),
        ("choice([1, 2], [3])", "list or mapping"),
        ("shuffle(range(1, 3))", "shuffle"),
        ("tag(foo, interval(1, 2))", "tag ['foo']"),
        ("tag(log, choice(1, 2))", "tag(log) on a choice"),
        ("tag(log, range(1, 8))", "tag(log) on a range"),
    ],
)
def test_bad_expression_names_key_value_and_fix(expr: str, fragment: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        parse_space({"model.x": expr})
    message = str(info.value)
    assert message.startswith(f"experiment.search_space.model.x: {expr!r}")
    assert fragment in message
    assert isinstance(info.value, ValueError)


def test_nested_and_dotted_keys_mean_the_same_path() -> None:
    nested, _ = parse_space({"model": {"hidden": "choice(1, 2)", "act": "relu"}})
    dotted, consts = parse_space({"model.hidden": "choice(1, 2)", "model.act": "relu"})
    assert nested == dotted == [Param("model.hidden", "choice", choices=(1, 2))]
    assert consts == {"model.act": "relu"}


def test_key_that_is_value_and_parent_is_rejected() -> None:
    with pytest.raises(SearchSpaceError, match="both a value and the parent of model.hidden"):
        parse_space({"model": "choice(a, b)", "model.hidden": "choice(1, 2)"})


@pytest.mark.parametrize(
    ("tree", "flat"),
    [({}, {}), ({"a": 1}, {"a": 1}), ({"a": {"b": {"c": 1}, "d": 2}}, {"a.b.c": 1, "a.d": 2})],
)
def test_flatten_unflatten_roundtrip(tree: dict, flat: dict) -> None:
    assert flatten(tree) == flat
    assert unflatten(flat) == tree


def test_deep_merge_overrides_leaves_and_keeps_siblings() -> None:
    base = {"model": {"hidden": 64, "depth": 2}, "lr": 0.1}
    assert deep_merge(base, {"model": {"hidden": 128}}) == {
        "model": {"hidden": 128, "depth": 2}, "lr": 0.1}
    assert base["model"]["hidden"] == 64  # not mutated


@pytest.mark.parametrize(
    ("expr", "support"),
    [("range(1, 3)", {1, 2, 3}), ("range(0, 10, 5)", {0, 5, 10}),
     ("int(interval(2, 4))", {2, 3, 4}), ("tag(log, int(interval(1, 3)))", {1, 2, 3})],
)
def test_int_bounds_are_inclusive_in_random_search(expr: str, support: set) -> None:
    domain = to_tune_space(parse_space({"x": expr})[0])["x"]
    random.seed(0)
    import numpy as np

    np.random.seed(0)
    seen = {int(v) for v in domain.sample(size=400)}
    assert seen == support


@pytest.mark.parametrize(
    ("expr", "low", "high", "step", "log"),
    [("range(1, 3)", 1, 3, 1, False), ("range(0, 10, 2)", 0, 10, 2, False),
     ("int(interval(1, 10))", 1, 10, 1, False), ("tag(log, int(interval(8, 256)))", 8, 256, 1,
                                                  True),
     ("interval(0.0, 0.5)", 0.0, 0.5, None, False),
     ("tag(log, interval(1e-4, 1e-1))", 1e-4, 1e-1, None, True),
     ("range(0.1, 0.5, 0.1)", 0.1, 0.5, 0.1, False)],
)
def test_optuna_distribution_bounds_match_the_grammar(expr, low, high, step, log) -> None:
    # Optuna is asked define-by-run (sweeps.search.optuna_space), not through Ray's conversion
    # of the Tune space, which has no form for a stepped range drawn on lo + k * step.
    from sweeps.search.optuna_space import distribution

    dist = distribution(parse_space({"model.x": expr})[0][0])
    assert (dist.low, dist.high, dist.step, dist.log) == (low, high, step, log)


def test_choice_becomes_categorical_with_nested_key() -> None:
    from ray.tune.search.optuna import OptunaSearch

    space = to_tune_space(parse_space({"model": {"act": "choice(relu, tanh)"}})[0])
    assert OptunaSearch.convert_search_space(space)["model/act"].choices == ("relu", "tanh")
