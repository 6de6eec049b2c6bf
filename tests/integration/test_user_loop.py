"""A user's own Ray Train loop and config, run as a user runs them: from their project.

The loop (``tests/data/docs_loop.py``) is written the way Ray Train's docs write it and imports
neither ``sweeps`` nor ``trainables``. Each test copies it into a project directory outside the
checkout, with the experiment YAML in the project's own ``conf/``, and runs the CLI there with
``--config-dir conf``: the sweeps it finds is the installed one, the loop is the project's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.integration.test_resume import reap

pytestmark = pytest.mark.slow

EXPERIMENT = """\
# @package _global_
# python -m sweeps --config-dir conf +experiment={name}
experiment:
  name: {name}
  trainable: myloop:{fn}
  metric: val_accuracy
  mode: max
  params:
{params}
  search_space:
{space}
"""


def _project(tmp_path: Path, name: str, fn: str, params: dict, space: dict) -> Path:
    """A user project: ``myloop.py`` and ``conf/experiment/<name>.yaml``, outside the repo."""
    project = tmp_path / "project"
    (project / "conf" / "experiment").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "docs_loop.py", project / "myloop.py")
    (project / "conf" / "experiment" / f"{name}.yaml").write_text(EXPERIMENT.format(
        name=name, fn=fn,
        params="\n".join(f"    {k}: {json.dumps(v)}" for k, v in params.items()),
        space="\n".join(f"    {k}: {v}" for k, v in space.items())))
    return project


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a user has it
    return {**env, "RAY_ADDRESS": "", **extra}


def _sweeps(project: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "sweeps", "--config-dir", "conf", *args,
            f"tracking.uri=sqlite:///{project / 'mlflow.db'}"]


def _runs(project: Path, experiment: str):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    return client, client.search_runs([exp.experiment_id], max_results=1000)


def test_misbehaving_loops_fail_alone_and_the_sweep_goes_on(tmp_path) -> None:
    """One sweep, one behaviour per trial (docs_loop.BEHAVIORS): a loop that reports the wrong
    metric, NaN, raises, reports no epoch, reports float epochs, behaves. A searched key the
    loop never reads is warned about."""
    project = _project(tmp_path, "mine", "train_misbehaving",
                       {"lr": 0.1, "unused_knob": 1, "claims_dir": str(tmp_path / "claims")},
                       {"lr": "tag(log, interval(0.01, 0.5))", "unused_knob": "choice(1, 2)"})
    proc = subprocess.run(_sweeps(project, "+experiment=mine", "search=random",
                                  "search.num_samples=6", "scheduler.max_t=3",
                                  "scaling.num_workers=1", "trial.max_failures=0",
                                  "trial.max_retries=0"),
                          cwd=project, env=_env(), capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]  # trials failed: the sweep says so in its exit code
    table = pd.read_csv(project / "outputs" / "mine" / "summary.csv")
    claims = {p.name[len("trial-"):]: p.read_text() for p in (tmp_path / "claims").glob("trial-*")}
    status = dict(zip(table["trial_id"], table["status"], strict=True))
    by_behavior = {claims[t]: t for t in status}
    assert sorted(by_behavior) == sorted(["wrong_metric", "nan", "raises", "no_epoch",
                                          "float_epoch", "ok"])
    assert status[by_behavior["wrong_metric"]] == "error"
    assert status[by_behavior["raises"]] == "error"
    for good in ("no_epoch", "float_epoch", "ok"):
        assert status[by_behavior[good]] == "completed", (good, table)
    assert status[by_behavior["nan"]] in ("completed", "stopped")  # judged, not an error
    epochs = dict(zip(table["trial_id"], table["epochs"], strict=True))
    assert [epochs[by_behavior[b]] for b in ("no_epoch", "float_epoch", "ok")] == [3, 3, 3]
    # The failures are named, with the keys the wrong-metric loop did report.
    assert "2 trial(s) failed" in out
    assert (f"{by_behavior['wrong_metric']}: never reported val_accuracy (experiment.metric) "
            "by epoch 1; it reported: accuracy, epoch") in out
    assert f"{by_behavior['raises']}: " in out and "loss exploded" in out
    # The loop's own traceback is shown once (Ray's own copy goes to <sweep dir>/ray.log).
    assert out.count('raise ValueError(f"loss exploded (lr={lr})")') == 1, out[-4000:]
    assert "judged as the worst value" in out
    assert "never read the searched key(s) unused_knob" in out
    assert "never read the searched key(s) lr" not in out
    # MLflow: failures FAILED with the reason; nothing RUNNING; stopped is not failed.
    client, runs = _runs(project, "mine")
    trials = {r.data.tags["sweeps.trial_id"]: r for r in runs
              if r.data.tags.get("sweeps.role") == "trial"}
    assert trials[by_behavior["wrong_metric"]].info.status == "FAILED"
    assert "never reported val_accuracy" in trials[by_behavior["wrong_metric"]].data.tags[
        "sweeps.error"]
    assert trials[by_behavior["raises"]].info.status == "FAILED"
    assert trials[by_behavior["raises"]].data.tags["sweeps.error"].startswith(
        "ValueError: loss exploded (lr=")  # what it raised, not a generic sentence
    assert all(trials[by_behavior[b]].info.status == "FINISHED"
               for b in ("no_epoch", "float_epoch", "ok", "nan"))
    # Some trials failed, not all: the parent is FINISHED and counts them in its tags.
    parent = next(r for r in runs if r.data.tags.get("sweeps.role") == "parent")
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["sweeps.trials_failed"] == "2"
    assert parent.data.tags["sweeps.trials"].startswith("6 trials: ")
    assert client.get_experiment_by_name("mine").tags["mlflow.experimentKind"] == \
        "custom_model_development"
    steps = [m.step for m in client.get_metric_history(
        trials[by_behavior["no_epoch"]].info.run_id, "val_accuracy")]
    assert steps == [1, 2, 3]  # no epoch key: the report count
    steps = [m.step for m in client.get_metric_history(
        trials[by_behavior["ok"]].info.run_id, "val_accuracy")]
    assert steps == [1, 2, 3]


def test_a_sweep_whose_every_trial_fails_reads_as_failed_in_mlflow(tmp_path) -> None:
    """Exit 1, the parent run FAILED, each trial run FAILED with what the loop raised."""
    project = _project(tmp_path, "diverges", "train_diverges", {"lr": 0.1},
                       {"lr": "tag(log, interval(0.01, 0.5))"})
    proc = subprocess.run(_sweeps(project, "+experiment=diverges", "search=random",
                                  "search.num_samples=2", "scheduler=none", "scheduler.max_t=3",
                                  "scaling.num_workers=1", "trial.max_failures=0",
                                  "trial.max_retries=0"),
                          cwd=project, env=_env(), capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-4000:]
    _, runs = _runs(project, "diverges")
    parent = next(r for r in runs if r.data.tags.get("sweeps.role") == "parent")
    trials = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    assert parent.info.status == "FAILED"
    assert parent.data.tags["sweeps.trials"] == "2 trials: 0 completed, 0 stopped, 2 failed"
    assert len(trials) == 2 and {r.info.status for r in trials} == {"FAILED"}
    for run in trials:
        assert run.data.tags["sweeps.error"].startswith(
            "FloatingPointError: loss is nan at epoch 2 (lr="), run.data.tags["sweeps.error"]


def _checkpoints(sweep_dir: Path) -> int:
    return sum(1 for _ in (sweep_dir / "train").glob("*/checkpoint_*"))


def test_docs_loop_from_a_user_project_resumes_after_kill9_with_its_own_checkpoints(
        tmp_path) -> None:
    project = _project(tmp_path, "mine", "train_func", {"lr": 0.1, "hidden": 16, "epochs": 4},
                       {"lr": "tag(log, interval(0.01, 0.3))", "hidden": "choice(8, 32)"})
    sweep_dir = project / "outputs" / "mine"
    args = _sweeps(project, "+experiment=mine", "search.num_samples=3", "scheduler=none",
                   "scheduler.max_t=4", "scaling.num_workers=1",
                   "search.n_startup_trials=3")
    log = (tmp_path / "run1.txt").open("w")
    first = subprocess.Popen(args, cwd=project, env=_env(SLOW_EPOCH_S="1.5"), stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 400
    while _checkpoints(sweep_dir) < 3 and time.monotonic() < deadline:
        assert first.poll() is None, (tmp_path / "run1.txt").read_text()[-3000:]
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)  # the sweep driver alone, as an OOM kill would
    first.wait(30)
    reap(first)  # what the killed driver left, as a user's restart would find it
    second = subprocess.run(args, cwd=project, env=_env(), capture_output=True, text=True,
                            timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "resuming:" in second.stdout
    table = pd.read_csv(sweep_dir / "summary.csv")
    assert len(table) == 3 and set(table["status"]) == {"completed"}, table
    assert set(table["epochs"]) == {4}
    client, runs = _runs(project, "mine")
    trials = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    assert len(trials) == 3 and {r.info.status for r in runs} == {"FINISHED"}
    # Trial 1 ran the experiment's own lr (search.params_first, a TPE default); its hidden, 16,
    # is not one of the space's choices, so TPE drew that one.
    assert [float(run.data.params["lr"]) for run in trials].count(0.1) == 1  # once, resumed or not
    assert {int(run.data.params["hidden"]) for run in trials} <= {8, 32}
    resumed = []
    for run in trials:  # each trial's loop received its own sampled values
        assert float(run.data.params["lr"]) == pytest.approx(run.data.metrics["lr_seen"])
        assert int(run.data.params["hidden"]) == int(run.data.metrics["hidden_seen"])
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_accuracy")]
        assert steps == [0, 1, 2, 3], steps  # the loop's own 0-based epochs, none twice
        resumed += [m.value for m in client.get_metric_history(run.info.run_id,
                                                               "resumed_from") if m.value > 0]
    # At least one trial was interrupted mid-way and ray.train.get_checkpoint() handed its own
    # checkpoint back to the loop on resume (it restarted past epoch 0).
    assert resumed, "no trial resumed from its checkpoint"
    best = json.loads((sweep_dir / "best.json").read_text())
    assert best["model_form"] == "files"
    best_run = next(r for r in trials if r.data.tags["sweeps.trial_id"] == best["trial_id"])
    assert best_run.data.tags.get("sweeps.best") == "true"
    files = [a.path for a in client.list_artifacts(best_run.info.run_id, "best_checkpoint")]
    assert files == ["best_checkpoint/model.pt"]
    assert "logged to MLflow as files" in second.stdout

