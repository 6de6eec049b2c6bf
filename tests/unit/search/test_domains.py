"""Every search gives a trial only values its space declares: each grammar expression (a row)
against each search (a column), through the project's own searcher builders and Ray's and
Optuna's real searchers; Ray never started.

A row names an expression and its domain as the user reads it: a stepped range is the set
``lo + k * step`` computed here on decimals (independently of ``sweeps.search.ranges``), so
``0.30000000000000004`` is not a value of ``range(0.1, 0.9, 0.2)``; ints must be ``int`` and
floats ``float`` (not numpy's). A search that cannot serve an expression must refuse it before
Ray starts (``check_search``), and only the refusals listed in ``REFUSED`` are allowed.
"""

from __future__ import annotations

import copy
import functools
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import optuna
import pytest

from sweeps import compose
from sweeps.errors import ConfigError
from sweeps.search.checks import check_search, mutated
from sweeps.search.optuna_space import distribution
from sweeps.search.pbt import decision_rng, explore
from sweeps.search.samplers import UNBUILDABLE
from sweeps.search.searchers import make_search_alg, tune_param_space
from sweeps.search.space import Param, flatten, parse_space, same_value
from sweeps.search.warm_start import WarmStart, screen


@dataclass(frozen=True)
class Points:
    """A finite domain: exactly these values, of exactly their types."""

    values: tuple[Any, ...]

    def holds(self, v: Any) -> bool:
        return any(type(v) is type(c) and same_value(v, c) for c in self.values)


@dataclass(frozen=True)
class Between:
    """A continuous domain: ``low <= v <= high``, of type ``kind``."""

    low: float
    high: float
    kind: type

    def holds(self, v: Any) -> bool:
        return type(v) is self.kind and self.low <= v <= self.high


def steps(lo: str, hi: str, step: str, kind: type = float) -> Points:
    """The points ``lo + k * step`` up to ``hi``, on decimals, as the user reads the range."""
    d_lo, d_step, d_hi = Decimal(lo), Decimal(step), Decimal(hi)
    n = int((d_hi - d_lo) / d_step)
    return Points(tuple(kind(d_lo + k * d_step) for k in range(n + 1)))


ROWS = [
    ("choice(64, 128, 256)", Points((64, 128, 256))),
    ("choice(0.1, 0.25, 1.5)", Points((0.1, 0.25, 1.5))),
    ("choice(relu, tanh, gelu)", Points(("relu", "tanh", "gelu"))),
    ("choice(true, false)", Points((True, False))),
    ("choice(1, a, 0.5, true)", Points((1, "a", 0.5, True))),
    ("range(1, 3)", Points((1, 2, 3))),
    ("range(1, 9, 2)", Points((1, 3, 5, 7, 9))),  # the issue: not 2, 4, 6, 8
    ("range(-6, 6, 4)", Points((-6, -2, 2, 6))),
    ("range(0, 1000, 250)", steps("0", "1000", "250", int)),
    ("range(3, 3)", Points((3,))),
    ("range(0.1, 0.9, 0.2)", Points((0.1, 0.3, 0.5, 0.7, 0.9))),  # the issue
    ("range(-1.0, 1.0, 0.1)", steps("-1.0", "1.0", "0.1")),
    ("range(0.0, 1.0, 0.25)", Points((0.0, 0.25, 0.5, 0.75, 1.0))),
    ("range(1e-5, 1e-4, 1e-5)", steps("1e-5", "1e-4", "1e-5")),
    ("range(2.5, 2.5, 0.1)", Points((2.5,))),
    ("range(1, 2.5, 0.5)", Points((1.0, 1.5, 2.0, 2.5))),
    ("range(1.0, 4.0)", Points((1.0, 2.0, 3.0, 4.0))),
    ("interval(0.0, 0.5)", Between(0.0, 0.5, float)),
    ("interval(-1.5, -0.5)", Between(-1.5, -0.5, float)),
    ("int(interval(1, 10))", Points(tuple(range(1, 11)))),
    ("int(interval(-5, 5))", Points(tuple(range(-5, 6)))),
    ("tag(log, interval(1e-4, 1e-1))", Between(1e-4, 1e-1, float)),
    ("tag(log, int(interval(8, 256)))", Points(tuple(range(8, 257)))),
    ("tag(log, int(interval(1, 3)))", Points((1, 2, 3))),
]
CONTINUOUS = {expr for expr, domain in ROWS if isinstance(domain, Between)}

# Every sampler search=optuna can build (samplers.py), with arguments that let the model-based
# ones go past their random start-up trials within N_OPTUNA trials.
SAMPLER_ARGS = {"GPSampler": ["++search.sampler.n_startup_trials=2"],
                "NSGAIISampler": ["++search.sampler.population_size=4"],
                "NSGAIIISampler": ["++search.sampler.population_size=4"],
                "CmaEsSampler": ["++search.sampler.n_startup_trials=2"],
                "QMCSampler": ["++search.sampler.warn_independent_sampling=false"]}
