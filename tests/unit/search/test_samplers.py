"""Optuna samplers from config: every buildable class, seeding, nested samplers, every refusal,
and ``check_sampler``'s trial run on a throwaway study."""

from __future__ import annotations

import copy
import functools
from typing import Any

import optuna
import pytest

from sweeps import compose
from sweeps.errors import ConfigError
from sweeps.search.optuna_space import DefineByRun
from sweeps.search.samplers import MULTI_OBJECTIVE, build_sampler, check_sampler, sampler_name
from sweeps.search.space import Param, parse_space

SPACE = parse_space({"x": "interval(0, 1)", "n": "range(1, 4)"})[0]
WITH_CHOICE = parse_space({"x": "interval(0, 1)", "c": "choice(a, b)"})[0]
CONDITIONAL = parse_space({"x": "interval(0, 1)", "o": "choice(a, b)",
                           "m": {"when": {"o": "a"}, "sample": "interval(0, 1)"}})[0]
ONE = {"val_acc": "max"}
TWO = {"val_acc": "max", "val_loss": "min"}
ALL = ["TPESampler", "RandomSampler", "CmaEsSampler", "GPSampler", "QMCSampler",
       "NSGAIISampler", "NSGAIIISampler"]


@functools.cache
def _composed(*overrides: str) -> Any:
    return compose("digits", list(overrides))


def _optuna(target: str, *extra: str, seed: int = 0) -> Any:
    """The composed config (cached: composing takes ~0.1 s; a copy, so a test cannot leak)."""
    return copy.deepcopy(_composed("search=optuna", f"search.sampler._target_={target}",
                                   f"sweep.seed={seed}", *extra))


def _seeded(target: str, sweep_seed: int, **args: Any) -> Any:
    """``search=optuna`` with ``search.sampler={_target_: target, **args}`` and ``sweep.seed``
    (set on a copy of one composed config, as the ``++search.sampler.*`` overrides would)."""
    cfg = _optuna("optuna.samplers.TPESampler")
    cfg.search.sampler = {"_target_": target, **args}
    cfg.sweep.seed = sweep_seed
    return cfg


def _draws(sampler: optuna.samplers.BaseSampler, n: int = 2) -> list[dict[str, Any]]:
    """The params of the first ``n`` trials ``sampler`` gives over ``SPACE``."""
    study = optuna.create_study(sampler=sampler)
    out = []
    for i in range(n):
        trial = study.ask()
        DefineByRun(SPACE)(trial)
        study.tell(trial, float(i))
        out.append(trial.params)
    return out


@pytest.fixture(autouse=True)
def _quiet_optuna() -> None:
    import warnings

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        (["search=tpe"], "TPESampler"),
        (["search=random"], "-"),
        (["search=grid"], "-"),
        (["search=optuna"], "TPESampler"),
        (["search=optuna", "search.sampler._target_=optuna.samplers.NSGAIISampler"],
         "NSGAIISampler"),
    ],
)
def test_sampler_name(overrides: list[str], name: str) -> None:
    assert sampler_name(_composed(*overrides)) == name


@pytest.mark.parametrize("name", [*ALL, "BruteForceSampler", "Unknown"])
def test_sampler_name_is_the_targets_class_name(name: str) -> None:
    assert sampler_name(_seeded(f"optuna.samplers.{name}", 0)) == name


@pytest.mark.parametrize("name", ALL + ["BruteForceSampler"])
def test_every_buildable_class(name: str) -> None:
    sampler = build_sampler(_seeded(f"optuna.samplers.{name}", 0))
    assert type(sampler) is getattr(optuna.samplers, name)


def test_optuna_group_default_is_tpe() -> None:
    assert type(build_sampler(compose("digits", ["search=optuna"]))) is optuna.samplers.TPESampler


@pytest.mark.parametrize(("startup", "seed"), [(4, 0), (1, 3), (10, 123)])
def test_tpe_honours_seed_and_startup_trials(startup: int, seed: int) -> None:
    cfg = compose("digits", ["search=tpe", f"search.n_startup_trials={startup}",
                             f"sweep.seed={seed}"])
    sampler = build_sampler(cfg)
    assert type(sampler) is optuna.samplers.TPESampler
    assert sampler._n_startup_trials == startup
    again = build_sampler(cfg)
    other = build_sampler(compose("digits", ["search=tpe", f"sweep.seed={seed + 1}"]))
    assert _draws(sampler, 1) == _draws(again, 1)
    assert _draws(sampler, 1) != _draws(other, 1)


