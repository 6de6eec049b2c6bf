"""The real command line, end to end: random search, no early stopping, the CNN trainable."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_cli_runs_a_sweep_and_prints_the_best(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    args = ["+experiment=digits_cnn", "search=random", "scheduler=none",
            "search.num_samples=2", "scheduler.max_t=2", "scaling.num_workers=2",
            "experiment.search_space.lr=tag(log, interval(1e-3, 3e-2))",
            "sweep.name=cli_test"]
    proc = subprocess.run([sys.executable, "-m", "sweeps", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    sweep_dir = tmp_path / "outputs" / "cli_test"
    table = pd.read_csv(sweep_dir / "summary.csv")
    assert len(table) == 2 and set(table["status"]) == {"completed"}
    assert set(table["epochs"]) == {2}
    assert table["lr"].between(1e-3, 3e-2).all()
    best = json.loads((sweep_dir / "best.json").read_text())
    assert f"best trial {best['trial_id']}" in proc.stdout
    assert best["checkpoint"] in proc.stdout
    assert "\x1b[" not in proc.stdout  # plain lines, no terminal escape codes
    assert "2/2 done" in proc.stdout
    assert "Configuration for experiment" not in proc.stdout  # no Tune header box
    assert "best config as Hydra overrides: experiment.search_space.lr=" in proc.stdout
    assert (sweep_dir / "plots" / "learning_curves.png").is_file()
    assert (sweep_dir / "ray.log").is_file()  # Ray's own logs, off the console

    # The printed rerun line, pasted as is, trains exactly the best configuration.
    rerun = next(ln for ln in proc.stdout.splitlines() if "rerun it alone:" in ln)
    args = shlex.split(rerun.split("python -m sweeps", 1)[1])
    plan = subprocess.run([sys.executable, "-m", "sweeps", *args, "sweep.dry_run=true"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert "0 parameter(s)" in plan.stdout and "sweep cli_test_best" in plan.stdout
    assert f"lr={best['config']['lr']!r}" in plan.stdout
    assert (f"tracking sqlite:///{tmp_path / 'mlflow.db'} (from default), experiment "
            "'digits_cnn' (from experiment.name)") in plan.stdout
    assert "View run" not in proc.stdout  # no MLflow URL chatter
    assert not list(tmp_path.glob("*.log")) and not (tmp_path / ".hydra").exists()

    # Tracking on by default, into sqlite:///mlflow.db of the directory the command ran in.
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("digits_cnn").experiment_id])
    parent = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    assert len(parent) == 1 and len(children) == 2
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parent[0].info.run_id}
    assert {r.info.status for r in runs} == {"FINISHED"}
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert f"mlflow: {store} (from default), experiment 'digits_cnn' (from experiment.name)" \
        in proc.stdout
    experiment = parent[0].info.experiment_id  # the link opens the UI on the runs table
    assert (f"compare trials: mlflow ui --backend-store-uri {store}, then open "
            f"http://127.0.0.1:5000/#/experiments/{experiment}?workflowType=machine_learning"
            ) in proc.stdout


USER_EXPERIMENT = """# @package _global_
# python -m sweeps --config-dir ../project/conf +experiment={name}
experiment:
  name: {name}
  trainable: mytrain:train_func
  metric: loss
  mode: min
  params: {{lr: 0.05}}
  search_space:
    lr: interval(0.01, 0.1)
"""


@pytest.mark.parametrize(
    ("args", "name", "where"),
    [(["--config-dir", "../project/conf", "+experiment=mine"], "mine", "--config-dir"),
     (["-cd", "../project/conf", "+experiment=digits"], "digits", "--config-dir"),
     (["hydra.searchpath=[file://../project/conf]", "+experiment=digits"], "digits",
      "hydra.searchpath")],
)
def test_cli_dry_run_of_a_user_experiment_from_another_directory(tmp_path, args, name,
                                                                 where) -> None:
    """Configs in ../project/conf, trainable in the working directory; a user digits.yaml
    shadows the built-in one. No Ray."""
    conf = tmp_path / "project" / "conf"
    (conf / "experiment").mkdir(parents=True)
    for exp in ("mine", "digits"):
        (conf / "experiment" / f"{exp}.yaml").write_text(USER_EXPERIMENT.format(name=f"u_{exp}"))
    work = tmp_path / "work"
    work.mkdir()
    (work / "mytrain.py").write_text("def train_func(config):\n    return None\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", *args, "sweep.dry_run=true",
                           "ray.num_cpus=2"], cwd=work, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"plan for sweep u_{name} (dry run" in proc.stdout
    assert "trainable mytrain:train_func, minimize loss" in proc.stdout
    assert (f"  experiment {name} from {conf}/experiment/{name}.yaml ({where})"
            in proc.stdout.splitlines())
