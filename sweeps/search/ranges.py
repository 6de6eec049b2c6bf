"""Numeric params: the rules ``range(...)`` and ``interval(...)`` must satisfy, and the exact
points of a stepped range.

    is_int = check_range(key, expr, lo, hi, step)       # sweeps.search.space, while parsing
    grid_point(0.1, 0.2, 1)                              # 0.3, not 0.30000000000000004

The points of a stepped range (docs/experiments.md#search-space-grammar) are computed here for
every consumer, so all agree on the same floats. The arithmetic is exact, on the decimal numbers
the config wrote (``0.1`` is 1/10, as Optuna's own ``Decimal(str(x))`` reads it), and each point
is the float nearest to its exact value. Int ranges are Python ints throughout.
"""

from __future__ import annotations

import math
from fractions import Fraction

from sweeps.errors import SearchSpaceError

__all__ = ["check_range", "check_interval", "point_count", "grid_point", "grid_points",
           "nearest_point", "min_float_step"]

Number = int | float


MAX_POINTS = 2**62  # a range's points are drawn by index, as an int64 (numpy, Tune)


def _exact(x: Number) -> Fraction:
    """``x`` as the exact decimal its shortest repr spells (``0.1`` -> 1/10)."""
    return Fraction(x) if isinstance(x, int) else Fraction(repr(float(x)))


def point_count(low: Number, high: Number, step: Number) -> int:
    """How many points ``lo + k * step`` lie in ``[low, high]``.

    Example:
        >>> point_count(1, 9, 2), point_count(0.1, 0.9, 0.2), point_count(3, 3, 1)
        (5, 5, 1)
    """
    return int((_exact(high) - _exact(low)) // _exact(step)) + 1


def grid_point(low: Number, step: Number, k: int, integer: bool = False) -> Number:
    """The ``k``-th point ``low + k * step``: an int for an int range, else the float nearest
    to the exact decimal value.

    Example:
        >>> grid_point(0.1, 0.2, 1), grid_point(-1.0, 0.1, 3), grid_point(1, 2, 4, integer=True)
        (0.3, -0.7, 9)
    """
    return int(low) + k * int(step) if integer else float(_exact(low) + k * _exact(step))


def grid_points(low: Number, high: Number, step: Number, integer: bool = False) -> list[Number]:
    """Every point of the range, in order.

    Example:
        >>> grid_points(0.1, 0.5, 0.1)
        [0.1, 0.2, 0.3, 0.4, 0.5]
    """
    return [grid_point(low, step, k, integer) for k in range(point_count(low, high, step))]


def nearest_point(low: Number, high: Number, step: Number, value: float,
                  integer: bool = False) -> Number:
    """The point of the range nearest to ``value`` (the ends for a value outside).

    Example:
        >>> nearest_point(0.1, 0.9, 0.2, 0.31), nearest_point(1, 9, 2, 100, integer=True)
        (0.3, 9)
    """
    last = point_count(low, high, step) - 1
    k = round((float(value) - float(low)) / float(step)) if math.isfinite(value) else (
        0 if value < low else last)
    return grid_point(low, step, min(max(k, 0), last), integer)


def min_float_step(low: float, high: float) -> float:
    """The smallest step a float range from ``low`` to ``high`` may take: two float spacings
    at its largest magnitude, so that its points are distinct floats (one spacing is not
    enough: two exact values one spacing apart can round to the same float).

    Example:
        >>> min_float_step(1.0, 1.5) == 2 * 2.0 ** -52
        True
    """
    return 2 * math.ulp(max(abs(float(low)), abs(float(high))))


def check_range(key: str, expr: object, lo: Number, hi: Number, step: Number | None) -> bool:
    """Raise ``SearchSpaceError`` unless ``range(lo, hi, step)`` is a non-empty range whose
    points are distinct and end at ``hi``; return whether it is an int range.

    Example:
        >>> check_range("k", "range(1, 9, 2)", 1, 9, 2), check_range("k", "-", 0.1, 0.9, 0.2)
        (True, False)
    """
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in (lo, hi, step or 0)):
        raise SearchSpaceError(key, expr, "has a bound or step that is not a finite number",
                               "give finite numbers, e.g. range(0, 100, 10)")
    if step is None or step <= 0:
        fix = f"range({hi}, {lo}, {-step})" if step and step < 0 and lo > hi else \
            f"range({min(lo, hi)}, {max(lo, hi)}, {abs(step) if step else 1})"
        raise SearchSpaceError(key, expr, "has a step <= 0", f"write {fix}")
    if lo > hi:
        raise SearchSpaceError(key, expr, "has low > high", f"write range({hi}, {lo}, {step})")
    is_int = all(isinstance(v, int) for v in (lo, hi, step))
    smallest = min_float_step(lo, hi)
    if not is_int and step < smallest:
        raise SearchSpaceError(
            key, expr, f"has a step of {step!r}, below the float resolution of its bounds "
            f"(floats near {max(abs(lo), abs(hi))!r} are {smallest / 2:.3g} apart, so "
            f"{lo!r} + {step!r} is {lo + step!r})",
            f"use a step of at least {smallest:.3g}, or " + (
                f"interval({lo}, {hi}) for a continuous range" if lo != hi else
                f"the constant {lo}"))
    if point_count(lo, hi, step) > MAX_POINTS:  # Tune and numpy draw the index as an int64
        raise SearchSpaceError(key, expr, f"has {point_count(lo, hi, step)} points, more than "
                               f"the {MAX_POINTS} a search can index", "use a larger step, or "
                               f"int(interval({lo}, {hi})) / interval({lo}, {hi})")
    n = point_count(lo, hi, step) - 1
    if _exact(lo) + n * _exact(step) != _exact(hi):
        top = grid_point(lo, step, n, is_int)
        raise SearchSpaceError(
            key, expr, f"cannot reach its upper bound {hi} from {lo} in steps of {step} "
            "(ranges include the upper bound)", f"write range({lo}, {top!r}, {step})")
    return is_int


def check_interval(key: str, expr: object, lo: Number, hi: Number, log: bool) -> bool:
    """Raise ``SearchSpaceError`` unless ``interval(lo, hi)`` (log-scaled if ``log``) is a
    non-empty finite interval; return whether it is an int interval (``int(interval(...))``).

    Example:
        >>> check_interval("k", "int(interval(8, 256))", 8, 256, log=True)
        True
    """
    is_int = isinstance(lo, int) and isinstance(hi, int)
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in (lo, hi)):
        raise SearchSpaceError(key, expr, "has a bound that is not a finite number",
                               "give finite bounds, e.g. interval(0.0, 1.0)")
    if lo > hi:
        inner = f"interval({hi}, {lo})"
        raise SearchSpaceError(key, expr, "has low > high",
                               f"write {f'int({inner})' if is_int else inner}")
    if lo == hi:
        raise SearchSpaceError(key, expr, "is empty (low == high)",
                               f"write the constant {lo} instead")
    if log and lo <= 0:
        raise SearchSpaceError(key, expr, "is a log range with low <= 0",
                               "make low > 0, e.g. tag(log, interval(1e-5, 1e-1))")
    return is_int
