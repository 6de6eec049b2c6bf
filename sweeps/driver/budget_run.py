"""The compute budget (``sweep.budget``) at a sweep's start.

    python -m sweeps +experiment=digits sweep.budget.epochs=30
    reopen_budget_stops(prep, start)      # in fit's _start, before the ended trials are read
    ledger = start_ledger(prep, start)    # this start's count, handed to the BudgetScheduler
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sweeps.driver.prepare import Prepared

if TYPE_CHECKING:
    from sweeps.search.budget import BudgetLedger

__all__ = ["start_ledger", "reopen_budget_stops"]


def start_ledger(prep: Prepared, start: int) -> BudgetLedger | None:
    """This start's count of ``sweep.budget`` (None: no budget), continuing the earlier
    starts' from the sweep's logs; says so when it is already spent."""
    from sweeps.config.budget import budget_limits
    from sweeps.search.budget import BudgetLedger

    limits = budget_limits(prep.cfg.sweep.budget)
    if not limits:
        return None
    # elastic trials counted at their max workers: a worker-hours budget is never overrun
    ledger = BudgetLedger.load(prep.sweep_dir, limits, prep.resources.planned_workers, start)
    ledger.tick(force=True)
    spent = ledger.over(None)
    print(f"  {ledger.describe()}" + (f"; spent (sweep.budget.{spent}): no trial will start, "
                                      "raise it to go on" if spent else ""), flush=True)
    return ledger


def reopen_budget_stops(prep: Prepared, start: int) -> None:
    """The trials ``sweep.budget`` ended run again when this start's budget has room."""
    from sweeps.config.budget import budget_limits
    from sweeps.resume.grow import reopen_trials
    from sweeps.search.budget import budget_reopens

    trials = budget_reopens(prep.sweep_dir, budget_limits(prep.cfg.sweep.budget),
                            prep.resources.planned_workers, start)
    reopen_trials(prep.sweep_dir, trials, resuming=True, budget_room=True)
