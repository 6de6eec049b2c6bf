"""Grid search: every combination of the space's discrete values (``search=grid``).

    python -m sweeps +experiment=digits search=grid \\
        experiment.search_space.hidden="choice(64,128)" experiment.search_space.depth="range(1,3)"

What a grid takes and refuses: docs/experiments.md#search-algorithms-schedulers-and-objectives.
The grid is Ray Tune's ``grid_search`` (its ``BasicVariantGenerator`` walks it).

Deliberate divergence from Ray: each point runs once, ``search.num_samples`` does not apply
(Ray repeats the grid that many times: ``num_samples: 8``, meant as a TPE budget, would run it
8 times over), as in W&B, Katib and Hydra's basic sweeper. To repeat points, search a seed.
"""

from __future__ import annotations

import math
from typing import Any

from sweeps.errors import SearchSpaceError
from sweeps.search.ranges import grid_points
from sweeps.search.space import Param, unflatten

__all__ = ["grid_values", "grid_size", "to_grid_space", "WARN_ABOVE"]

WARN_ABOVE = 100


def grid_values(p: Param) -> list[Any]:
    """The values one param contributes to the grid.

    Example:
        >>> grid_values(Param("d", "int", low=1, high=5, step=2))
        [1, 3, 5]
        >>> grid_values(Param("x", "float", low=0.1, high=0.3, step=0.1))
        [0.1, 0.2, 0.3]
        >>> grid_values(Param("x", "float", low=-0.3, high=0.3, step=0.2))
        [-0.3, -0.1, 0.1, 0.3]
    """
    key = f"experiment.search_space.{p.path}"
    if p.when:
        raise SearchSpaceError(key, p.describe(), "is conditional, which a grid cannot express",
                               "use search=tpe or search=optuna for a conditional space, or "
                               "make it unconditional")
    if p.kind == "choice":
        return list(p.choices)
    if not p.step:
        what = f"interval({p.low:g}, {p.high:g})"
        what = f"int({what})" if p.kind == "int" else what
        what = f"tag(log, {what})" if p.log else what
        raise SearchSpaceError(key, p.describe(), "is a continuous interval; grid needs "
                               "discrete values",
                               f"write range({p.low:g}, {p.high:g}, STEP) or choice(...) "
                               f"instead of {what}, or use search=tpe")
    # lo + k * step exactly, as every search draws them (sweeps.search.ranges): no float noise
    # (0.30000000000000004, 5.6e-17 for 0), every digit a config gives kept.
    return grid_points(p.low, p.high, p.step, integer=p.kind == "int")  # type: ignore[arg-type]


def grid_size(params: list[Param]) -> int:
    """How many trials one pass over the grid is.

    Example:
        >>> grid_size([Param("a", "choice", choices=(1, 2)), Param("b", "int", 1, 3, step=1)])
        6
    """
    return math.prod(len(grid_values(p)) for p in params)


def to_grid_space(params: list[Param]) -> dict[str, Any]:
    """Nested Ray Tune ``param_space`` with a ``grid_search`` per param."""
    from ray import tune

    return unflatten({p.path: tune.grid_search(grid_values(p)) for p in params})
