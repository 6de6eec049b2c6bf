"""Checks of the search against its parsed space, before Ray starts.

    warnings = check_search(cfg, params)     # raises ConfigError / SearchSpaceError

Called by ``sweeps.execution.prepare`` after ``parse_space``: what ``validate`` cannot see
without the parsed params. Each failure is one line naming the key, the value and the fix.

* ``search=grid``: every param has discrete values (``sweeps.search.grid``); a grid of more than
  ``grid.WARN_ABOVE`` trials comes back as a warning with its count.
* ``search=random`` with a conditional param: refused (Tune's random generator samples every key);
  the fix names the Optuna random sampler, which asks define-by-run.
* ``search=tpe`` / ``search=optuna``: the sampler is built and run on a throwaway study over this
  space and these objectives (``sweeps.search.samplers.check_sampler``).
"""

from __future__ import annotations

from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError
from sweeps.search.space import Param

__all__ = ["check_search", "objectives_of", "trial_count"]


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
