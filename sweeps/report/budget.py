"""The end-of-sweep lines about compute: spent against ``sweep.budget``, the trials the budget
stopped, and the epochs spent against every trial trained to ``max_t``.

    summary.budget = budget_lines(list(logged_epochs(sweep_dir).values()),  # driver/fit
                                  verdicts(sweep_dir), ledger, max_t)
    print("\\n".join(summary.budget))                                     # report.console

The efficiency line is printed for every sweep, with a budget or without one.
"""

from __future__ import annotations

from sweeps.search.budget import BudgetLedger, efficiency_line
from sweeps.search.outcome import Verdict

__all__ = ["budget_lines", "stopped_by_budget"]


def stopped_by_budget(verdicts: dict[str, Verdict]) -> tuple[list[str], list[str]]:
    """(trials the budget stopped after they trained, trials it ended before they started).

    Example:
        >>> stopped_by_budget({"a": Verdict(2, budget="epochs"), "b": Verdict(0, budget="epochs"),
        ...                    "c": Verdict(3)})
        (['a'], ['b'])
    """
    budget = {t: v for t, v in verdicts.items() if v.budget}
    trained = sorted(t for t, v in budget.items() if (v.stopped_at or 0) > 0)
    return trained, sorted(t for t in budget if t not in trained)


def budget_lines(epochs: list[float], verdicts: dict[str, Verdict],
                 ledger: BudgetLedger | None, max_t: int) -> list[str]:
    """The lines (see the module docstring); ``epochs``: what each trial trained
    (``sweeps.search.budget.logged_epochs``).

    Example:
        >>> budget_lines([9, 3, 1], {}, None, 9)
        ['epochs: 13 of 27 (3 trials x 9 to max_t), 0.48x']
    """
    lines = []
    if ledger is not None and ledger.limits:
        lines.append(ledger.describe() + (f" (spent: sweep.budget.{ledger.exhausted_by})"
                                          if ledger.exhausted_by else ""))
        trained, unstarted = stopped_by_budget(verdicts)
        if trained:
            lines.append(f"  stopped by the budget at their next report: {len(trained)} "
                         f"trial(s): {', '.join(trained)}")
        if unstarted:
            lines.append(f"  never started (budget spent): {len(unstarted)} trial(s)")
    lines.append(efficiency_line(epochs, max_t))
    return lines
