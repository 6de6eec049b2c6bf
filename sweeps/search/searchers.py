"""The Tune search algorithm of a sweep and the ``param_space`` that goes with it.

    alg = make_search_alg(cfg, max_concurrent, params, warm_start)
    tune.Tuner(..., param_space=tune_param_space(cfg, params),
               tune_config=tune.TuneConfig(search_alg=alg))

* ``random`` / ``grid``: Tune's seeded ``BasicVariantGenerator`` over ``sweeps.search.tune_space``
  domains / ``grid_search`` lists (``sweeps.search.grid``).
* ``tpe`` / ``optuna``: Ray's ``OptunaSearch`` with ``sweeps.search.samplers``' sampler over a
  define-by-run space (``sweeps.search.optuna_space``; the Tuner's ``param_space`` is empty);
  several objectives (``experiment.metrics``) become Optuna's ``directions``.

``search.params_first`` (docs/search.md#the-defaults) goes to the searcher as Ray's
``points_to_evaluate``.

Warm start (``search.warm_start``): the earlier trials go into the Optuna study as finished
trials before the first suggestion, through an ``InMemoryStorage`` handed to ``OptunaSearch``
(which loads the study of that name). Divergence from Ray's own ``points_to_evaluate`` +
``evaluated_rewards``: that path refuses a define-by-run space and has no multi-objective form;
this one takes both, and the earlier trials are not run again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeps.config.schema import SweepConfig
from sweeps.search.checks import objectives_of
from sweeps.search.defaults import first_point, params_first
from sweeps.search.grid import to_grid_space
from sweeps.search.nested import unflatten
from sweeps.search.optuna_space import DefineByRun, optuna_params
from sweeps.search.samplers import build_sampler
from sweeps.search.space import Param

if TYPE_CHECKING:
    import optuna
    from ray.tune.search import SearchAlgorithm, Searcher

    from sweeps.search.warm_start import WarmStart

__all__ = ["make_search_alg", "tune_param_space", "seeded_storage", "STUDY_NAME"]

STUDY_NAME = "optuna"  # the name OptunaSearch gives its study (and loads from a storage)


def make_search_alg(cfg: SweepConfig, max_concurrent: int, params: list[Param],
                    warm: WarmStart | None = None) -> Searcher | SearchAlgorithm:
    """The search algorithm ``cfg.search`` names, seeded with ``sweep.seed``, over ``params``
    (the space ``prepare`` parsed).

    Tune ignores ``TuneConfig.max_concurrent_trials`` for a ``BasicVariantGenerator`` (it only
    wraps ``Searcher``s), so random and grid search get the limit themselves.
    """
    # with warm-start trials the searcher already has known points: nothing is enqueued
    first = first_point(cfg, params) if params_first(cfg) and not (warm and warm.trials) else {}
    if cfg.search.algorithm in ("random", "grid"):
        from ray.tune.search.basic_variant import BasicVariantGenerator

        return BasicVariantGenerator(random_state=cfg.sweep.seed, max_concurrent=max_concurrent,
                                     points_to_evaluate=[unflatten(first, sep="/")]
                                     if first else None)
    from sweeps.search.optuna_searcher import MetricTolerantOptunaSearch

    objectives = objectives_of(cfg)
    several = len(objectives) > 1
    return MetricTolerantOptunaSearch(
        space=DefineByRun(params),
        metric=list(objectives) if several else cfg.experiment.metric,
        mode=list(objectives.values()) if several else cfg.experiment.mode,
        sampler=build_sampler(cfg, conditional=any(p.when for p in params)),
        study_name=STUDY_NAME,
        points_to_evaluate=[first] if first else None,  # enqueued: trial 1 runs them
        storage=seeded_storage(objectives, params, warm) if warm and warm.trials else None)


def tune_param_space(cfg: SweepConfig, params: list[Param],
                     restoring: bool = False) -> dict[str, Any] | None:
    """The Tuner's ``param_space`` for this search (empty when Optuna asks define-by-run).

    ``restoring``: for ``Tuner.restore``, where an Optuna search passes None (Tune keeps the
    pickled one, which the searcher ignores): a sweep started before the define-by-run space
    pickled a static one, and Ray refuses a restore whose keys differ.

    Example:
        >>> from sweeps.search.space import parse_space
        >>> tune_param_space(compose("digits"), parse_space({"x": "choice(1, 2)"})[0])
        {}
    """
    if cfg.search.algorithm == "grid":
        return to_grid_space(params)
    if cfg.search.algorithm == "random":
        from sweeps.search.tune_space import to_tune_space

        return to_tune_space(params)
    return None if restoring else {}


def seeded_storage(objectives: dict[str, str], params: list[Param],
                   warm: WarmStart) -> optuna.storages.InMemoryStorage:
    """An in-memory Optuna storage whose study ``STUDY_NAME`` holds ``warm``'s trials as
    finished ones, in ``params``' Optuna names and distributions.

    Example:
        >>> from sweeps.search.warm_start import EarlierTrial, WarmStart
        >>> warm = WarmStart("example", [EarlierTrial({"x": 1}, {"val_acc": 0.9}, "t0")], {})
        >>> storage = seeded_storage({"val_acc": "max"}, [Param("x", "choice", choices=(1, 2))],
        ...                          warm)
        >>> import optuna
        >>> optuna.load_study(study_name=STUDY_NAME, storage=storage).best_trial.params
        {'x': 1}
    """
    import optuna

    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(
        storage=storage, study_name=STUDY_NAME,
        directions=["minimize" if d == "min" else "maximize" for d in objectives.values()])
    for trial in warm.trials:
        names, dists = optuna_params(trial.params, params)
        values = [float(trial.metrics[m]) for m in objectives]
        study.add_trial(optuna.trial.create_trial(
            params=names, distributions=dists, values=values,
            user_attrs={"warm_start": warm.source, "trial_id": trial.trial_id}))
    return storage
