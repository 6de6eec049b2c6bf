"""The dry run's budget lines: the budget against the plan's estimate, and the warning for a
budget smaller than one trial's first rung (``sweeps.driver.budget_plan``)."""

from __future__ import annotations

import pytest

from sweeps import compose, prepare
from sweeps.driver.budget_plan import budget_plan, first_rung
from sweeps.driver.dry_run import epoch_budget, format_plan

BASE = ["ray.num_cpus=2", "ray.num_gpus=0"]

# (overrides, a line the plan holds, a fragment no line holds)
ROWS = [
    ([], None, "budget"),
    (["sweep.budget.epochs=100"], "epochs 100 >= worst case 72: the budget will not stop",
     "warning"),
    (["sweep.budget.epochs=12"], "epochs 12 of worst case 72, ASHA expected ~18.7: the budget "
     "will likely end it early", "warning"),
    (["sweep.budget.epochs=30"], "epochs 30 of worst case 72, ASHA expected ~18.7", "likely"),
    (["sweep.budget.epochs=2", "scheduler.grace_period=3"],
     "warning: sweep.budget.epochs=2 is smaller than one trial's first rung "
     "(scheduler.grace_period: 3 epochs)", None),
    (["sweep.budget.epochs=3", "scheduler.grace_period=3"], "epochs 3 of worst case 72",
     "first rung"),
    (["scheduler=none", "sweep.budget.epochs=20"], "epochs 20 of worst case 72: the budget "
     "will likely end it early", "ASHA"),
    (["sweep.budget.worker_hours=0.5", "sweep.budget.wall=90m"],
     "budget: worker-hours 0.5, wall 90m (new trials stop", "worst case 72:"),
]


@pytest.mark.parametrize(("overrides", "line", "absent"), ROWS)
def test_plan_compares_the_budget_with_its_estimate(overrides, line, absent) -> None:
    text = format_plan(prepare(compose("digits", [*BASE, *overrides])))
    if line is not None:
        assert line in text, text
    if absent is not None:
        assert absent not in "\n".join(budget_plan(
            compose("digits", [*BASE, *overrides]), epoch_budget(
                compose("digits", [*BASE, *overrides])))), text


@pytest.mark.parametrize(("overrides", "rung"), [
    ([], 1), (["scheduler.grace_period=3"], 3), (["scheduler=none"], 1),
    (["scheduler=pbt", "search=random"], 1),
])
def test_first_rung(overrides, rung) -> None:
    assert first_rung(compose("digits", overrides)) == rung


def test_a_resumed_sweeps_plan_says_what_it_spent_already(tmp_path) -> None:
    from sweeps.search.decisions import decision_log

    decision_log(tmp_path).append({"trial": "a", "epoch": 4, "value": 0.5, "action": "STOP"})
    cfg = compose("digits", [*BASE, "sweep.budget.epochs=10"])
    lines = budget_plan(cfg, epoch_budget(cfg), resumed=tmp_path)
    assert lines[1] == ("    spent so far (epochs 4/10); the estimates below are the whole "
                        "sweep's")
    assert not any("spent so far" in line for line in budget_plan(cfg, epoch_budget(cfg)))
    assert len(lines) == 3  # nothing the budget ended: nothing goes on
    decision_log(tmp_path).append({"trial": "b", "epoch": 0, "action": "STOP",
                                   "budget": "epochs", "limit": 5})
    raised = budget_plan(cfg, epoch_budget(cfg), resumed=tmp_path)
    assert raised[2] == "    the budget was raised: 1 trial(s) it ended go on (b)"
    same = compose("digits", [*BASE, "sweep.budget.epochs=5"])
    assert not any("raised" in line for line in budget_plan(same, epoch_budget(same),
                                                            resumed=tmp_path))
