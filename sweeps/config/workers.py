"""``scaling.num_workers``: a fixed count, or ``[min, max]`` for elastic trials.

    python -m sweeps +experiment=digits scaling.num_workers=2          # every trial, 2 workers
    python -m sweeps +experiment=digits 'scaling.num_workers=[1,4]' ray.address=auto  # elastic

An elastic trial is a Ray Train run with ``ScalingConfig(num_workers=(min, max))``, which
Train resizes as nodes join or leave (docs/clusters.md#elastic-trials). OmegaConf's structured
configs have no Union type, so the schema declares the key ``Any`` and this module is its
type: ``check`` refuses everything but a positive int or a list of two positive ints with
min <= max, before Ray starts. Everything else reads it through ``worker_range``.
"""

from __future__ import annotations

from typing import Any

from sweeps.errors import ConfigError

__all__ = ["KEY", "check", "is_elastic", "worker_range"]

KEY = "scaling.num_workers"


def _count(value: Any) -> bool:
    """A positive int (a bool is not a count, though Python says it is an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def check(value: Any) -> None:
    """Refuse a ``scaling.num_workers`` that is neither a count nor ``[min, max]``.

    Example:
        >>> check(2), check([1, 4])
        (None, None)
        >>> check([3, 2])
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: scaling.num_workers: [3, 2] has min 3 > max 2; ...
    """
    if _count(value):
        return
    if isinstance(value, int) and not isinstance(value, bool):
        raise ConfigError(KEY, value, "must be >= 1 (Train workers per trial), or [min, max] "
                          "for elastic trials", "set scaling.num_workers=2")
    if not isinstance(value, list | tuple):
        raise ConfigError(KEY, value, "must be a whole number >= 1 (Train workers per trial) "
                          "or [min, max] (elastic trials)",
                          "set scaling.num_workers=2, or scaling.num_workers=[1,4] for trials "
                          "that grow and shrink with the cluster")
    shown = list(value)
    if len(shown) != 2:
        raise ConfigError(KEY, shown, f"has {len(shown)} element(s); an elastic range is "
                          "[min, max]", "write scaling.num_workers=[1,4], or one number for a "
                          "fixed count")
    if not all(_count(v) for v in shown):
        raise ConfigError(KEY, shown, "must hold two whole numbers >= 1 ([min, max] workers)",
                          "write scaling.num_workers=[1,4], each at least 1")
    low, high = shown
    if low > high:
        raise ConfigError(KEY, shown, f"has min {low} > max {high}",
                          f"write scaling.num_workers=[{high},{low}]")


def worker_range(value: Any) -> tuple[int, int]:
    """(min, max) workers of a checked ``scaling.num_workers``; equal for a fixed count.

    Example:
        >>> worker_range(2), worker_range([1, 4])
        ((2, 2), (1, 4))
    """
    if isinstance(value, list | tuple):
        return int(value[0]), int(value[1])
    return int(value), int(value)


def is_elastic(value: Any) -> bool:
    """Whether ``scaling.num_workers`` asks for elastic trials (a ``[min, max]`` list, even
    with min == max: Train then restarts a trial that lost workers once they fit again, as
    it would a fixed one, but through its elastic policy).

    Example:
        >>> is_elastic(2), is_elastic([1, 4])
        (False, True)
    """
    return isinstance(value, list | tuple)
