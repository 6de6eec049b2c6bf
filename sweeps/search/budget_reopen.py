"""What a resume does with the trials and the search a compute budget ended.

    python -m sweeps +experiment=digits sweep.budget.epochs=40    # was 30: the sweep goes on
    budget_raised(decision_log(sweep_dir).records(), {"epochs": 40})    # True
    budget_reopens(sweep_dir, {"epochs": 40}, workers=2, start=3)       # ['ab12', ...]

Only more room than the budget that ended them (its records keep the ``limit``) brings them
back: the same command again is no room (``budget_raised``). ``sweeps.driver.budget_run``
reopens the trials before Tune restores; ``sweeps.search.budget_scheduler`` reopens the search.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sweeps.search.budget import BudgetLedger
from sweeps.search.decisions import decision_log
from sweeps.search.outcome import read_verdicts

__all__ = ["budget_raised", "budget_reopens"]


def budget_raised(records: list[dict[str, Any]], limits: dict[str, float]) -> bool:
    """Whether ``limits`` leave more room than the one the budget last ended trials under
    (its record's ``limit``): a resume with a larger budget, or with that budget unset. The
    same command again is not: a wall or worker-hours budget stops trials while a little of it
    is left (the next epoch would not fit), which is no room for a new start.

    Example:
        >>> stop = {"trial": "a", "action": "STOP", "budget": "wall", "limit": 600}
        >>> budget_raised([stop], {"wall": 600}), budget_raised([stop], {"wall": 900})
        (False, True)
        >>> budget_raised([stop], {}), budget_raised([], {"wall": 900})
        (True, False)
    """
    ended = [r for r in records if r.get("budget") or r.get("budget_finished")]
    if not ended:
        return False
    name = ended[-1].get("budget") or ended[-1]["budget_finished"]
    limit = ended[-1].get("limit")
    limit = float(limit) if isinstance(limit, int | float) else None
    return limit is None or limits.get(name, math.inf) > limit


def budget_reopens(sweep_dir: str | Path, limits: dict[str, float], workers: int,
                   start: int) -> list[str]:
    """The trials a budget ended (stopped, or ended before they started) that a resume
    continues: all of them once the budget was raised (``budget_raised``) and one more epoch
    fits, else none (each is stopped again at its next report if the room runs out: one epoch
    per trial running at once, as always)."""
    records = decision_log(sweep_dir).records()
    if not budget_raised(records, limits) or BudgetLedger.load(
            sweep_dir, limits, workers, start).over(None):
        return []
    return [t for t, v in read_verdicts(records).items() if v.budget]
