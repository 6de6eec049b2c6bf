"""Conditional search-space entries: parents-first order, Param.applies/condition/describe, and
every rejection of a bad ``when``."""

from __future__ import annotations

from typing import Any

import pytest

from sweeps.errors import SearchSpaceError
from sweeps.search.conditions import is_conditional, resolve_conditions
from sweeps.search.space import Param, flatten_space, parse_space


def _cond(parents: dict[str, Any], sample: str = "interval(0.5, 0.99)") -> dict[str, Any]:
    return {"when": parents, "sample": sample}


OPT = "choice(sgd, adam, adamw)"


@pytest.mark.parametrize(
    ("space", "order"),
    [
        # the child is written before its parent: the parent is asked first
        ({"momentum": _cond({"opt": "sgd"}), "opt": OPT},
         [("opt", ()), ("momentum", (("opt", ("sgd",)),))]),
        # already parents first: the space's own order is kept
        ({"opt": OPT, "momentum": _cond({"opt": "sgd"}), "lr": "interval(0.01, 0.1)"},
         [("opt", ()), ("momentum", (("opt", ("sgd",)),)), ("lr", ())]),
        # a list of branch values
        ({"opt": OPT, "beta1": _cond({"opt": ["adam", "adamw"]})},
         [("opt", ()), ("beta1", (("opt", ("adam", "adamw")),))]),
        # a chain: the parent of c is itself conditional; written backwards
        ({"c": _cond({"b": "x"}), "b": _cond({"a": 1}, "choice(x, y)"), "a": "choice(1, 2)"},
         [("a", ()), ("b", (("a", (1,)),)), ("c", (("b", ("x",)),))]),
        # several parents (AND), in the order written
        ({"w": _cond({"opt": "sgd", "sched": ["cos", "step"]}), "sched": "choice(cos, step, none)",
          "opt": OPT},
         [("opt", ()), ("sched", ()), ("w", (("opt", ("sgd",)), ("sched", ("cos", "step"))))]),
        # nested dotted paths: the parent named by its full dotted path
        ({"model": {"b": _cond({"model.kind": "mlp"}), "kind": "choice(mlp, cnn)"}},
         [("model.kind", ()), ("model.b", (("model.kind", ("mlp",)),))]),
        ({"model.b": _cond({"opt.kind": ["x", "y"], "z": 3}), "opt": {"kind": "choice(x, y, w)"},
          "z": "choice(3, 4)"},
         [("opt.kind", ()), ("z", ()), ("model.b", (("opt.kind", ("x", "y")), ("z", (3,))))]),
        # numeric and bool branch values keep their YAML type
        ({"n": "choice(1, 2)", "m": _cond({"n": 2})}, [("n", ()), ("m", (("n", (2,)),))]),
        ({"f": "choice(true, false)", "m": _cond({"f": False})},
         [("f", ()), ("m", (("f", (False,)),))]),
        # no condition at all: nothing moves
        ({"b": "choice(1, 2)", "a": "interval(0, 1)"}, [("b", ()), ("a", ())]),
    ],
)
def test_params_come_back_parents_first(space: dict, order: list) -> None:
    params, constants = parse_space(space)
    assert [(p.path, p.when) for p in params] == order
    assert constants == {}


def test_conditional_keeps_its_sampled_distribution() -> None:
    params, _ = parse_space({"opt": OPT, "lr": _cond({"opt": "adam"},
                                                     "tag(log, interval(1e-4, 1e-1))")})
    assert params[1] == Param("lr", "float", low=1e-4, high=1e-1, log=True,
                              when=(("opt", ("adam",)),))


def test_resolve_conditions_directly() -> None:
    ps = [Param("m", "float", 0.1, 0.9), Param("opt", "choice", choices=("sgd", "adam"))]
    out = resolve_conditions(ps, {"m": {"opt": "sgd"}})
    assert [(p.path, p.when) for p in out] == [("opt", ()), ("m", (("opt", ("sgd",)),))]
    assert resolve_conditions(ps, {}) == ps


