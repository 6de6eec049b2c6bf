"""Growing a finished sweep in place, as a user does it: the same command again with a larger
``search.num_samples`` and ``scheduler.max_t``, on a loop written the way Ray Train's docs
write it (``tests/data/docs_loop.py``) in a project outside the checkout.

The earlier trials are kept and train on from their own checkpoints (no epoch twice), the new
trial joins the same MLflow parent run, and a smaller value is refused before Ray starts.
"""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest

from tests.integration.test_user_loop import _env, _project, _runs, _sweeps

pytestmark = pytest.mark.slow


def _run(project, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(_sweeps(project, *args), cwd=project, env=_env(), capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("search", ["tpe", "random"])
def test_a_finished_sweep_grows_in_samples_and_epochs(tmp_path, search) -> None:
    project = _project(tmp_path, "mine", "train_func", {"lr": 0.1, "hidden": 16, "epochs": 100},
                       {"lr": "tag(log, interval(0.01, 0.3))", "hidden": "choice(8, 32)"})
    sweep_dir = project / "outputs" / "mine"
    same = ["+experiment=mine", f"search={search}", "scheduler=none", "scaling.num_workers=1",
            *(["search.n_startup_trials=2"] if search == "tpe" else [])]
    first = _run(project, *same, "search.num_samples=2", "scheduler.max_t=2")
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    kept = set(pd.read_csv(sweep_dir / "summary.csv", dtype={"trial_id": str})["trial_id"])

    grown = [*same, "search.num_samples=3", "scheduler.max_t=3"]
    plan = _run(project, *grown, "sweep.dry_run=true")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert "grow: 2 trials kept, 1 new; 2 trials continue from epoch 2 to 3" in plan.stdout
    smaller = _run(project, *same, "search.num_samples=1", "scheduler.max_t=3")
    assert smaller.returncode == 2
    assert "search.num_samples: 1 is smaller than in the sweep being resumed" in smaller.stderr

    second = _run(project, *grown)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "grow: 2 trials kept, 1 new; 2 trials continue from epoch 2 to 3" in second.stdout
    table = pd.read_csv(sweep_dir / "summary.csv", dtype={"trial_id": str})
    assert kept < set(table["trial_id"]) and len(table) == 3, table
    assert set(table["status"]) == {"completed"} and set(table["epochs"]) == {3}, table
    client, runs = _runs(project, "mine")
    parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    trials = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    assert len(parents) == 1 and len(trials) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in trials} == {parents[0].info.run_id}
    assert {r.info.status for r in runs} == {"FINISHED"}
    for run in trials:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert steps == [0, 1, 2], steps  # the kept trials went on; none trained an epoch twice
        resumed = {m.value for m in client.get_metric_history(run.info.run_id, "resumed_from")}
        if run.data.tags["sweeps.trial_id"] in kept:  # its own checkpoint handed back
            assert resumed == {0, 2}, resumed
        else:
            assert resumed == {0}, resumed