SAMPLERS = sorted(n for n, v in vars(optuna.samplers).items()
                  if isinstance(v, type) and issubclass(v, optuna.samplers.BaseSampler)
                  and not n.startswith("Base") and n not in UNBUILDABLE)
SEARCHES = {
    "random": ["search=random"],
    "grid": ["search=grid"],
    "tpe": ["search=tpe"],
    **{f"optuna:{n}": ["search=optuna", f"search.sampler._target_=optuna.samplers.{n}",
                       *SAMPLER_ARGS.get(n, [])] for n in SAMPLERS},
}
# (search, expression) pairs refused up front: a grid of any interval (grid.py), brute force
# over a continuum (Optuna's BruteForceSampler needs a step).
REFUSED = ({("grid", e) for e, _ in ROWS if "interval" in e}
           | {("optuna:BruteForceSampler", e) for e in CONTINUOUS})
N_RANDOM, N_OPTUNA = 200, 12
N_FEWER = {"optuna:GPSampler": 4}  # a GP fit per trial is the slow part of this file

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")


@functools.cache
def _composed(*overrides: str) -> Any:
    return compose("digits", list(overrides))


def _cfg(overrides: list[str]) -> Any:
    return copy.deepcopy(_composed(*overrides, "scheduler=none"))


def _space(expr: str) -> list[Param]:
    """The row's expression twice (a nested and a top-level key, so multivariate samplers model
    two dimensions) and a constant, which no searcher may hand out."""
    params, constants = parse_space({"model": {"x": expr}, "y": expr, "fixed": 7})
    assert constants == {"fixed": 7}
    return params


def _trial_values(search: str, params: list[Param], seed: int = 0) -> list[dict[str, Any]]:
    """The flat searched values of the trials the search hands out, in order."""
    cfg = _cfg([*SEARCHES[search], f"sweep.seed={seed}"])
    check_search(cfg, params)  # what runs before Ray starts: raises for a refused pair
    alg = make_search_alg(cfg, 0, params)
    if search in ("random", "grid"):
        from ray.tune.experiment import Experiment

        space = tune_param_space(cfg, params)
        alg.add_configurations([Experiment("domains", run=_trainable, config=space,
                                           num_samples=N_RANDOM if search == "random" else 1)])
        trials = iter(alg.next_trial, None)
        return [flatten(t.config) for t in trials]
    out = []
    for i in range(N_FEWER.get(search, N_OPTUNA)):
        config = flatten(alg.suggest(f"t{i}"))
        alg.on_trial_complete(f"t{i}", {"val_acc": random.Random(i).random()})
        out.append(config)
    return out


def _trainable(config: dict[str, Any]) -> None:  # never run: the trials are only generated
    pass


@pytest.mark.parametrize("search", list(SEARCHES))
@pytest.mark.parametrize(("expr", "domain"), ROWS)
def test_every_search_hands_out_only_declared_values(expr: str, domain: Any,
                                                     search: str) -> None:
    params = _space(expr)
    if (search, expr) in REFUSED:
        with pytest.raises(ConfigError, match="experiment.search_space|search.sampler"):
            _trial_values(search, params)
        return
    trials = _trial_values(search, params)
    assert trials
    for values in trials:
        assert set(values) == {"model.x", "y"}, values  # constants are the trial driver's
        for key, value in values.items():
            assert domain.holds(value), f"{search}: {expr} gave {key}={value!r}"
    seen = {v for t in trials for v in t.values()}
    if search == "grid":
        assert len(trials) == len(domain.values) ** 2 and seen == set(domain.values)
    if search == "random" and isinstance(domain, Points) and len(domain.values) <= 21:
        assert seen == set(domain.values)  # every point drawn, both ends included


@pytest.mark.parametrize("search", ["random", "tpe", "optuna:CmaEsSampler"])
def test_the_same_seed_gives_the_same_draws(search: str) -> None:
    params = _space("range(0.1, 0.9, 0.2)") + parse_space({"z": "interval(0.0, 1.0)"})[0]
    first = _trial_values(search, params, seed=3)
    assert first == _trial_values(search, params, seed=3)
    assert first != _trial_values(search, params, seed=4)


@pytest.mark.parametrize(("expr", "domain"), [r for r in ROWS if r[0].startswith("range(")
                                              and isinstance(r[1].values[0], float)])
def test_optuna_keeps_the_declared_high_of_a_stepped_float_range(expr: str,
                                                                 domain: Points) -> None:
    """Optuna lowers ``high`` (with a warning) when the step does not divide the range."""
    dist = distribution(parse_space({"x": expr})[0][0])
    assert (dist.low, dist.high) == (min(domain.values), max(domain.values))


