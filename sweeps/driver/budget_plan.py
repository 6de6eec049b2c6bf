"""The dry run's lines about ``sweep.budget``: the budget against the plan's estimate.

    python -m sweeps +experiment=digits sweep.dry_run=true sweep.budget.epochs=20

What the lines say: docs/running.md#a-compute-budget ("Plan it"). The expectation is
``sweeps.driver.dry_run.expected_epochs``; a budget below the first rung is a warning, not an error.
"""

from __future__ import annotations

from typing import Any

from sweeps.config.budget import budget_limits
from sweeps.config.schema import SweepConfig
from sweeps.search.budget import BudgetLedger
from sweeps.search.budget_reopen import budget_reopens

__all__ = ["budget_plan", "first_rung"]


def first_rung(cfg: SweepConfig) -> int:
    """Epochs one trial trains before anything judges it: ASHA's grace period, else 1.

    Example:
        >>> first_rung(compose("digits", ["scheduler.grace_period=2"]))  # doctest: +SKIP
        2
    """
    return cfg.scheduler.grace_period if cfg.scheduler.name == "asha" else 1


def budget_plan(cfg: SweepConfig, estimate: Any, resumed: Any = None) -> list[str]:
    """The plan's budget lines (none without a budget); ``estimate``: its ``EpochBudget``
    (the whole sweep's); ``resumed``: the sweep directory of a sweep being resumed, whose
    logs say what it has spent already."""
    limits = budget_limits(cfg.sweep.budget)
    if not limits:
        return []
    spent = []
    if resumed is not None:
        ledger = BudgetLedger.load(resumed, limits, 1, 0)
        spent = [f"    spent so far ({ledger.describe()[len('budget: '):]}); the estimates "
                 "below are the whole sweep's"]
        again = budget_reopens(resumed, limits, 1, 0)
        if again:
            spent.append(f"    the budget was raised: {len(again)} trial(s) it ended go on "
                         f"({', '.join(again)})")
    b = cfg.sweep.budget
    lines = ["  budget: " + ", ".join(
        f"{name.replace('_', '-')} {value}" for name, value in
        (("epochs", b.epochs), ("worker_hours", b.worker_hours), ("wall", b.wall))
        if value is not None) + " (new trials stop once the next epoch would exceed one; "
        "running ones at their next report)", *spent]
    if "epochs" in limits:
        epochs = limits["epochs"]
        expected = estimate.expected if cfg.scheduler.name == "asha" else estimate.worst
        if epochs >= estimate.worst:
            lines.append(f"    epochs {epochs:g} >= worst case {estimate.worst}: the budget "
                         "will not stop this sweep")
        else:
            lines.append(f"    epochs {epochs:g} of worst case {estimate.worst}"
                         + (f", ASHA expected ~{expected:.1f}" if cfg.scheduler.name == "asha"
                            else "")
                         + (": the budget will likely end it early" if epochs < expected else ""))
        rung = first_rung(cfg)
        if epochs < rung:
            what = "scheduler.grace_period" if cfg.scheduler.name == "asha" else "one epoch"
            lines.append(f"  warning: sweep.budget.epochs={epochs:g} is smaller than one "
                         f"trial's first rung ({what}: {rung} epochs); no trial would reach a "
                         f"comparison; set sweep.budget.epochs={rung * cfg.search.num_samples} "
                         "or more")
    return lines
