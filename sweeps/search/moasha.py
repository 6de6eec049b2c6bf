"""One bracket of multi-objective ASHA (MO-ASHA), in plain Python: promotion by non-dominated sort.

    halving = MOHalving(grace_period=1, max_t=9, reduction_factor=3)
    halving.judge("t0", 1, (0.80, -5000.0))    # False: the first result at a rung continues
    halving.judge("t1", 1, (0.70, -9000.0))    # True: dominated by t0 (worse on both), stop it

Syne Tune's MOASHA rule, as in syne-tune/syne-tune at d9970f2b (June 2026), on the rungs of
``sweeps.search.asha``: the first result at a rung continues; otherwise the rung's recorded
points and the new one are ordered front by front, each front by an epsilon-net, and the new
trial stops when ``rank * reduction_factor > n``. Values are signed so that higher is better on
every objective (the caller multiplies a ``min`` objective by -1). Syne Tune's code line by
line, and where and why this departs from it (scaling, ties, non-finite values):
docs/development.md#mo-asha-against-syne-tunes-code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sweeps.search.asha import AsyncHalving

__all__ = ["MOHalving", "dominates", "nondominated_order", "rank_of", "keeps"]

Point = tuple[float, ...]


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """Whether ``a`` is no worse than ``b`` on every objective and better on one (higher is better).

    Example:
        >>> dominates((0.9, -10), (0.8, -10)), dominates((0.9, -20), (0.8, -10))
        (True, False)
    """
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(
        x > y for x, y in zip(a, b, strict=True))


def _epsilon_net(points: Sequence[Point], front: list[int]) -> list[int]:
    """``front`` (indices into ``points``, ascending) in epsilon-net order (module docstring)."""
    if len(front) <= 2:  # the seed, then the only other point
        seed = max(front, key=lambda i: (points[i][0], -i))
        return [seed] + [i for i in front if i != seed]
    dims = range(len(points[front[0]]))
    lo = [min(points[i][k] for i in front) for k in dims]
    span = [(max(points[i][k] for i in front) - lo[k]) or 1.0 for k in dims]
    scaled = {i: tuple((points[i][k] - lo[k]) / span[k] for k in dims) for i in front}
    order = [max(front, key=lambda i: (points[i][0], -i))]  # best primary, earliest on ties
    nearest = {i: math.dist(scaled[i], scaled[order[0]]) for i in front if i != order[0]}
    while nearest:
        far = max(nearest, key=lambda i: (nearest[i], -i))  # farthest, earliest on ties
        order.append(far)
        del nearest[far]
        for i in nearest:
            nearest[i] = min(nearest[i], math.dist(scaled[i], scaled[far]))
    return order


def nondominated_order(points: Sequence[Point]) -> list[int]:
    """The indices of ``points``, best first: front by front, each front in epsilon-net order.

    Example:
        >>> nondominated_order([(0.5, -1.0), (0.9, -9.0), (0.4, -2.0), (0.7, -5.0)])
        [1, 0, 3, 2]
    """
    remaining, order = list(range(len(points))), []
    while remaining:
        front = [i for i in remaining
                 if not any(dominates(points[j], points[i]) for j in remaining if j != i)]
        order += _epsilon_net(points, front)
        remaining = [i for i in remaining if i not in front]
    return order


def rank_of(points: Sequence[Point], index: int) -> int:
    """How many points rank before ``points[index]``; a point equal to one ranked before it
    takes that one's rank.

    Example:
        >>> rank_of([(0.9, -1.0), (0.5, -5.0), (0.5, -5.0)], 2)
        1
    """
    order = nondominated_order(points)
    return min(order.index(i) for i, p in enumerate(points) if p == points[index])


def keeps(recorded: Sequence[Point], new: Point, reduction_factor: float) -> bool:
    """Whether ``new`` continues at a rung holding ``recorded``: the first result does, then
    a rank ``r`` among the ``n`` points (``new`` included) continues when ``r * rf <= n``.

    Example:
        >>> keeps([(0.9, -1.0), (0.5, -5.0)], (0.4, -6.0), 3)   # third of three: stop
        False
    """
    if not recorded:
        return True
    points = [*recorded, new]
    return rank_of(points, len(points) - 1) * reduction_factor <= len(points)


class MOHalving(AsyncHalving):
    """The rungs of one MO-ASHA bracket: ``AsyncHalving``'s milestones, budget and
    ``stop_last_trials``, with a point (a tuple of signed objective values, primary first)
    recorded per trial instead of one number, and ``keeps`` deciding at each rung.

    Args:
        grace_period, max_t, reduction_factor, stop_last_trials: as ``AsyncHalving``.
    """

    _levels: list[tuple[float, dict[str, Point]]]  # type: ignore[assignment]

    def on_result(self, trial_id: str, clock: float, value: Point) -> bool:  # type: ignore[override]
        """``AsyncHalving.on_result`` with a point; True when ``keeps`` says stop."""
        return super().on_result(trial_id, clock, tuple(float(v) for v in value))

    def _stops(self, recorded: dict[str, Any], value: Any) -> bool:
        return not keeps(list(recorded.values()), value, self.rf)

    def describe(self) -> str:
        """Each rung's milestone and how many trials it holds (a front has no one cutoff)."""
        return "MO-ASHA bracket: " + " | ".join(f"Iter {m:.3f}: {len(r)} recorded"
                                                for m, r in self._levels)