@pytest.mark.parametrize("search", [s for s in SEARCHES if s not in ("random", "grid")])
def test_conditional_params_get_declared_values_only_where_they_apply(search: str) -> None:
    params = parse_space({
        "opt": "choice(sgd, adam)",
        "model": {"width": "range(2, 10, 4)",
                  "momentum": {"when": {"opt": "sgd"}, "sample": "range(0.1, 0.9, 0.2)"}},
        "beta": {"when": {"opt": "adam"}, "sample": "tag(log, int(interval(1, 4)))"},
    })[0]
    for values in _trial_values(search, params):
        sgd = values["opt"] == "sgd"
        assert Points(("sgd", "adam")).holds(values["opt"])
        assert Points((2, 6, 10)).holds(values["model.width"])
        assert ("model.momentum" in values) == sgd and ("beta" in values) == (not sgd)
        if sgd:
            assert Points((0.1, 0.3, 0.5, 0.7, 0.9)).holds(values["model.momentum"]), values
        else:
            assert Points((1, 2, 3, 4)).holds(values["beta"]), values


def _start(domain: Any, rng: random.Random) -> Any:
    if isinstance(domain, Points):
        return rng.choice(domain.values)
    return rng.uniform(domain.low, domain.high)


@pytest.mark.parametrize("resample", [0.0, 0.25, 1.0])
@pytest.mark.parametrize(("expr", "domain"), ROWS)
def test_pbt_explore_stays_in_the_domain(expr: str, domain: Any, resample: float) -> None:
    params = _space(expr)
    targets = mutated(params, ["model.x", "y"])
    rng = random.Random(0)
    config = {p.path: _start(domain, rng) for p in params}
    seen = set()
    for k in range(200):  # each decision perturbs the last one's result
        config, _ = explore(config, targets, decision_rng(0, "t", 2 * k, k), resample)
        for key in ("model.x", "y"):
            assert domain.holds(config[key]), f"{expr} explored to {key}={config[key]!r}"
            seen.add(config[key])
    if resample == 1.0 and isinstance(domain, Points) and len(domain.values) <= 21:
        assert seen == set(domain.values)


def _near_misses(domain: Any, stepped: bool) -> list[Any]:
    """What an earlier trial may have recorded for a value of the domain: the value, its text
    (MLflow keeps params as text), a rounding off a bound (a log bound), Optuna's float noise
    of a stepped range (0.30000000000000004)."""
    if isinstance(domain, Between):
        return [domain.low, domain.high, (domain.low + domain.high) / 2, str(domain.high),
                domain.low - abs(domain.low) * 1e-12, domain.high + abs(domain.high) * 1e-12]
    out: list[Any] = []
    for v in domain.values:
        out += [v, str(v)]
        if stepped and isinstance(v, float):
            out += [v + 3e-16 * max(1.0, abs(v)), v - 3e-16 * max(1.0, abs(v))]
    return out


@pytest.mark.parametrize(("expr", "domain"), ROWS)
def test_warm_start_snaps_earlier_values_into_the_domain(expr: str, domain: Any) -> None:
    params = _space(expr)
    trials = []
    for i, raw in enumerate(_near_misses(domain, bool(params[0].step))):
        trial = screen(f"t{i}", {"model.x": raw, "y": raw, "fixed": 7}, {"val_acc": 0.5},
                       params, {"val_acc": "max"})
        assert not isinstance(trial, str), f"{expr}: {raw!r} was refused ({trial})"
        assert set(trial.params) == {"model.x", "y"}
        for value in trial.params.values():
            assert domain.holds(value), f"{expr}: {raw!r} became {value!r}"
        trials.append(trial)
    # and Optuna takes them as finished trials of its study (its own containment check)
    alg = make_search_alg(_cfg(["search=tpe"]), 0, params, WarmStart("earlier", trials))
    config = flatten(alg.suggest("next"))
    assert all(domain.holds(config[k]) for k in ("model.x", "y"))
    assert len(alg._ot_study.trials) == len(trials) + 1


@pytest.mark.parametrize(("expr", "raw"), [
    ("range(1, 9, 2)", 4), ("range(0.1, 0.9, 0.2)", 0.2), ("range(0.1, 0.9, 0.2)", 0.3001),
    ("range(0.1, 0.9, 0.2)", 1.1), ("int(interval(1, 10))", 2.5), ("interval(0.0, 0.5)", 0.6),
    ("choice(64, 128)", 96),
])
def test_warm_start_refuses_values_off_the_domain(expr: str, raw: Any) -> None:
    result = screen("t", {"x": raw}, {"val_acc": 0.5}, parse_space({"x": expr})[0],
                    {"val_acc": "max"})
    assert result == "x outside the space"
