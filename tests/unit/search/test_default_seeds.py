"""``sweep.seed`` reproduces the default searches: the searchers of ``make_search_alg`` (Ray's
``OptunaSearch`` with the default TPE; Tune's ``BasicVariantGenerator`` with
``search.params_first=true``), asked for trials without Ray running; trial 1 runs
``experiment.params``."""

from __future__ import annotations

import math
from typing import Any

import pytest

from sweeps import compose
from sweeps.search.defaults import settle_defaults
from sweeps.search.nested import flatten
from sweeps.search.searchers import make_search_alg, tune_param_space
from sweeps.search.space import parse_space

TRIALS = 5


def _searched(cfg: Any) -> dict[str, Any]:
    """experiment.params' values of the searched params (all inside digits' space)."""
    params, _ = parse_space(cfg.experiment.search_space)
    return {p.path: cfg.experiment.params[p.path] for p in params}


def _value(config: dict[str, Any]) -> float:
    """A made-up val_acc: best near lr 0.01, hidden 256, depth 2 (any function of the config)."""
    return (1.0 - abs(math.log10(config["lr"]) + 2.0) / 4 - abs(config["hidden"] - 256) / 1000
            - abs(config["depth"] - 2) / 10 - config["dropout"] / 5)


def _tpe_configs(seed: int) -> list[dict[str, Any]]:
    cfg = settle_defaults(compose("digits", [f"sweep.seed={seed}"]))
    alg = make_search_alg(cfg, 0, parse_space(cfg.experiment.search_space)[0])
    out = []
    for i in range(TRIALS):
        config = flatten(alg.suggest(f"t{i}"))
        alg.on_trial_complete(f"t{i}", {"val_acc": _value(config)})
        out.append(config)
    return out


def _random_configs(seed: int) -> list[dict[str, Any]]:
    from ray.tune.experiment import Experiment

    cfg = settle_defaults(compose("digits", ["search=random", "search.params_first=true",
                                             f"sweep.seed={seed}"]))
    params, _ = parse_space(cfg.experiment.search_space)
    alg = make_search_alg(cfg, 0, params)
    alg.add_configurations([Experiment("seeds", run=_trainable, num_samples=TRIALS,
                                       config=tune_param_space(cfg, params))])
    return [flatten(t.config) for t in iter(alg.next_trial, None)]


def _trainable(config: dict[str, Any]) -> None:  # never run: the trials are only generated
    pass


@pytest.mark.parametrize("configs", [_tpe_configs, _random_configs], ids=["tpe", "random"])
def test_the_same_seed_suggests_the_same_trials_and_another_seed_others(configs) -> None:
    first = _searched(compose("digits"))
    same, again, other = configs(0), configs(0), configs(1)
    assert len(same) == len(other) == TRIALS
    assert same == again
    assert {k: same[0][k] for k in first} == first == {k: other[0][k] for k in first}
    assert all(a != b for a, b in zip(same[1:], other[1:], strict=True))
    assert len({repr(sorted(c.items())) for c in same}) == TRIALS  # no trial repeated
    import ray

    assert not ray.is_initialized()


def test_tpe_models_after_its_start_up_trials_from_the_results_it_was_told() -> None:
    """Same seed, other results: the start-up trials (1-3 of 8) agree, the modelled ones not."""
    cfg = settle_defaults(compose("digits"))
    assert cfg.search.n_startup_trials == 3
    told = [_tpe_configs(0)]
    alg = make_search_alg(cfg, 0, parse_space(cfg.experiment.search_space)[0])
    worse = []
    for i in range(TRIALS):
        config = flatten(alg.suggest(f"t{i}"))
        alg.on_trial_complete(f"t{i}", {"val_acc": -_value(config)})  # the opposite ranking
        worse.append(config)
    assert worse[:3] == told[0][:3]
    assert worse[3:] != told[0][3:]
