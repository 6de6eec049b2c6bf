"""The compute budget's keys, read and checked before Ray starts.

    python -m sweeps +experiment=digits sweep.budget.epochs=30 sweep.budget.wall=10m
    check_budget(cfg.sweep.budget)          # in sweeps.config.validate: ConfigError on bad input
    parse_duration("1h30m")                 # 5400.0

``sweep.budget.wall`` is a duration: a number of seconds (``600``, ``"90.5"``) or numbers with
units ``d``, ``h``, ``m``, ``s`` written largest first (``"2h"``, ``"1h30m"``, ``"45s"``). What
a budget means while the sweep runs is ``sweeps.search.budget``'s.
"""

from __future__ import annotations

import contextlib
import math
import re

from sweeps.config.schema import BudgetSection
from sweeps.errors import ConfigError

__all__ = ["parse_duration", "check_budget", "budget_limits"]

_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?"
                       r"(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(value: str | float | int, key: str = "sweep.budget.wall") -> float:
    """Seconds in ``value``: a number of seconds or ``<n>d<n>h<n>m<n>s`` (any part may be
    left out, in that order); raises ``ConfigError`` naming ``key`` when it is neither.

    Example:
        >>> parse_duration("2h"), parse_duration("1h30m"), parse_duration(45), parse_duration("90")
        (7200.0, 5400.0, 45.0, 90.0)
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip().lower().replace(" ", "")
    with contextlib.suppress(ValueError):
        return float(text)
    match = _DURATION.match(text)
    if not text or match is None or not any(match.groups()):
        raise ConfigError(key, value, "is not a duration",
                          f"set {key}=600 (seconds) or a duration such as {key}=2h, 90m, "
                          "45s or 1h30m")
    return sum(float(part) * unit for part, unit in zip(match.groups(), _UNITS.values(),
                                                        strict=True) if part)


def budget_limits(budget: BudgetSection) -> dict[str, float]:
    """The budgets that are set, as ``{"epochs"|"worker_hours"|"wall": limit}`` (wall in
    seconds); {} when none is.

    Example:
        >>> budget_limits(BudgetSection(epochs=30, wall="2m"))
        {'epochs': 30.0, 'wall': 120.0}
    """
    read = {"epochs": float, "worker_hours": float, "wall": parse_duration}
    return {name: read[name](getattr(budget, name)) for name in read
            if getattr(budget, name) is not None}


_FIXES = {"epochs": "sweep.budget.epochs=30 (trial-epochs over all trials), or null",
          "worker_hours": "sweep.budget.worker_hours=0.5, or null",
          "wall": "sweep.budget.wall=2h (or 90m, 45s, 600), or null"}


def check_budget(budget: BudgetSection) -> None:
    """Every budget that is set must be a positive, finite amount (a duration for ``wall``).

    Example:
        >>> check_budget(BudgetSection(epochs=0))
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: sweep.budget.epochs: 0 must be > 0; ...
    """
    for name, limit in budget_limits(budget).items():
        if not (math.isfinite(limit) and limit > 0):
            raise ConfigError(f"sweep.budget.{name}", getattr(budget, name), "must be > 0",
                              f"set {_FIXES[name]} for no limit")
