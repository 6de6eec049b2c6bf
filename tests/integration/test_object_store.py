"""A sweep whose directory is on S3 (moto's server, a real endpoint in its own process, with
authentication on): killed with SIGKILL mid-sweep and resumed by the same command from
another working directory, as from another machine. Nothing of the sweep lives on local disk.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
import torch

from sweeps import best_checkpoint, files, load, load_best, load_model
from sweeps.layout import SweepLayout
from sweeps.search.schedulers import ended_trials
from sweeps.storage import stand_in, trees
from tests.integration.tensorboard_runs import assert_steps_are_epochs
from tests.integration.test_resume import (
    TRAINABLE,
    Sweep,
    _epochs,
    _mlflow_runs,
    _wait_for,
)
from trainables.digits import evaluate, load_split

pytestmark = pytest.mark.slow


def test_sweep_on_s3_killed_resumes_from_another_directory(tmp_path, moto_s3) -> None:
    """On the default backend, 2 workers (rank 1 in a peer process). A Ray Train run's
    checkpoints on S3 are test_cluster's (``s3``), under a lost node."""
    uri = f"s3://{moto_s3.BUCKET}/{uuid.uuid4().hex[:8]}/digits"
    prefix = uri.split("/", 3)[3]
    sweep_dir = stand_in(uri)
    args = ["+experiment=digits", TRAINABLE, f"+experiment.params.log_dir={tmp_path / 'logs'}",
            f"sweep.dir={uri}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
            "search.num_samples=4", "scheduler.max_t=4", "scaling.num_workers=2",
            "+experiment.params.epoch_sleep=1.0", "ray.num_cpus=2"]
    first, second = tmp_path / "here", tmp_path / "elsewhere"
    first.mkdir()

    sweep = Sweep(first, args)
    sweep.start()
    # Kill once a trial has ended (its decision is in the bucket) and another has trained.
    _wait_for(lambda: ended_trials(sweep_dir) and len({t for t, _, _ in _epochs(tmp_path)})
              >= 2, sweep.proc)
    assert sweep.proc.poll() is None, "the sweep ended before the kill"
    running = load(uri)  # sweeps.load while the driver runs the sweep
    assert running.live and set(ended_trials(sweep_dir)) <= set(running.trials["trial_id"])
    assert set(running.trials["status"]) <= {"completed", "stopped", "running"}, running.trials
    # The same command from another directory (a colleague's machine) while it runs: refused
    # in one line by the claim in the bucket, naming the driver that holds it.
    second.mkdir()
    refused = Sweep(second, args)
    refused.start()
    rc, out = refused.wait(120)
    assert rc == 2 and f"pid {sweep.proc.pid}" in out and len(out.strip().splitlines()) == 1, out
    sweep.kill9()
    killed_at, ended = time.time(), set(ended_trials(sweep_dir))

    again = Sweep(second, args)  # the same command, from another working directory
    again.start()
    rc, out = again.wait()
    assert rc == 0, out
    assert "resuming:" in out and f"dir {uri}" in out, out
    assert "taking over the sweep from host" in out and "that process is gone" in out, out

    # Every trial ended once: the ones that had ended were not trained again.
    trained = _epochs(tmp_path, "trained.log")
    for trial in ended:
        assert all(ts < killed_at for t, _, ts in trained if t == trial), trial
    layout = SweepLayout(sweep_dir)
    summary = files.read_text(layout.summary_csv).splitlines()
    trial_ids = {line.split(",")[0] for line in summary[1:]}
    assert len(trial_ids) == 4 and all(("completed" in line or "stopped" in line)
                                       for line in summary[1:]), summary
    tables = load(uri)  # the same trials, each report once, from the bucket
    assert not tables.live and set(tables.trials["trial_id"]) == trial_ids
    assert set(tables.trials["status"]) <= {"completed", "stopped"}
    for trial, epochs in tables.trials.set_index("trial_id")["epochs"].items():
        reported = tables.history[tables.history.trial_id == trial]["sweeps_epoch"].tolist()
        assert reported == list(range(1, epochs + 1)), (trial, reported)

    # Checkpoints and results are in the bucket, not on local disk.
    keys = set(moto_s3.keys(prefix))
    for trial in trial_ids:
        assert any(k.startswith(f"{prefix}/train/{trial}/checkpoint_epoch_")
                   and k.endswith("/checkpoint.pt") for k in keys), trial
        assert f"{prefix}/{trial}/result.json" in keys
    for name in ("best.json", "summary.csv", "summary.parquet", "state/sweep.json",
                 "state/end.json", "config.yaml", "config.start2.yaml"):
        assert f"{prefix}/{name}" in keys, name
    # The TensorBoard runs were uploaded, and continue across the two drivers: each epoch once.
    for trial in trial_ids:
        assert any(k.startswith(f"{prefix}/tensorboard/{trial}/events.out.tfevents.")
                   for k in keys), trial
    copy = trees.download(layout.tensorboard, tmp_path / "copy" / "tensorboard")
    assert_steps_are_epochs(copy.parent, trial_ids)
    best = json.loads(files.read_text(layout.best))
    assert best["checkpoint"].startswith(f"{uri}/train/{best['trial_id']}/checkpoint_epoch_")
    assert json.loads(files.read_text(layout.end))["held_placement_groups"] == 0
    leftovers = sorted(p.name for d in (first, second) for p in d.iterdir()
                       if not p.name.startswith("run"))
    assert leftovers == [], f"written to the working directories: {leftovers}"

    # The MLflow runs continue: one parent (started twice), one run per trial, each epoch once.
    client, runs = _mlflow_runs(tmp_path)
    assert [r.info.run_name for r in runs if r.info.status == "RUNNING"] == []
    parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    assert len(parents) == 1 and parents[0].data.tags["sweeps.starts"] == "2"
    children = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    assert sorted(r.data.tags["sweeps.trial_id"] for r in children) == sorted(trial_ids)
    for run in children:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_acc")]
        assert steps == list(range(1, len(steps) + 1)), steps

    # The best model loads from the bucket's URI, anywhere, and scores what the sweep says;
    # so does run_sweep's result.sweep_dir (the stand-in path) and its best checkpoint.
    _, _, x_va, y_va = load_split()
    checkpoint = best_checkpoint(uri)
    assert checkpoint == best["checkpoint"]
    for model in (load_best(uri), load_best(sweep_dir), load_model(sweep_dir / "train" /
                  best["trial_id"] / checkpoint.rpartition("/")[2])):
        _, correct, count = evaluate(model, torch.from_numpy(x_va), torch.from_numpy(y_va))
        assert correct / count == pytest.approx(best["value"], abs=1e-9)
