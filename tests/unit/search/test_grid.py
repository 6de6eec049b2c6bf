"""Grid search: each param's grid values (exact floats), refusals, grid size, Tune's nested
``grid_search`` space, and the trial count / size warning of ``check_search``."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from sweeps import compose
from sweeps.errors import ConfigError, SearchSpaceError
from sweeps.search.checks import check_search, trial_count
from sweeps.search.grid import WARN_ABOVE, grid_size, grid_values, to_grid_space
from sweeps.search.space import Param, parse_space


@functools.cache
def _composed(*overrides: str) -> Any:
    return compose("digits", list(overrides))


def _cfg(overrides: list[str]) -> Any:
    return copy.deepcopy(_composed(*overrides))


def _param(expr: str) -> Param:
    params, _ = parse_space({"x": expr})
    return params[0]


@pytest.mark.parametrize(
    ("expr", "values"),
    [
        ("choice(64, 128, 256)", [64, 128, 256]),
        ("choice(a, 1, true, 0.5)", ["a", 1, True, 0.5]),
        ("choice(only)", ["only"]),
        ("range(1, 3)", [1, 2, 3]),
        ("range(3)", [0, 1, 2, 3]),
        ("range(5, 5)", [5]),
        ("range(1, 10, 3)", [1, 4, 7, 10]),
        ("range(100, 300, 100)", [100, 200, 300]),
        ("range(-4, 4, 4)", [-4, 0, 4]),
        # floats: the decimal values, not their accumulated binary error
        ("range(0.1, 0.3, 0.1)", [0.1, 0.2, 0.3]),
        ("range(0.1, 0.7, 0.1)", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]),
        ("range(0, 1, 0.1)", [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]),
        ("range(0.2, 0.3, 0.01)",
         [0.2, 0.21, 0.22, 0.23, 0.24, 0.25, 0.26, 0.27, 0.28, 0.29, 0.3]),
        ("range(-0.3, 0.3, 0.1)", [-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3]),
        ("range(0.15, 0.45, 0.15)", [0.15, 0.3, 0.45]),
        ("range(1e-5, 5e-5, 1e-5)", [1e-5, 2e-5, 3e-5, 4e-5, 5e-5]),
        ("range(1e-7, 3e-7, 1e-7)", [1e-7, 2e-7, 3e-7]),
        ("range(0.001, 0.003, 0.001)", [0.001, 0.002, 0.003]),
        ("range(1, 2, 0.25)", [1.0, 1.25, 1.5, 1.75, 2.0]),
        ("range(0.5, 0.5, 0.1)", [0.5]),
    ],
)
def test_grid_values(expr: str, values: list) -> None:
    got = grid_values(_param(expr))
    assert got == values
    assert [type(v) for v in got] == [type(v) for v in values]


@pytest.mark.parametrize(
    ("param", "values"),
    [
        (Param("d", "int", low=1, high=5, step=2), [1, 3, 5]),
        (Param("d", "int", low=1, high=3, step=1), [1, 2, 3]),
        (Param("x", "float", low=0.1, high=0.3, step=0.1), [0.1, 0.2, 0.3]),
        (Param("c", "choice", choices=(True, False)), [True, False]),
    ],
)
def test_grid_values_of_params_built_in_python(param: Param, values: list) -> None:
    assert grid_values(param) == values


KEY = "experiment.search_space.x"


@pytest.mark.parametrize(
    ("expr", "fragments"),
    [
        ("interval(0, 1)", ["'float uniform [0, 1]' is a continuous interval; grid needs "
                            "discrete values", "write range(0, 1, STEP) or choice(...) instead "
                            "of interval(0, 1), or use search=tpe"]),
        ("interval(0.5, 2.5)", ["write range(0.5, 2.5, STEP)", "instead of interval(0.5, 2.5)"]),
        ("int(interval(1, 10))", ["'int uniform [1, 10]' is a continuous interval",
                                  "write range(1, 10, STEP)"]),
        ("tag(log, interval(1e-4, 1e-1))", ["'float log-uniform [0.0001, 0.1]' is a continuous",
                                            "write range(0.0001, 0.1, STEP)"]),
        ("tag(log, int(interval(8, 256)))", ["'int log-uniform [8, 256]' is a continuous",
                                             "range(8, 256, STEP)"]),
    ],
)
def test_interval_has_no_grid(expr: str, fragments: list[str]) -> None:
    with pytest.raises(SearchSpaceError) as info:
        grid_values(_param(expr))
    assert info.value.key == KEY
    for fragment in fragments:
        assert fragment in str(info.value)


@pytest.mark.parametrize("expr", ["int(interval(1, 10))", "tag(log, int(interval(8, 256)))",
                                  "tag(log, interval(0.001, 0.1))", "interval(0, 1)"])
def test_interval_fix_quotes_what_the_user_wrote(expr: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        grid_values(_param(expr))
    assert f"instead of {expr}, or use" in str(info.value)


def test_float_grid_keeps_the_bounds_of_a_fine_grained_low() -> None:
    p = Param("x", "float", low=1.23456789, high=3.23456789, step=1.0)
    values = grid_values(p)
    assert values[0] == p.low
    assert values[-1] <= p.high
    assert values == pytest.approx([1.23456789, 2.23456789, 3.23456789], rel=1e-12)


@pytest.mark.parametrize(
    ("param", "shown"),
    [
        (Param("m", "float", 0.1, 0.9, when=(("opt", ("sgd",)),)),
         "'float uniform [0.1, 0.9] only when opt=sgd'"),
        (Param("m", "choice", choices=(1, 2), when=(("opt", ("sgd", "adam")),)),
         "\"choice of [1, 2] only when opt in ['sgd', 'adam']\""),
        (Param("m", "int", 1, 3, step=1, when=(("opt", ("sgd",)),)),
         "'int uniform [1, 3] step 1 only when opt=sgd'"),
    ],
)
def test_conditional_param_has_no_grid(param: Param, shown: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        grid_values(param)
    assert str(info.value).startswith(f"experiment.search_space.m: {shown} is conditional, "
                                      "which a grid cannot express; use search=tpe")


@pytest.mark.parametrize(
    ("space", "size"),
    [
        ({"a": "choice(1, 2)", "b": "range(1, 3)"}, 6),
        ({"a": "choice(1, 2)", "b": "range(0.1, 0.3, 0.1)", "c": "range(2, 10, 4)"}, 18),
        ({"a": "choice(x)"}, 1),
        ({"a": "range(0, 99)"}, 100),
        ({}, 1),  # the empty product: callers guard on "no params" themselves
    ],
)
def test_grid_size(space: dict, size: int) -> None:
    assert grid_size(parse_space(space)[0]) == size


def test_grid_size_refuses_an_interval() -> None:
    with pytest.raises(SearchSpaceError, match="experiment.search_space.lr"):
        grid_size(parse_space({"a": "choice(1, 2)", "lr": "interval(0.1, 1)"})[0])


@pytest.mark.parametrize(
    ("space", "tune_space"),
    [
        ({"a": "choice(1, 2)"}, {"a": {"grid_search": [1, 2]}}),
        ({"model": {"h": "choice(1, 2)", "d": "range(1, 3)"}, "lr": "range(0.1, 0.3, 0.1)"},
         {"model": {"h": {"grid_search": [1, 2]}, "d": {"grid_search": [1, 2, 3]}},
          "lr": {"grid_search": [0.1, 0.2, 0.3]}}),
        ({"model.enc.h": "choice(8)", "model.dec.h": "range(1, 2)"},
         {"model": {"enc": {"h": {"grid_search": [8]}}, "dec": {"h": {"grid_search": [1, 2]}}}}),
        ({"act": "relu", "a": "choice(1, 2)"}, {"a": {"grid_search": [1, 2]}}),  # no constants
        ({}, {}),
    ],
)
def test_to_grid_space_is_nested_grid_search(space: dict, tune_space: dict) -> None:
    from ray import tune

    assert to_grid_space(parse_space(space)[0]) == tune_space
    assert tune.grid_search([1, 2]) == {"grid_search": [1, 2]}  # the form Ray walks


def _choices(n: int, path: str = "a") -> Param:
    return Param(path, "choice", choices=tuple(range(n)))


@pytest.mark.parametrize(
    ("overrides", "params", "count"),
    [
        (["search=grid", "search.num_samples=2"], [_choices(3)], 3),  # num_samples ignored
        (["search=grid", "search.num_samples=50"], [_choices(3), _choices(4, "b")], 12),
        (["search=grid", "search.num_samples=7"], [], 7),
        (["search=tpe", "search.num_samples=5"], [_choices(3)], 5),
        (["search=random", "search.num_samples=9"], [_choices(3)], 9),
        (["search=optuna", "search.num_samples=4"], [_choices(3)], 4),
    ],
)
def test_trial_count(overrides: list[str], params: list[Param], count: int) -> None:
    assert trial_count(_cfg(overrides), params) == count


@pytest.mark.parametrize(
    ("params", "warning"),
    [
        ([_choices(2)], None),
        ([_choices(WARN_ABOVE)], None),  # exactly the limit: no warning
        ([_choices(WARN_ABOVE + 1)],
         f"search=grid runs {WARN_ABOVE + 1} trials ({WARN_ABOVE + 1} a)"),
        ([_choices(10), _choices(10, "b")], None),
        ([_choices(11), _choices(10, "b")], "search=grid runs 110 trials (11 a x 10 b); trim the "
                                            "choices or use search=tpe if that is more than you "
                                            "meant"),
        ([_choices(3), Param("m.d", "int", 1, 100, step=1)], "runs 300 trials (3 a x 100 m.d)"),
    ],
)
def test_check_search_warns_about_a_large_grid(params: list[Param], warning: str | None) -> None:
    warnings = check_search(_cfg(["search=grid"]), params)
    if warning is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warning in warnings[0], warnings


@pytest.mark.parametrize(
    ("overrides", "params", "key", "fragment"),
    [
        (["search=grid"], [], "experiment.search_space", "has no parameter to make a grid of"),
        (["search=grid"], [Param("lr", "float", 0.1, 1.0)], "experiment.search_space.lr",
         "is a continuous interval"),
        (["search=grid"], [_choices(2, "o"), Param("m", "float", 0.1, 0.9, when=(("o", (0,)),))],
         "experiment.search_space.m", "is conditional"),
        (["search=random"], [_choices(2, "o"), Param("m", "float", 0.1, 0.9,
                                                     when=(("o", (0,)),))],
         "search.algorithm", "RandomSampler"),
        (["search=grid", "search.warm_start=earlier"], [_choices(2)], "search.warm_start",
         "search=grid has none"),
    ],
)
def test_check_search_refusals(overrides: list[str], params: list[Param], key: str,
                               fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_search(_cfg(overrides), params)
    assert info.value.key == key
    assert fragment in str(info.value)