@pytest.mark.parametrize(
    ("when", "values", "applies"),
    [
        ((), {}, True),
        ((("opt", ("sgd",)),), {"opt": "sgd"}, True),
        ((("opt", ("sgd",)),), {"opt": "adam"}, False),
        ((("opt", ("sgd",)),), {}, False),  # parent absent (itself not applied)
        ((("opt", ("adam", "adamw")),), {"opt": "adamw"}, True),
        ((("opt", ("adam", "adamw")),), {"opt": "sgd"}, False),
        ((("opt", ("sgd",)), ("s", ("cos",))), {"opt": "sgd", "s": "cos"}, True),
        ((("opt", ("sgd",)), ("s", ("cos",))), {"opt": "sgd", "s": "step"}, False),
        ((("opt", ("sgd",)), ("s", ("cos",))), {"opt": "sgd"}, False),
        ((("n", (2,)),), {"n": 2}, True),
        ((("n", (2,)),), {"n": 1}, False),
    ],
)
def test_param_applies(when: tuple, values: dict, applies: bool) -> None:
    assert Param("p", "float", 0.0, 1.0, when=when).applies(values) is applies


@pytest.mark.parametrize(
    ("param", "text"),
    [
        (Param("m", "float", 0.5, 0.99), "float uniform [0.5, 0.99]"),
        (Param("m", "float", 0.5, 0.99, when=(("opt", ("sgd",)),)),
         "float uniform [0.5, 0.99] only when opt=sgd"),
        (Param("b", "choice", choices=(1, 2), when=(("opt", ("adam", "adamw")),)),
         "choice of [1, 2] only when opt in ['adam', 'adamw']"),
        (Param("w", "int", 1, 9, step=2, when=(("opt", ("sgd",)), ("s", ("cos", "step")))),
         "int uniform [1, 9] step 2 only when opt=sgd and s in ['cos', 'step']"),
        (Param("lr", "float", 1e-4, 0.1, log=True, when=(("n", (2,)),)),
         "float log-uniform [0.0001, 0.1] only when n=2"),
    ],
)
def test_describe_names_the_condition(param: Param, text: str) -> None:
    assert param.describe() == text
    assert param.condition() == (text[text.index(" only"):] if param.when else "")


@pytest.mark.parametrize(
    ("node", "expected"),
    [({"when": {"o": "x"}, "sample": "interval(0, 1)"}, True), ({"when": {}}, True),
     ({"sample": "interval(0, 1)"}, True), ({"a": 1}, False), ("interval(0, 1)", False),
     (1, False), (None, False), (["when"], False)],
)
def test_is_conditional(node: Any, expected: bool) -> None:
    assert is_conditional(node) is expected


@pytest.mark.parametrize(
    ("space", "flat"),
    [
        ({"m": {"b": _cond({"o": "x"})}}, {"m.b": _cond({"o": "x"})}),
        ({"a": {"b": {"c": _cond({"o": "x"}), "d": 1}}, "o": "choice(x)"},
         {"a.b.c": _cond({"o": "x"}), "a.b.d": 1, "o": "choice(x)"}),
        ({"m.b": _cond({"o": "x"})}, {"m.b": _cond({"o": "x"})}),
        ({"m": {}}, {"m": {}}),
        ({}, {}),
    ],
)
def test_flatten_space_keeps_a_conditional_entry_whole(space: dict, flat: dict) -> None:
    assert flatten_space(space) == flat


KEY = "experiment.search_space"