SEEDED = [(f"optuna.samplers.{n}", {}) for n in ALL if n != "QMCSampler"] + [
    ("optuna.samplers.QMCSampler", {"scramble": True})]


@pytest.mark.parametrize(("target", "args"), SEEDED)
def test_optuna_sampler_is_seeded_by_sweep_seed(target: str, args: dict[str, Any]) -> None:
    first = _draws(build_sampler(_seeded(target, 3, **args)))
    assert _draws(build_sampler(_seeded(target, 3, **args))) == first
    assert _draws(build_sampler(_seeded(target, 4, **args))) != first


@pytest.mark.parametrize(("target", "args"), SEEDED)
def test_explicit_seed_wins_over_sweep_seed(target: str, args: dict[str, Any]) -> None:
    pinned = _draws(build_sampler(_seeded(target, 0, seed=7, **args)))
    assert pinned == _draws(build_sampler(_seeded(target, 7, **args)))
    assert pinned != _draws(build_sampler(_seeded(target, 0, **args)))


def test_seed_override_from_the_command_line() -> None:
    target = "optuna.samplers.RandomSampler"
    pinned = build_sampler(_optuna(target, "++search.sampler.seed=7", seed=0))
    assert _draws(pinned) == _draws(optuna.samplers.RandomSampler(seed=7))


@pytest.mark.parametrize(
    ("extra", "checks"),
    [
        (["++search.sampler.x0={x: 0.5}"], {"_x0": {"x": 0.5}}),  # a mapping without _target_
        (["++search.sampler.n_startup_trials=2"], {"_n_startup_trials": 2}),
    ],
)
@pytest.mark.filterwarnings("ignore::FutureWarning")  # Optuna 4.9 deprecated x0 and friends
def test_arguments_reach_the_sampler(extra: list[str], checks: dict[str, Any]) -> None:
    sampler = build_sampler(_optuna("optuna.samplers.CmaEsSampler", *extra))
    for attr, value in checks.items():
        assert getattr(sampler, attr) == value


@pytest.mark.parametrize(
    ("target", "extra", "attr", "value"),
    [
        ("QMCSampler", ["++search.sampler.scramble=true"], "_scramble", True),
        ("QMCSampler", ["++search.sampler.qmc_type=halton"], "_qmc_type", "halton"),
        ("NSGAIISampler", ["++search.sampler.population_size=8"], "_population_size", 8),
    ],
)
def test_scalar_arguments(target: str, extra: list[str], attr: str, value: Any) -> None:
    assert getattr(build_sampler(_optuna(f"optuna.samplers.{target}", *extra)), attr) == value


NESTED = "++search.sampler.independent_sampler"


@pytest.mark.parametrize(
    ("nested", "inner", "seed_of_inner"),
    [
        ([f"{NESTED}._target_=optuna.samplers.RandomSampler"], "RandomSampler", 5),
        ([f"{NESTED}={{_target_: optuna.samplers.RandomSampler, seed: 11}}"], "RandomSampler", 11),
        ([f"{NESTED}._target_=optuna.samplers.TPESampler"], "TPESampler", 5),
    ],
)
def test_nested_target_is_built_and_seeded(nested: list[str], inner: str,
                                           seed_of_inner: int) -> None:
    sampler = build_sampler(_optuna("optuna.samplers.CmaEsSampler", *nested, seed=5))
    assert type(sampler) is optuna.samplers.CmaEsSampler
    assert type(sampler._independent_sampler).__name__ == inner
    # CMA-ES asks its independent sampler for the first trial: the nested sampler's own draw
    alone = getattr(optuna.samplers, inner)(seed=seed_of_inner)
    assert _draws(sampler, 1) == _draws(alone, 1)


MISSING = "search.sampler._target_: {!r} is missing; name the sampler"
OUTSIDE = "is outside optuna.samplers, the only module a sampler is taken from"
S = "optuna.samplers."


