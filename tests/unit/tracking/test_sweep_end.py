"""How a sweep reads in MLflow's UI: its experiment opens on the runs, a failed sweep is FAILED,
the parent counts trials by outcome, a failed trial says what it raised (real SQLite store)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from mlflow import MlflowClient

from sweeps.tracking.callback import MLflowTracking, TrackingSettings

KIND = "mlflow.experimentKind"


@dataclass
class TrialRecord:  # the attributes of Tune's Trial the callback reads
    trial_id: str
    config: dict = field(default_factory=dict)
    last_result: dict = field(default_factory=dict)
    error: BaseException | None = None

    def get_pickled_error(self) -> BaseException | None:  # what Tune pickled for the trial
        return self.error


def _sweep(tmp_path, name: str = "exp") -> tuple[MLflowTracking, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = MLflowTracking(TrackingSettings(
        uri=uri, experiment_name=name, model_name=None, state_dir=str(tmp_path / "t"),
        max_epochs=3, scheduler="asha", flush_timeout_s=30, metric="val_acc"))
    tracking.start_sweep("s", "uid", {"a": 1}, {}, {})
    return tracking, uri


def _runs(uri: str, name: str = "exp") -> tuple[Any, dict[str, Any]]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    return exp, {r.data.tags.get("sweeps.trial_id", "parent"): r for r in runs}


def test_every_trial_failing_fails_the_parent_and_each_run_says_what_it_raised(
        tmp_path) -> None:
    tracking, uri = _sweep(tmp_path)
    for trial_id, error in (("t1", ValueError("loss exploded (lr=0.3)")),
                            ("t2", RuntimeError("CUDA error: an illegal memory access\nmore"))):
        tracking.on_trial_start(0, [], TrialRecord(trial_id, {"lr": 0.3}))
        tracking.on_trial_error(0, [], TrialRecord(trial_id, error=error))
    tracking.finish(None, None, outcomes={"error": 2})
    exp, runs = _runs(uri)
    assert exp.tags[KIND] == "custom_model_development"  # the UI opens on the runs table
    assert runs["parent"].info.status == "FAILED"
    assert runs["parent"].data.tags["sweeps.trials"] == "2 trials: 0 completed, 0 stopped, " \
                                                        "2 failed"
    assert runs["t1"].data.tags["sweeps.error"] == "ValueError: loss exploded (lr=0.3)"
    assert runs["t2"].data.tags["sweeps.error"] == ("RuntimeError: CUDA error: an illegal "
                                                    "memory access")
    assert {runs[t].info.status for t in ("t1", "t2")} == {"FAILED"}


@pytest.mark.parametrize(("outcomes", "best", "status"), [
    ({"completed": 1, "stopped": 1, "error": 1}, True, "FINISHED"),  # some failed: tags say so
    ({"stopped": 2}, True, "FINISHED"),
    ({"error": 1, "empty": 1}, True, "FAILED"),  # a metric, then every trial raised
    ({"completed": 2}, False, "FAILED"),  # no trial produced the metric
])
def test_parent_status_and_counts(tmp_path, outcomes, best, status) -> None:
    tracking, uri = _sweep(tmp_path)
    tracking.on_trial_start(0, [], TrialRecord("t1", {"lr": 0.1}))
    tracking.on_trial_result(0, [], TrialRecord("t1"), {"epoch": 1, "val_acc": 0.9})
    row = {"trial_id": "t1", "metric": "val_acc", "value": 0.9, "epoch": 1,
           "checkpoint": None, "config": {"lr": 0.1}}
    tracking.finish(None, row if best else None, outcomes=outcomes)
    _, runs = _runs(uri)
    parent = runs["parent"]
    assert parent.info.status == status
    failed = outcomes.get("error", 0) + outcomes.get("empty", 0)
    assert parent.data.tags["sweeps.trials_failed"] == str(failed)
    assert parent.data.tags["sweeps.trials_completed"] == str(outcomes.get("completed", 0))
    assert parent.data.tags["sweeps.trials_stopped"] == str(outcomes.get("stopped", 0))


@pytest.mark.parametrize(("existing", "kept"), [
    ({}, "custom_model_development"),  # a sweeps experiment from before: marked now
    ({KIND: "genai_development"}, "genai_development"),  # the user's own choice stays
])
def test_an_existing_experiment_is_marked_only_when_it_says_no_kind(tmp_path, existing,
                                                                    kept) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    client.create_experiment("team", tags=existing)
    tracking, uri = _sweep(tmp_path, "team")
    tracking.finish(None, None)
    exp, _ = _runs(uri, "team")
    assert exp.tags.get(KIND) == kept
