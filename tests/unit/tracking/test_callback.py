"""The tracking callback's results to journal records (real journal, real SQLite store, no Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlflow import MlflowClient

from sweeps.protocol import STEP_KEY, SYSTEM_KEY
from sweeps.tracking.callback import MLflowTracking, TrackingSettings


@dataclass
class TrialRecord:  # the attributes of Tune's Trial the callback reads
    trial_id: str
    config: dict = field(default_factory=dict)
    last_result: dict = field(default_factory=dict)


def test_system_samples_leave_the_result_and_reach_the_run_as_system_metrics(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = MLflowTracking(TrackingSettings(
        uri=uri, experiment_name="sys", model_name=None, state_dir=str(tmp_path / "t"),
        max_epochs=3, scheduler="asha", flush_timeout_s=30))
    tracking.start_sweep("s", "uid", {}, {}, {})
    tracking.on_trial_start(0, [], TrialRecord("t1"))
    memory = "system/process_memory_usage_megabytes"
    result = {"val_acc": 0.5, STEP_KEY: 1,
              SYSTEM_KEY: [[1_000_000, {memory: 812.5}], [1_005_000, {memory: 830.0}]]}
    tracking.on_trial_result(0, [], TrialRecord("t1"), result)
    tracking.on_trial_result(0, [], TrialRecord("t1"), {"val_acc": 0.6, STEP_KEY: 2})
    assert SYSTEM_KEY not in result  # Tune's loggers after this callback never see it
    records = [r for _, r in tracking.journal.pending()]
    assert [r["op"] for r in records][2:] == ["system", "metrics", "metrics"]
    assert all(SYSTEM_KEY not in r.get("values", {}) for r in records)
    tracking.finish(None, None)

    client = MlflowClient(uri)
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name("sys").experiment_id])
              if r.data.tags.get("sweeps.trial_id") == "t1"]
    assert set(run.data.metrics) == {"val_acc", memory}
    assert [(m.timestamp, m.step, m.value) for m in client.get_metric_history(
        run.info.run_id, memory)] == [(1_000_000, 0, 812.5), (1_005_000, 1, 830.0)]