@pytest.mark.parametrize(
    ("spec", "key", "fragments"),
    [
        ({}, "search.sampler._target_", [MISSING.format(None)]),
        ({"_target_": ""}, "search.sampler._target_", [MISSING.format("")]),
        ({"_target_": 3}, "search.sampler._target_", [MISSING.format(3)]),
        ({"_target_": "os.system"}, "search.sampler._target_",
         ["'os.system' " + OUTSIDE, f"use one of: {S}BruteForceSampler, {S}CmaEsSampler"]),
        ({"_target_": "builtins.eval"}, "search.sampler._target_", [OUTSIDE]),
        ({"_target_": f"{S}_tpe.sampler.TPESampler"}, "search.sampler._target_",
         [OUTSIDE, f"did you mean {S}TPESampler?"]),
        ({"_target_": "TPESampler"}, "search.sampler._target_",
         [OUTSIDE, f"did you mean {S}TPESampler?"]),
        ({"_target_": "optuna.TPESampler"}, "search.sampler._target_", [OUTSIDE]),
        ({"_target_": f"{S}NSGAIISamplr"}, "search.sampler._target_",
         [f"is not a sampler of optuna.samplers; did you mean {S}NSGAIISampler?"]),
        ({"_target_": f"{S}tpesampler"}, "search.sampler._target_",
         [f"did you mean {S}TPESampler?"]),
        ({"_target_": f"{S}Cmaes"}, "search.sampler._target_", [f"did you mean {S}CmaEsSampler?"]),
        ({"_target_": f"{S}IntersectionSearchSpace"}, "search.sampler._target_",
         ["is not a sampler of optuna.samplers; use one of"]),
        ({"_target_": f"{S}BaseSampler"}, "search.sampler._target_",
         ["is not a sampler of optuna.samplers"]),
        ({"_target_": f"{S}GridSampler"}, "search.sampler._target_",
         ["needs the grid spelled out in Python; use search=grid"]),
        ({"_target_": f"{S}TPESampler", "n_startup_trial": 3}, "search.sampler.n_startup_trial",
         ["3 is not an argument of TPESampler; did you mean n_startup_trials?"]),
        ({"_target_": f"{S}RandomSampler", "sed": 1}, "search.sampler.sed",
         ["is not an argument of RandomSampler; did you mean seed? RandomSampler takes: seed"]),
        ({"_target_": f"{S}RandomSampler", "zzz": 1}, "search.sampler.zzz",
         ["1 is not an argument of RandomSampler; RandomSampler takes: seed"]),
        ({"_target_": f"{S}QMCSampler", "qmc_type": "foo"}, "search.sampler",
         ["cannot build QMCSampler (ValueError:", "fix the arguments; QMCSampler takes: qmc_type"]),
        ({"_target_": f"{S}NSGAIISampler", "population_size": 1}, "search.sampler",
         ["cannot build NSGAIISampler (ValueError: `population_size` must be greater"]),
        ({"_target_": f"{S}PartialFixedSampler"}, "search.sampler",
         ["cannot build PartialFixedSampler (TypeError: missing a required argument"]),
        # nested: the same rules, under the nested key
        ({"_target_": f"{S}CmaEsSampler", "independent_sampler": {"_target_": "os.system"}},
         "search.sampler.independent_sampler._target_", [OUTSIDE]),
        ({"_target_": f"{S}CmaEsSampler",
          "independent_sampler": {"_target_": f"{S}RandomSampler", "sed": 1}},
         "search.sampler.independent_sampler.sed", ["did you mean seed?"]),
        ({"_target_": f"{S}CmaEsSampler",
          "independent_sampler": {"_target_": f"{S}NSGAIISampler", "population_size": 1}},
         "search.sampler.independent_sampler", ["cannot build NSGAIISampler"]),
        ({"_target_": f"{S}CmaEsSampler", "independent_sampler": {"_target_": f"{S}GridSampler"}},
         "search.sampler.independent_sampler._target_", ["use search=grid"]),
    ],
)
def test_refusals(spec: dict[str, Any], key: str, fragments: list[str]) -> None:
    cfg = _optuna(f"{S}TPESampler")
    cfg.search.sampler = spec
    with pytest.raises(ConfigError) as info:
        build_sampler(cfg)
    assert info.value.key == key, str(info.value)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert cfg.search.sampler == spec  # the config is left as it was


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        (["~search.sampler._target_"], "search.sampler._target_"),
        (["search.sampler._target_=os.system"], "search.sampler._target_"),
        (["++search.sampler.n_startup_trial=3"], "search.sampler.n_startup_trial"),
        ([f"search.sampler._target_={S}CmaEsSampler", f"{NESTED}._target_=builtins.eval"],
         "search.sampler.independent_sampler._target_"),
    ],
)
def test_refusals_from_the_command_line(overrides: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_sampler(compose("digits", ["search=optuna", *overrides]))
    assert info.value.key == key


@pytest.mark.parametrize(
    ("target", "params", "objectives", "warnings"),
    [
        *[(n, SPACE, TWO, []) for n in MULTI_OBJECTIVE],
        ("CmaEsSampler", SPACE, ONE, []),
        ("BruteForceSampler", parse_space({"c": "choice(a, b, c)", "n": "range(1, 3)"})[0],
         ONE, []),
        ("TPESampler", CONDITIONAL, ONE, []),
        ("CmaEsSampler", WITH_CHOICE, ONE,
         ["CmaEsSampler models only some of these params; it samples c at random (Optuna's "
          "independent sampler: categorical or conditional params)"]),
        ("CmaEsSampler", CONDITIONAL, ONE, ["CmaEsSampler models only some of these params; "
                                            "it samples m, o at random"]),
        ("CmaEsSampler", parse_space({"model.k": "choice(a, b)", "x": "interval(0, 1)"})[0], ONE,
         ["it samples model.k at random"]),  # dotted name, not Optuna's model/k
    ],
)
def test_check_sampler_accepts(target: str, params: list[Param], objectives: dict[str, str],
                               warnings: list[str]) -> None:
    got = check_sampler(_optuna(f"optuna.samplers.{target}"), params, objectives)
    assert len(got) == len(warnings)
    for line, fragment in zip(got, warnings, strict=True):
        assert fragment in line


@pytest.mark.parametrize(
    ("overrides", "params", "objectives", "key", "fragments"),
    [
        (["search=optuna", "search.sampler._target_=optuna.samplers.CmaEsSampler"], SPACE, TWO,
         "search.sampler._target_",
         ["'optuna.samplers.CmaEsSampler' cannot sample this sweep (ValueError:",
          "for 2 objectives use one of optuna.samplers.TPESampler, optuna.samplers.NSGAIISampler"]),
        (["search=optuna", "search.sampler._target_=optuna.samplers.BruteForceSampler"], SPACE,
         ONE, "search.sampler._target_",
         ["'optuna.samplers.BruteForceSampler' cannot sample this sweep", "step must be given",
          "pick another sampler, e.g. optuna.samplers.TPESampler"]),
        (["search=optuna", "++search.sampler.n_startup_trials=abc"], SPACE, ONE,
         "search.sampler._target_", ["cannot sample this sweep (TypeError:"]),
    ],
)
def test_check_sampler_refuses(overrides: list[str], params: list[Param],
                               objectives: dict[str, str], key: str,
                               fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        check_sampler(compose("digits", overrides), params, objectives)
    assert info.value.key == key
    for fragment in fragments:
        assert fragment in str(info.value)


def test_check_sampler_names_search_algorithm_for_tpe() -> None:
    cfg = compose("digits", ["search=tpe"])
    with pytest.raises(ConfigError) as info:  # low > high (parse_space forbids it): Optuna refuses
        check_sampler(cfg, [Param("x", "float", 1.0, 0.0)], ONE)
    assert info.value.key == "search.algorithm"
    assert "optuna.samplers.TPESampler" in str(info.value)


def _default_handler_on() -> bool:
    root = optuna.logging._get_library_root_logger()
    return optuna.logging._default_handler in root.handlers


@pytest.mark.parametrize(
    ("target", "objectives"),
    [("TPESampler", ONE), ("CmaEsSampler", ONE), ("CmaEsSampler", TWO)],  # last one raises
)
def test_check_sampler_leaves_optunas_log_handler_on(target: str,
                                                     objectives: dict[str, str]) -> None:
    optuna.logging.enable_default_handler()
    before = set(optuna.logging._get_library_root_logger().handlers)
    try:
        check_sampler(_optuna(f"optuna.samplers.{target}"), WITH_CHOICE, objectives)
    except ConfigError:
        assert len(objectives) == 2
    assert _default_handler_on()
    assert set(optuna.logging._get_library_root_logger().handlers) == before  # collector gone


@pytest.mark.parametrize("space", [{"c": "choice(a, b)"}, {"n": "range(1, 3)"}])
def test_brute_force_over_a_small_discrete_space_is_accepted(space: dict) -> None:
    cfg = _optuna("optuna.samplers.BruteForceSampler")
    assert check_sampler(cfg, parse_space(space)[0], ONE) == []


def test_multi_objective_fix_does_not_blame_objectives_for_a_space_error() -> None:
    with pytest.raises(ConfigError) as info:
        check_sampler(_optuna("optuna.samplers.BruteForceSampler"), SPACE, TWO)
    assert "objectives" not in info.value.fix
