"""The compute budget (``sweep.budget``) at a sweep's start.

    python -m sweeps +experiment=digits sweep.budget.epochs=30
    reopen_budget_stops(prep, start)      # in fit's _start, before the ended trials are read
    ledger = start_ledger(prep, start)    # this start's count, handed to the BudgetScheduler
"""

from __future__ import annotations

from sweeps.config.budget import budget_limits
from sweeps.driver.prepare import Prepared
from sweeps.resume.grow import reopen_trials
from sweeps.search.budget import BudgetLedger
from sweeps.search.budget_reopen import budget_reopens
from sweeps.search.decisions import decision_log

__all__ = ["start_ledger", "reopen_budget_stops"]


def start_ledger(prep: Prepared, start: int) -> BudgetLedger | None:
    """This start's count of ``sweep.budget`` (None: no budget), continuing the earlier
    starts' from the sweep's logs; says so when it is already spent."""
    limits = budget_limits(prep.cfg.sweep.budget)
    if not limits and not (prep.resuming and any(  # an earlier start's budget ended something
            r.get("budget") or r.get("budget_finished")
            for r in decision_log(prep.sweep_dir).records())):
        return None  # (a budget unset on resume keeps a ledger: it reopens what it ended)
    # elastic trials counted at their max workers: a worker-hours budget is never overrun
    ledger = BudgetLedger.load(prep.sweep_dir, limits, prep.resources.planned_workers, start)
    ledger.tick(force=True)
    spent = ledger.over(None)
    if limits:
        print(f"  {ledger.describe()}" + (f"; spent (sweep.budget.{spent}): no trial will "
                                          "start, raise it to go on" if spent else ""),
              flush=True)
    return ledger


def reopen_budget_stops(prep: Prepared, start: int) -> list[str]:
    """The trials ``sweep.budget`` ended run again when this start's budget has more room
    than the one that ended them (``sweeps.search.budget.budget_raised``); returns them."""
    trials = budget_reopens(prep.sweep_dir, budget_limits(prep.cfg.sweep.budget),
                            prep.resources.planned_workers, start)
    return reopen_trials(prep.sweep_dir, trials, resuming=True, budget_room=True)