@pytest.mark.parametrize(
    ("space", "key", "fragment"),
    [
        # missing parent (the hint lists the choice params there are)
        ({"m": _cond({"opt": "sgd"}), "o": "choice(1, 2)", "x": "interval(0, 1)"},
         f"{KEY}.m.when.opt", "names opt, which is not a searched parameter"),
        ({"m": _cond({"opt": "sgd"}), "o": "choice(1, 2)"}, f"{KEY}.m.when.opt",
         "or branch on one of its choices: o"),
        ({"m": _cond({"opt": "sgd"})}, f"{KEY}.m.when.opt",
         "add opt: choice(...) to the search space"),
        # a constant is no searched parameter
        ({"m": _cond({"opt": "sgd"}), "opt": "sgd"}, f"{KEY}.m.when.opt",
         "which is not a searched parameter"),
        # non-choice parents
        ({"m": _cond({"x": 0.5}), "x": "interval(0, 1)"}, f"{KEY}.m.when.x",
         "names x, a float range; a condition needs a choice parent"),
        ({"m": _cond({"n": 1}), "n": "range(1, 3)"}, f"{KEY}.m.when.n", "int range"),
        # values not among the choices
        ({"m": _cond({"opt": "rmsprop"}), "opt": OPT}, f"{KEY}.m.when.opt",
         "is not among opt's choices ['sgd', 'adam', 'adamw']"),
        ({"m": _cond({"opt": ["adam", "rmsprop"]}), "opt": OPT}, f"{KEY}.m.when.opt",
         "is not among opt's choices"),
        ({"m": _cond({"opt": []}), "opt": OPT}, f"{KEY}.m.when.opt", "is not among"),
        ({"m": _cond({"n": "1"}), "n": "choice(1, 2)"}, f"{KEY}.m.when.n", "is not among"),
        ({"m": _cond({"n": None}), "n": "choice(1, 2)"}, f"{KEY}.m.when.n", "is not among"),
        # self-reference and cycles
        ({"m": _cond({"m": "a"}, "choice(a, b)")}, f"{KEY}.m.when.m",
         "makes the parameter depend on itself"),
        ({"a": _cond({"b": "x"}, "choice(x, y)"), "b": _cond({"a": "x"}, "choice(x, y)")},
         f"{KEY}.a.when", "'a -> b -> a' is a cycle of conditions"),
        ({"a": _cond({"b": "x"}, "choice(x, y)"), "b": _cond({"c": "x"}, "choice(x, y)"),
          "c": _cond({"a": "x"}, "choice(x, y)")}, f"{KEY}.a.when", "'a -> b -> c -> a'"),
        # a constant under when
        ({"m": _cond({"opt": "sgd"}, "0.5"), "opt": OPT}, f"{KEY}.m.sample",
         "is a constant under `when`, so there is nothing to sample; write choice(0.5)"),
        ({"m": _cond({"opt": "sgd"}, 0.5), "opt": OPT}, f"{KEY}.m.sample",  # YAML-typed
         "is a constant under `when`"),
        # wrong keys / shape of when
        ({"m": {"when": {"opt": "sgd"}}, "opt": OPT}, f"{KEY}.m",
         "is a conditional entry with keys ['when']"),
        ({"m": {**_cond({"opt": "sgd"}), "extra": 1}, "opt": OPT}, f"{KEY}.m",
         "keys ['extra', 'sample', 'when']"),
        ({"m": {"when": {}, "sample": "interval(0, 1)"}, "opt": OPT}, f"{KEY}.m.when",
         "must map a parent parameter to its value(s)"),
        ({"m": {"when": "opt", "sample": "interval(0, 1)"}, "opt": OPT}, f"{KEY}.m.when",
         "must map a parent"),
        ({"m": {"when": None, "sample": "interval(0, 1)"}, "opt": OPT}, f"{KEY}.m.when",
         "must map a parent"),
        # a bad sampled expression is reported as for any entry
        ({"m": _cond({"opt": "sgd"}, "interval(1, 0)"), "opt": OPT}, f"{KEY}.m",
         "has low > high"),
        # nested: the key names the full dotted path
        ({"model": {"b": _cond({"model.kind": "rnn"}), "kind": "choice(mlp, cnn)"}},
         f"{KEY}.model.b.when.model.kind", "is not among model.kind's choices"),
        ({"model": {"b": _cond({"kind": "mlp"}), "kind": "choice(mlp, cnn)"}},
         f"{KEY}.model.b.when.kind", "its choices: model.kind"),  # parents are named by full path
    ],
)
def test_bad_condition_names_key_and_rule(space: dict, key: str, fragment: str) -> None:
    with pytest.raises(SearchSpaceError) as info:
        parse_space(space)
    assert info.value.key == key, str(info.value)
    assert fragment in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(("parent", "value"), [("choice(1, 2)", True), ("choice(true, false)", 1)])
def test_bool_branch_value_is_not_an_int_choice(parent: str, value: Any) -> None:
    with pytest.raises(SearchSpaceError, match="is not among x's choices"):
        parse_space({"x": parent, "m": _cond({"x": value})})


def test_condition_on_zero_does_not_hold_for_false() -> None:
    params, _ = parse_space({"x": "choice(0, false)", "m": _cond({"x": 0})})
    assert [p.path for p in params] == ["x", "m"]
    assert params[1].applies({"x": 0})
    assert not params[1].applies({"x": False})
