"""Checks of the search against its parsed space, before Ray starts.

    warnings = check_search(cfg, params)     # raises ConfigError / SearchSpaceError

Called by ``sweeps.driver.prepare`` after ``parse_space``: what ``validate`` cannot see
without the parsed params. Each failure is one line naming the key, the value and the fix.

* ``search=grid``: every param discrete (``sweeps.search.grid``); over ``WARN_ABOVE``: a warning.
* ``search=random`` with a conditional param: refused (Tune's random generator samples every key);
  the fix names the Optuna random sampler, which asks define-by-run.
* ``search=tpe`` / ``search=optuna``: the sampler is built and run on a throwaway study over this
  space and these objectives (``sweeps.search.samplers.check_sampler``).
"""

from __future__ import annotations

import difflib

from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError
from sweeps.search.space import Param

__all__ = ["check_search", "objectives_of", "trial_count", "mutated"]


def objectives_of(cfg: SweepConfig) -> dict[str, str]:
    """Metric -> direction of everything the searcher optimizes (one entry unless
    ``experiment.metrics`` names several).

    Example:
        >>> objectives_of(compose("digits"))
        {'val_acc': 'max'}
    """
    e = cfg.experiment
    return dict(e.metrics) if e.metrics else {e.metric: e.mode}


def trial_count(cfg: SweepConfig, params: list[Param]) -> int:
    """How many trials the sweep runs: ``search.num_samples``, or the grid size for a grid.

    Example:
        >>> trial_count(compose("digits", ["search=grid", "search.num_samples=2"]),
        ...             [Param("x", "choice", choices=(1, 2, 3))])
        3
    """
    if cfg.search.algorithm == "grid" and params:
        from sweeps.search.grid import grid_size

        return grid_size(params)
    return cfg.search.num_samples


def check_search(cfg: SweepConfig, params: list[Param]) -> list[str]:
    """Raise on a search this space cannot run; return warnings to log before starting.

    Example:
        >>> check_search(compose("digits", ["search=grid"]), [Param("x", "choice", choices=(1, 2))])
        []
    """
    algorithm = cfg.search.algorithm
    if cfg.scheduler.name == "pbt":
        _check_pbt(cfg, params)
    if cfg.search.warm_start and algorithm not in ("tpe", "optuna"):
        raise ConfigError("search.warm_start", cfg.search.warm_start,
                          f"seeds an Optuna searcher, and search={algorithm} has none",
                          "use search=tpe or search=optuna, or drop search.warm_start")
    if algorithm in ("tpe", "optuna") and not params:
        raise ConfigError("experiment.search_space", dict(cfg.experiment.search_space),
                          "has no parameter to search",
                          "add one, e.g. lr: tag(log, interval(1e-4, 1e-1)), or use "
                          "search=random to repeat a fixed config")
    if algorithm == "grid":
        from sweeps.search.grid import WARN_ABOVE, grid_size, grid_values

        if not params:
            raise ConfigError("experiment.search_space", dict(cfg.experiment.search_space),
                              "has no parameter to make a grid of",
                              "add one, e.g. hidden: choice(64, 128), or use search=random")
        size = grid_size(params)
        if size > WARN_ABOVE:
            sizes = " x ".join(f"{len(grid_values(p))} {p.path}" for p in params)
            return [f"search=grid runs {size} trials ({sizes}); trim the choices or use "
                    "search=tpe if that is more than you meant"]
        return []
    if algorithm == "random":
        conditional = next((p for p in params if p.when), None)
        if conditional:
            raise ConfigError(
                "search.algorithm", "random", f"cannot leave out the conditional "
                f"{conditional.path} (Tune's random search samples every key)",
                "use search=optuna search.sampler._target_=optuna.samplers.RandomSampler "
                "(random, define-by-run)")
        return []
    from sweeps.search.samplers import check_sampler

    return check_sampler(cfg, params, objectives_of(cfg))


def _check_pbt(cfg: SweepConfig, params: list[Param]) -> None:
    """PBT perturbs searched values: ``scheduler.mutate`` must name searched params, and the
    space must be unconditional (a perturbed parent would add or drop its children)."""
    searched = [p.path for p in params]
    conditional = next((p for p in params if p.when), None)
    if conditional:
        raise ConfigError("scheduler.name", "pbt", f"cannot perturb the conditional space of "
                          f"{conditional.path} (a changed parent adds or drops it)",
                          "use scheduler=asha or none with a conditional space, or make "
                          f"{conditional.path} unconditional")
    for key in cfg.scheduler.mutate or []:
        if key not in searched:
            close = difflib.get_close_matches(key, searched, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError("scheduler.mutate", key, "is not a key of experiment.search_space",
                              f"{hint}name searched keys: {', '.join(searched) or 'none'}")
    if not mutated(params, cfg.scheduler.mutate):
        raise ConfigError("scheduler.mutate", cfg.scheduler.mutate,
                          "leaves PBT nothing to perturb (no float param is searched)",
                          f"name the keys to perturb, e.g. scheduler.mutate=[{searched[0]}]"
                          if searched else "add a float param to experiment.search_space")
    if cfg.search.algorithm not in ("random", "grid"):
        raise ConfigError("search.algorithm", cfg.search.algorithm,
                          "would learn from PBT trials whose weights and values PBT changed "
                          "after it suggested them",
                          "use search=random (PBT's own initial population) or search=grid "
                          "with scheduler=pbt")


def mutated(params: list[Param], mutate: list[str] | None) -> list[Param]:
    """The params PBT's explore perturbs (``sweeps.search.pbt``): those ``mutate`` names, or
    (None) the float ones.

    Example:
        >>> ps = [Param("lr", "float", low=0.01, high=0.1), Param("h", "int", low=8, high=64)]
        >>> [p.path for p in mutated(ps, None)], [p.path for p in mutated(ps, ["h"])]
        (['lr'], ['h'])
    """
    if mutate is None:
        return [p for p in params if p.kind == "float"]
    return [p for p in params if p.path in mutate]
