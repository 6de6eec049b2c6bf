"""The search space as Ray Tune's random search sees it: a nested ``param_space`` of domains.

    tune.Tuner(..., param_space=to_tune_space(params),
               tune_config=tune.TuneConfig(search_alg=BasicVariantGenerator(random_state=seed)))

Built by ``sweeps.search.searchers.tune_param_space`` for ``search=random`` (and PBT's initial
population). Bounds are inclusive; what each expression becomes: the table in
``sweeps.search.space``.

A stepped range (an int step above 1, or any float range) is a Tune ``Integer`` / ``Float``
domain sampled by ``OnGrid``: an index ``k`` drawn uniformly from Tune's seeded generator, the
value ``lo + k * step`` from ``sweeps.search.ranges`` (exact, ``hi`` included). Deliberate
divergence from Tune's ``qrandint`` / ``quniform``: they round to multiples of the step (see
docs/experiments.md#search-space-grammar) and draw the end points half as often.
"""

from __future__ import annotations

from typing import Any

from ray import tune
from ray.tune.search.sample import Domain, Float, Integer, Sampler

from sweeps.search.nested import unflatten
from sweeps.search.ranges import grid_point, point_count
from sweeps.search.space import Param

__all__ = ["to_tune_space", "on_grid", "OnGrid"]


class OnGrid(Sampler):
    """Tune sampler of the points ``low + k * step``, ``k`` uniform in ``0 .. count - 1``.

    Example:
        >>> on_grid(Param("x", "float", low=0.1, high=0.9, step=0.2)).sample(size=3,
        ...                                                                random_state=0)
        [0.9, 0.7, 0.5]
    """

    def __init__(self, low: float | int, high: float | int, step: float | int,
                 integer: bool) -> None:
        self.low, self.high, self.step, self.integer = low, high, step, integer
        self.count = point_count(low, high, step)

    def sample(self, domain: Domain, config: Any = None, size: int = 1,
               random_state: Any = None) -> Any:
        """``size`` points (one value when ``size`` is 1, as Tune's samplers return)."""
        ks = random_state.integers(0, self.count, size=size)
        items = [grid_point(self.low, self.step, int(k), self.integer) for k in ks]
        return items if size > 1 else items[0]

    def __str__(self) -> str:
        return f"OnGrid({self.low}, {self.high}, step={self.step})"


def on_grid(p: Param) -> Domain:
    """The Tune domain of a stepped ``p``: ``Integer(lo, hi + 1)`` (Tune's exclusive upper
    bound) or ``Float(lo, hi)``, sampled by ``OnGrid``.

    Example:
        >>> domain = on_grid(Param("d", "int", low=1, high=9, step=2))
        >>> (domain.lower, domain.upper), sorted(set(domain.sample(size=200, random_state=0)))
        ((1, 10), [1, 3, 5, 7, 9])
    """
    integer = p.kind == "int"
    domain = Integer(int(p.low), int(p.high) + 1) if integer else Float(p.low, p.high)
    domain.set_sampler(OnGrid(p.low, p.high, p.step, integer))  # type: ignore[arg-type]
    return domain


def to_tune_space(params: list[Param]) -> dict[str, Any]:
    """Nested Ray Tune ``param_space`` for ``params`` (inclusive bounds everywhere; the module
    docstring says which domain each kind becomes).

    Example:
        >>> to_tune_space([Param("m.h", "int", low=1, high=3, step=1)])["m"]["h"].upper
        4
    """
    flat: dict[str, Any] = {}
    for p in params:
        if p.kind == "choice":
            flat[p.path] = tune.choice(list(p.choices))
        elif p.step and not (p.kind == "int" and p.step == 1):
            flat[p.path] = on_grid(p)
        elif p.kind == "int":
            make = tune.lograndint if p.log else tune.randint
            flat[p.path] = make(int(p.low), int(p.high) + 1)  # type: ignore[arg-type]
        else:
            flat[p.path] = (tune.loguniform if p.log else tune.uniform)(p.low, p.high)
    return unflatten(flat)
