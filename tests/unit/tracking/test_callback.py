"""The tracking callback's results to journal records (real journal, real SQLite store, no Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mlflow import MlflowClient

from sweeps.protocol import CLOCK_KEY, STEP_KEY
from sweeps.tracking import callback
from sweeps.tracking.callback import MLflowTracking, TrackingSettings


@dataclass
class TrialRecord:  # the attributes of Tune's Trial the callback reads
    trial_id: str
    config: dict = field(default_factory=dict)
    last_result: dict = field(default_factory=dict)


def test_the_samples_a_trials_ranks_sent_reach_its_run_every_10_s_and_at_its_end(
        tmp_path, monkeypatch) -> None:
    """What ``sweeps.loop.system_metrics.taken_aside`` hands over (Ray's key-value store in a
    sweep: tests/integration/test_sweep.py) goes to the trial's run, each sample at its time."""
    memory = "system/process_memory_usage_megabytes"
    sent = [[[1_000_000, {memory: 812.5}]], [[1_005_000, {memory: 830.0}]]]
    asked: list[str] = []
    monkeypatch.setattr(callback, "taken_aside",
                        lambda run_dir: asked.append(run_dir) or sent.pop(0))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = MLflowTracking(TrackingSettings(
        uri=uri, experiment_name="sys", model_name=None, state_dir=str(tmp_path / "t"),
        max_epochs=3, scheduler="asha", flush_timeout_s=30, system_metrics=True))
    tracking.start_sweep("s", "uid", {}, {}, {})
    trial = TrialRecord("t1")
    tracking.on_trial_start(0, [], trial)
    tracking.on_trial_result(0, [], trial, {"val_acc": 0.5, STEP_KEY: 1})
    tracking.on_step_end(0, [trial])  # Tune's loop turns: the running trials' samples
    tracking.on_trial_result(0, [], trial, {"val_acc": 0.6, STEP_KEY: 2})
    tracking.on_step_end(0, [trial])  # not 10 s later: not again
    trial.last_result = {"val_acc": 0.6, STEP_KEY: 3, CLOCK_KEY: 3.0}
    tracking.on_trial_complete(0, [], trial)
    assert asked == [str(tmp_path / "train" / "t1")] * 2  # the trial's run directory
    records = [r for _, r in tracking.journal.pending()]
    assert [r["op"] for r in records][2:] == ["metrics", "system", "metrics", "system",
                                              "trial_end"]
    tracking.finish(None, None)

    client = MlflowClient(uri)
    (run,) = [r for r in client.search_runs([client.get_experiment_by_name("sys").experiment_id])
              if r.data.tags.get("sweeps.trial_id") == "t1"]
    assert set(run.data.metrics) == {"val_acc", memory}
    assert [(m.timestamp, m.step, m.value) for m in client.get_metric_history(
        run.info.run_id, memory)] == [(1_000_000, 0, 812.5), (1_005_000, 1, 830.0)]
