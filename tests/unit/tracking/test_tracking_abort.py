"""A sweep that dies leaves no MLflow run RUNNING (real SQLite store, no Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlflow import MlflowClient

from sweeps.driver.tracking_run import abort_tracking
from sweeps.tracking.callback import MLflowTracking, TrackingSettings


@dataclass
class TrialRecord:  # the attributes of Tune's Trial the callback reads
    trial_id: str
    config: dict = field(default_factory=dict)
    last_result: dict = field(default_factory=dict)


def test_abort_closes_parent_and_open_trials_as_killed(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = MLflowTracking(TrackingSettings(
        uri=uri, experiment_name="abort", model_name=None, state_dir=str(tmp_path / "t"),
        max_epochs=3, scheduler="asha", flush_timeout_s=30))
    tracking.start_sweep("s", "uid", {"a": 1, "db": {"password": "hunter2"}}, {}, {})
    tracking.on_trial_start(0, [], TrialRecord("done", {"lr": 0.1}))
    tracking.on_trial_result(0, [], TrialRecord("done"), {"epoch": 3, "val_acc": 0.9})
    tracking.on_trial_complete(0, [], TrialRecord("done", last_result={"epoch": 3}))
    tracking.on_trial_start(0, [], TrialRecord("running", {"lr": 0.2}))
    abort_tracking(tracking, KeyboardInterrupt())

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("abort").experiment_id])
    status = {r.data.tags.get("sweeps.trial_id", "parent"): r.info.status for r in runs}
    assert status == {"parent": "KILLED", "done": "FINISHED", "running": "KILLED"}
    assert all(r.info.status != "RUNNING" for r in runs)
    parent = next(r for r in runs if "sweeps.trial_id" not in r.data.tags)
    assert parent.data.params == {"a": "1", "db.password": "***"}  # masked once, still masked
    config_yaml = client.download_artifacts(parent.info.run_id, "config.yaml", str(tmp_path))
    assert "hunter2" not in open(config_yaml).read()
