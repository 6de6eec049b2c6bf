"""The end-of-sweep budget lines (``sweeps.report.budget``)."""

from __future__ import annotations

import pytest

from sweeps.report.budget import budget_lines, stopped_by_budget
from sweeps.search.budget import BudgetLedger
from sweeps.search.outcome import Verdict


@pytest.mark.parametrize(("verdicts", "trained", "unstarted"), [
    ({}, [], []),
    ({"a": Verdict(3)}, [], []),
    ({"a": Verdict(2, budget="epochs"), "b": Verdict(0, budget="epochs")}, ["a"], ["b"]),
    ({"b": Verdict(None, budget="wall"), "a": Verdict(1.5, budget="wall")}, ["a"], ["b"]),
])
def test_trials_the_budget_stopped(verdicts, trained, unstarted) -> None:
    assert stopped_by_budget(verdicts) == (trained, unstarted)


def test_lines_with_and_without_a_budget() -> None:
    table = [9, 3, 0]
    assert budget_lines(table, {}, None, 9) == [
        "epochs: 12 of 18 (2 trials x 9 to max_t), 0.67x"]
    ledger = BudgetLedger(None, {"epochs": 12}, workers=1, start=1)
    ledger.observe("a", 9, 1)
    ledger.observe("b", 3, 1)
    assert ledger.over("b") == "epochs"
    verdicts = {"b": Verdict(3, budget="epochs"), "c": Verdict(0, budget="epochs")}
    assert budget_lines(table, verdicts, ledger, 9) == [
        "budget: epochs 12/12 (spent: sweep.budget.epochs)",
        "  stopped by the budget at their next report: 1 trial(s): b",
        "  never started (budget spent): 1 trial(s)",
        "epochs: 12 of 18 (2 trials x 9 to max_t), 0.67x"]
