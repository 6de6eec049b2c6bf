"""A sweep with ``sweep.budget.epochs`` ends early, its trials stopped by the budget; a
second start of it sees the budget spent and ends at once, a third with a larger budget goes
on.

    flock /tmp/sweeps-ray.lock python -m pytest -m slow tests/integration/test_budget.py -q
"""

from __future__ import annotations

import pytest

from sweeps import run_sweep
from sweeps.search.budget import logged_epochs
from sweeps.search.decisions import decision_log, verdicts

pytestmark = pytest.mark.slow

BUDGET = 5


def test_epoch_budget_ends_sweep_early_and_a_resume_ends_at_once(small_config, capsys) -> None:
    """Random search over 5 one-worker trials of 3 epochs, one at a time, with 5 epochs of
    budget: the first trial trains its 3, the second is stopped by the budget at its next
    report once 5 are spent, the other three never start (and do not hang the sweep)."""
    cfg_overrides = ["search=random", "search.num_samples=5", "search.max_concurrent_trials=1",
                     "scheduler=none", "scheduler.max_t=3", "scaling.num_workers=1",
                     "trial.executor=inline", f"sweep.budget.epochs={BUDGET}"]
    cfg = small_config(*cfg_overrides)
    result = run_sweep(cfg)
    out = capsys.readouterr().out
    spent = logged_epochs(result.sweep_dir)
    assert BUDGET <= sum(spent.values()) <= BUDGET + 1  # overshoot: one epoch per running trial
    found = verdicts(result.sweep_dir)
    by_budget = {t: v for t, v in found.items() if v.budget == "epochs"}
    assert any((v.stopped_at or 0) > 0 for v in by_budget.values()), found
    table = result.summary.table
    assert 3 <= len(table) <= 5 and (table["epochs"] == 0).sum() >= 1, table
    never = set(table.loc[table["epochs"] == 0, "trial_id"])
    assert never <= set(by_budget), (never, by_budget)
    assert all(r.metrics is not None for r in result.results)  # every trial ended in Tune
    assert "stopped by the budget (sweep.budget.epochs) at epoch" in out, out
    lines = "\n".join(result.summary.budget)
    assert "(spent: sweep.budget.epochs)" in lines and "stopped by the budget" in lines, lines
    assert f"epochs: {sum(table['epochs']):g} of" in lines, lines
    assert result.best is not None

    from mlflow import MlflowClient

    client = MlflowClient(result.tracking_uri)
    experiment = client.get_experiment_by_name("digits")
    parents = [r for r in client.search_runs([experiment.experiment_id])
               if r.data.tags.get("sweeps.role") == "parent"]
    assert [p.info.status for p in parents] == ["FINISHED"]

    again = run_sweep(cfg)  # the same command: a resume, with the budget already spent
    out = capsys.readouterr().out
    assert "no trial will start" in out, out
    assert logged_epochs(again.sweep_dir) == spent  # not one more epoch
    assert len(again.summary.table) == len(table)

    raised = small_config(*[o for o in cfg_overrides if "budget" not in o],
                          f"sweep.budget.epochs={BUDGET + 3}")
    # a user raised the budget and resumes: the trials the budget ended go on, from their
    # checkpoints or (never started) from scratch, until the new budget is spent
    third = run_sweep(raised)
    out = capsys.readouterr().out
    assert BUDGET + 3 <= sum(logged_epochs(third.sweep_dir).values()) <= BUDGET + 4, out
    records = decision_log(third.sweep_dir).records()
    assert {r["trial"] for r in records if r.get("reopen")} == set(by_budget), records
    after = logged_epochs(third.sweep_dir)
    assert all(after.get(t, 0) >= n for t, n in spent.items()), (spent, after)  # none lost
    assert {t for t in by_budget if after.get(t, 0) > spent.get(t, 0)}, (spent, after)
    assert set(table["trial_id"]) <= set(third.summary.table["trial_id"])  # none dropped
