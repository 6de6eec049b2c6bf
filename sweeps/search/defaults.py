"""The search defaults that depend on the sweep's size, settled once when a sweep starts.

    cfg = settle_defaults(cfg, record.identity)          # sweeps.driver.prepare
    startup_trials(8)                                    # 3

What each default is, that a value the user set is kept and that a resumed sweep keeps the
``search.n_startup_trials`` in its record (``identity``), why these values, and the measurements
(``bench/results/search_sim.json``, ``bench/results/search_defaults.json``):
docs/search.md#the-defaults.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sweeps.config import search_path
from sweeps.search.nested import flatten

if TYPE_CHECKING:
    from sweeps.config.schema import SweepConfig
    from sweeps.search.space import Param

__all__ = ["tpe_arguments", "search_story", "startup_trials", "settle_defaults", "params_first",
           "first_point", "budget_note", "size_note", "MODEL_BASED", "FEW_TRIALS", "ENOUGH_TRIALS"]

MODEL_BASED = ("tpe",)  # the searches params_first applies to by default
STARTUP_KEY = "search.n_startup_trials"
# Below this many trials TPE's model added nothing in bench.search_sim (at 4 trials, TPE and
# random search with the same first trial reached the target alike; from 6 on TPE was ahead):
# the plan says so.
FEW_TRIALS = 6
# Below this many, TPE reached random search's median best clearly sooner on 1 of the 3
# built-in experiments bench.search_sim measured (digits, at 8 trials); at 16 on all three:
# the plan notes it.
ENOUGH_TRIALS = 16


def startup_trials(num_samples: int) -> int:
    """TPE's random start-up trials for a sweep of ``num_samples``: a third, within 2..4.

    Example:
        >>> [startup_trials(n) for n in (4, 6, 8, 12, 16, 24, 100)]
        [2, 2, 3, 4, 4, 4, 4]
    """
    return max(2, min(4, round(num_samples / 3)))


def tpe_arguments(cfg: SweepConfig, conditional: bool = False) -> dict[str, Any]:
    """``TPESampler``'s arguments for ``search=tpe``: seeded by ``sweep.seed``; the start-up
    trials; ``multivariate`` (one objective) and ``constant_liar``, Optuna 5's defaults, named
    so that Optuna 4 (whose defaults were False) samples the same way; ``group`` where the
    space has conditional params (one objective), so TPE models them jointly with the params
    they depend on (multivariate TPE alone samples a param that not every trial has at random):
    ``conditional``, from the params ``prepare`` parsed.

    Example:
        >>> tpe_arguments(compose("digits", ["sweep.seed=7"]))
        {'seed': 7, 'n_startup_trials': 3, 'constant_liar': True, 'multivariate': True}
    """
    s = cfg.search
    startup = s.n_startup_trials
    out: dict[str, Any] = {"seed": cfg.sweep.seed,
                           "n_startup_trials": startup_trials(s.num_samples) if startup is None
                           else startup, "constant_liar": True}
    if len(cfg.experiment.metrics) <= 1:  # several objectives: Optuna's own choice (False)
        out["multivariate"] = True
        if conditional:
            out["group"] = True
    return out


def settle_defaults(cfg: SweepConfig, identity: dict[str, str] | None = None) -> SweepConfig:
    """``cfg`` with ``search.n_startup_trials`` and ``search.params_first`` set: the user's value,
    else the resumed sweep's (its record's ``identity``), else the default for this sweep's size.

    Example:
        >>> cfg = compose("digits")
        >>> settle_defaults(cfg).search.n_startup_trials                  # a new sweep of 8
        3
        >>> settle_defaults(cfg, {"search.n_startup_trials": "4"}).search.n_startup_trials
        4
    """
    s = cfg.search
    startup = s.n_startup_trials
    if startup is None:
        recorded = (identity or {}).get(STARTUP_KEY)
        startup = int(recorded) if recorded and recorded.isdigit() else \
            startup_trials(s.num_samples)
    first = params_first(cfg) if s.params_first is None else s.params_first
    if (startup, first) == (s.n_startup_trials, s.params_first):
        return cfg
    settled = dataclasses.replace(cfg, search=dataclasses.replace(
        s, n_startup_trials=startup, params_first=first))
    search_path.remember(settled, search_path.source_of(cfg))  # the plan names its file
    return settled


def params_first(cfg: SweepConfig) -> bool:
    """Whether the first trial runs ``experiment.params`` (unset: for TPE only; a sampler named
    with ``search=optuna`` is left to sample as it was designed to)."""
    if cfg.search.params_first is not None:
        return bool(cfg.search.params_first)
    return cfg.search.algorithm in MODEL_BASED


def first_point(cfg: SweepConfig, params: list[Param]) -> dict[str, Any]:
    """The searched params' values in ``experiment.params`` that lie inside the space, as
    Optuna names them and as the space holds them (warm start's own test,
    ``sweeps.search.warm_start.in_space``: the choice itself, an int for an int param, a
    stepped value on its grid); what ``OptunaSearch(points_to_evaluate=[...])`` enqueues. The
    rest are drawn by the sampler.

    Example:
        >>> from sweeps.search.space import parse_space
        >>> cfg = compose("digits_cnn")
        >>> first_point(cfg, parse_space(cfg.experiment.search_space)[0])  # weight_decay 0.0:
        {'lr': 0.01, 'channels': 32, 'blocks': 2}
    """
    from sweeps.search.optuna_space import optuna_name
    from sweeps.search.warm_start import OUTSIDE, in_space

    fixed = flatten(dict(cfg.experiment.params))
    # a conditional one is asked only where its condition holds
    values = {p.path: in_space(p, fixed[p.path]) for p in params if p.path in fixed}
    return {optuna_name(path): value for path, value in values.items() if value is not OUTSIDE}


def search_story(cfg: SweepConfig, params: list[Param], warm: int = 0,
                 resumed: bool = False) -> str:
    """What the plan's search line adds: which trial runs ``experiment.params`` and when TPE
    starts modelling (``warm``: the warm-start trials, which count as finished; ``resumed``: a
    sweep that has started, whose first trial the plan does not know, is not told).

    Example:
        >>> from sweeps.search.space import parse_space
        >>> cfg = settle_defaults(compose("digits"))
        >>> search_story(cfg, parse_space(cfg.experiment.search_space)[0])
        ' (trial 1: experiment.params; TPE models once 3 trials have finished)'
    """
    parts = []
    if params_first(cfg) and not warm and not resumed:
        point = first_point(cfg, params)
        left = len(params) - len(point)
        parts.append("trial 1: experiment.params" + (
            f", {left} of {len(params)} params drawn (not in experiment.params, or outside the "
            "space there)" if left else "") if point else "")
    if cfg.search.algorithm == "tpe":
        startup = tpe_arguments(cfg)["n_startup_trials"]
        among = f", {warm} warm-start trials among them" if warm else ""
        parts.append(f"TPE models once {startup} trials have finished{among}" if startup > warm
                     else f"TPE models from the start ({warm} warm-start trials)")
    parts = [p for p in parts if p]
    return f" ({'; '.join(parts)})" if parts else ""


def budget_note(cfg: SweepConfig, trials: int) -> str | None:
    """The plan's warning when ``trials`` are too few for TPE's model to help (None: enough,
    or not TPE).

    Example:
        >>> budget_note(settle_defaults(compose("digits", ["search.num_samples=4"])), 4)
        '4 trials: TPE models only trials 3-4, after 2 start-up trials; at 4 trials it found no \
better than random search with the same first trial (bench/results/search_sim.json); consider \
search.num_samples >= 8'
    """
    if cfg.search.algorithm != "tpe" or trials >= FEW_TRIALS:
        return None
    startup = tpe_arguments(cfg)["n_startup_trials"]
    modelled = (f"only trials {startup + 1}-{trials}" if startup + 1 < trials else
                f"only trial {trials}" if startup < trials else "no trial")
    return (f"{trials} trials: TPE models {modelled}, after {startup} start-up trials; at 4 "
            "trials it found no better than random search with the same first trial "
            "(bench/results/search_sim.json); consider search.num_samples >= 8")


def size_note(cfg: SweepConfig, trials: int) -> str | None:
    """The plan's note for a TPE sweep of ``FEW_TRIALS`` to ``ENOUGH_TRIALS - 1`` trials: what
    the benchmark found at that size (None otherwise; below ``FEW_TRIALS``, ``budget_note``).

    Example:
        >>> size_note(settle_defaults(compose("digits")), 8)
        "8 trials: TPE models trials 4-8; in bench/results/search_sim.json it reached random \
search's median best clearly sooner with 8 trials only on digits (0.57x its epochs; 0.96x and \
1.05x on digits_data and digits_cnn), with 16 on all three; consider search.num_samples >= 16 \
where trials are cheap"
    """
    if cfg.search.algorithm != "tpe" or not FEW_TRIALS <= trials < ENOUGH_TRIALS:
        return None
    startup = tpe_arguments(cfg)["n_startup_trials"]
    return (f"{trials} trials: TPE models trials {startup + 1}-{trials}; in "
            "bench/results/search_sim.json it reached random search's median best clearly "
            "sooner with 8 trials only on digits (0.57x its epochs; 0.96x and 1.05x on "
            f"digits_data and digits_cnn), with {ENOUGH_TRIALS} on all three; consider "
            f"search.num_samples >= {ENOUGH_TRIALS} where trials are cheap")
