"""Growing a finished sweep in place, as a user does it: the same command again with a larger
``search.num_samples`` and ``scheduler.max_t``, on a loop written the way Ray Train's docs
write it (``tests/data/docs_loop.py``) in a project outside the checkout.

The earlier trials are kept and train on from their own checkpoints (no epoch twice), the new
trial joins the same MLflow parent run, ASHA's rung at the old ``max_t`` decides which trials go
on (as the plan says), and a smaller value is refused before Ray starts.
"""

from __future__ import annotations

import json
import re
import subprocess
from itertools import pairwise

import pandas as pd
import pytest

from tests.integration.test_user_loop import _env, _project, _runs, _sweeps

pytestmark = pytest.mark.slow

PLAN = re.compile(r"grow: 2 trials kept, 1 new; (\d+) trials? continues? from epoch 2 to 4"
                  r"(?:; (\d+) that reached epoch 2 stops? there)?")


def _run(project, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(_sweeps(project, *args), cwd=project, env=_env(), capture_output=True,
                          text=True, timeout=600)


def _table(sweep_dir) -> dict[str, tuple[int, str]]:
    table = pd.read_csv(sweep_dir / "summary.csv", dtype={"trial_id": str})
    return {t: (int(e), s) for t, e, s in zip(table["trial_id"], table["epochs"],
                                              table["status"], strict=True)}


# tpe under a trial limit (the restored Optuna search wrapped in Tune's ConcurrencyLimiter);
# random search under ASHA with rungs at 1, 2 (then also 4): the rung at the old max_t, never
# used before, now judges the trials that reached it
@pytest.mark.parametrize(("search", "scheduler"), [
    ("tpe", ["scheduler=none", "search.max_concurrent_trials=1", "search.n_startup_trials=2"]),
    ("random", ["scheduler=asha", "scheduler.grace_period=1", "scheduler.reduction_factor=2"]),
])
def test_a_finished_sweep_grows_in_samples_and_epochs(tmp_path, search, scheduler) -> None:
    project = _project(tmp_path, "mine", "train_func", {"lr": 0.1, "hidden": 16, "epochs": 100},
                       {"lr": "tag(log, interval(0.01, 0.3))", "hidden": "choice(8, 32)"})
    sweep_dir = project / "outputs" / "mine"
    same = ["+experiment=mine", f"search={search}", *scheduler, "scaling.num_workers=1"]
    first = _run(project, *same, "search.num_samples=2", "scheduler.max_t=2")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    before = _table(sweep_dir)
    at_budget = {t for t, (epochs, _) in before.items() if epochs == 2}

    grown = [*same, "search.num_samples=3", "scheduler.max_t=4"]
    plan = _run(project, *grown, "sweep.dry_run=true")
    assert plan.returncode == 0, plan.stderr[-3000:]
    said = PLAN.search(plan.stdout)
    assert said, plan.stdout
    go_on, stop = int(said.group(1)), int(said.group(2) or 0)
    assert go_on + stop == len(at_budget), (plan.stdout, before)
    smaller = _run(project, *same, "search.num_samples=1", "scheduler.max_t=4")
    assert smaller.returncode == 2
    assert "search.num_samples: 1 is smaller than in the sweep being resumed" in smaller.stderr

    second = _run(project, *grown)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert said.group(0) in second.stdout
    after = _table(sweep_dir)
    assert set(before) < set(after) and len(after) == 3, after
    continued = {t for t in at_budget if after[t] == (4, "completed")}
    stopped_now = {t for t in at_budget if after[t] == (2, "stopped")}
    assert (len(continued), len(stopped_now)) == (go_on, stop), (before, after)
    for trial, row in before.items():  # stopped earlier: unchanged
        if trial not in at_budget:
            assert after[trial] == row, (before, after)

    client, runs = _runs(project, "mine")
    parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    trials = {r.data.tags["sweeps.trial_id"]: r for r in runs
              if r.data.tags.get("sweeps.role") == "trial"}
    assert len(parents) == 1 and set(trials) == set(after)
    assert {r.data.tags["mlflow.parentRunId"] for r in trials.values()} == {
        parents[0].info.run_id}
    assert {r.info.status for r in runs} == {"FINISHED"}
    if "search.max_concurrent_trials=1" in scheduler:  # the reopened trials waited their turn
        spans = sorted((min(times), max(times)) for times in (
            [m.timestamp for m in client.get_metric_history(run.info.run_id, "val_accuracy")
             if m.step >= 2 or trial not in before] for trial, run in trials.items()) if times)
        assert all(a[1] <= b[0] for a, b in pairwise(spans)), spans
    for trial, run in trials.items():
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert steps == list(range(after[trial][0])), steps  # no epoch trained twice
        resumed = {m.value for m in client.get_metric_history(run.info.run_id, "resumed_from")}
        assert resumed == ({0, 2} if trial in continued else {0}), (trial, resumed)
        assert run.data.tags["sweeps.status"] == after[trial][1]  # the stopped ones re-tagged
    # Each trial's value is its best over every epoch, the earlier start's too (Tune's own
    # history of a continued trial starts at this start), and one run is tagged best: the
    # summary's best trial's (issue 46).
    table = pd.read_csv(sweep_dir / "summary.csv", dtype={"trial_id": str}).set_index("trial_id")
    for trial, run in trials.items():
        values = [m.value for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert table.loc[trial, "val_accuracy"] == pytest.approx(max(values)), (trial, values)
    best = json.loads((sweep_dir / "best.json").read_text())
    assert [t for t, r in trials.items() if r.data.tags.get("sweeps.best") == "true"] == [
        best["trial_id"]]
