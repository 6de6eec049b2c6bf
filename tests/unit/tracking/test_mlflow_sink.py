"""The MLflow sink against a real SQLite store: nesting, limits, idempotent replays."""

from __future__ import annotations

import pytest

from sweeps.tracking.mlflow_sink import PARAM_LIMIT, TRUNCATED, MLflowSink


@pytest.fixture
def sink(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    s = MLflowSink(uri, "unit", tmp_path, model_name=None)
    s.apply({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "uid1",
             "params": {"a": 1}, "config_yaml": "a: 1\n", "search_space": {"lr": "x"},
             "tags": {"sweeps.sweep_name": "sw"}, "ts": 1})
    return s


def test_child_is_nested_and_found_again_after_a_lost_map(sink, tmp_path) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {"lr": 0.1}, "ts": 2})
    run = sink.client.get_run(sink.run_id("t1"))
    assert run.data.tags["mlflow.parentRunId"] == sink.parent_run_id
    assert run.data.params == {"lr": "0.1"}
    # The map is lost (a crash before it was written): the run is found by its tags.
    (tmp_path / "runs.json").unlink()
    again = MLflowSink(sink.uri, "unit", tmp_path, model_name=None)
    again.state.update({"parent": sink.parent_run_id, "sweep_uid": "uid1"})
    again.apply({"op": "trial_start", "trial": "t1", "params": {"lr": 0.1}, "ts": 2})
    assert again.run_id("t1") == sink.run_id("t1")
    assert len(sink.client.search_runs([sink.state["experiment_id"]])) == 2


def test_metrics_replayed_are_not_duplicated_and_non_numbers_are_dropped(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    for step in (1, 2, 2, 1):  # a replay after a lost reply
        sink.apply({"op": "metrics", "trial": "t1", "step": step, "ts": 100 + step,
                    "values": {"acc": step / 10, "note": "text", "flag": True}})
    history = sink.client.get_metric_history(sink.run_id("t1"), "acc")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.1), (2, 0.2)]
    assert set(sink.client.get_run(sink.run_id("t1")).data.metrics) == {"acc"}


def test_long_param_is_truncated_and_tagged(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {"long": "x" * 7000,
                                                               "k" * 300: 1}, "ts": 2})
    run = sink.client.get_run(sink.run_id("t1"))
    assert len(run.data.params["long"]) == PARAM_LIMIT
    assert run.data.params["long"].endswith(TRUNCATED)
    assert run.data.tags["sweeps.truncated_params"] == "long"
    assert "k" * 300 not in run.data.params


def test_trial_end_sets_status_and_reason(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "KILLED", "ts": 3,
                "tags": {"sweeps.stop_reason": "early-stopped by asha after epoch 1"}})
    run = sink.client.get_run(sink.run_id("t1"))
    assert run.info.status == "KILLED"
    assert run.data.tags["sweeps.stop_reason"].startswith("early-stopped")


@pytest.mark.parametrize(
    ("exc", "transient"),
    [
        ("MlflowException('API request to http://h/api failed with exception "
         "ConnectionError(...)')", True),
        ("MlflowException('API request to http://h/api failed with error code 503 != 200')",
         True),
        ("MlflowException('API request to http://h/api failed with error code 400 != 200')",
         False),
        ("MlflowException('If serialization_format is pt2, input_example is required')", False),
        ("ConnectionRefusedError()", True),
        ("TimeoutError()", True),
        ("ValueError('bad value')", False),
        # A checkpoint file that is gone will not come back: retrying only delayed the sweep's
        # end by the whole flush timeout.
        ("FileNotFoundError('no checkpoint.pt at /x')", False),
        ("PermissionError('/x')", False),
    ],
)
def test_only_connection_failures_are_retried(exc: str, transient: bool) -> None:
    from mlflow.exceptions import MlflowException  # noqa: F401  (used by eval)

    from sweeps.tracking.writer import is_transient

    assert is_transient(eval(exc)) is transient


def test_resumed_trial_keeps_first_point_per_step_and_reopens(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    for step, value in ((1, 0.1), (2, 0.2)):
        sink.apply({"op": "metrics", "trial": "t1", "step": step, "ts": 10 + step,
                    "values": {"acc": value}})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "KILLED", "ts": 20,
                "tags": {"sweeps.status": "aborted"}})
    # The sweep resumes: the trial starts again, re-runs epoch 2 (new value, new timestamp).
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 30})
    assert sink.client.get_run(sink.run_id("t1")).info.status == "RUNNING"
    for step, value in ((2, 0.25), (3, 0.3)):
        sink.apply({"op": "metrics", "trial": "t1", "step": step, "ts": 30 + step,
                    "values": {"acc": value}})
    history = sink.client.get_metric_history(sink.run_id("t1"), "acc")
    assert sorted((m.step, m.value) for m in history) == [(1, 0.1), (2, 0.2), (3, 0.3)]
    sink.apply({"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 40})
    assert sink.client.get_run(sink.run_id("t1")).info.status == "FINISHED"
    assert len(sink.client.search_runs([sink.state["experiment_id"]])) == 2


def test_sweep_end_closes_trial_runs_left_open(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    sink.apply({"op": "trial_start", "trial": "t2", "params": {}, "ts": 2})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 3})
    sink.apply({"op": "sweep_end", "status": "KILLED", "summary_csv": None, "best": None,
                "tags": {}, "ts": 4})
    statuses = {t: sink.client.get_run(sink.run_id(t)).info.status for t in ("t1", "t2")}
    assert statuses == {"t1": "FINISHED", "t2": "KILLED"}
    assert sink.client.get_run(sink.parent_run_id).info.status == "KILLED"


def test_resumed_sweep_reopens_the_same_parent_run(sink, tmp_path) -> None:
    sink.apply({"op": "sweep_end", "status": "KILLED", "summary_csv": None, "best": None,
                "tags": {"sweeps.abort_reason": "stopped by SIGTERM"}, "ts": 4})
    assert "sweeps.abort_reason" in sink.client.get_run(sink.parent_run_id).data.tags
    again = MLflowSink(sink.uri, "unit", tmp_path, model_name=None)  # next start, same dir
    again.apply({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "uid1", "start": 2,
                 "params": {"a": 2}, "config_yaml": "a: 2\n", "search_space": {}, "tags": {},
                 "ts": 5})
    parent = again.client.get_run(sink.parent_run_id)
    assert parent.info.status == "RUNNING"
    assert parent.data.tags["sweeps.starts"] == "2"
    assert parent.data.params == {"a": "1"}  # params are the first start's; no conflict
    assert "sweeps.abort_reason" not in parent.data.tags  # the first start's, gone with it
    assert len(again.client.search_runs([sink.state["experiment_id"]])) == 1


def test_a_loss_and_then_the_validation_metric_at_the_same_epoch_are_both_kept(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    sink.apply({"op": "metrics", "trial": "t1", "step": 1, "ts": 10, "values": {"loss": 0.9}})
    sink.apply({"op": "metrics", "trial": "t1", "step": 1, "ts": 11,
                "values": {"loss": 0.8, "val_acc": 0.7}})
    assert [m.value for m in sink.client.get_metric_history(sink.run_id("t1"), "loss")] == [0.9]
    assert [m.value for m in sink.client.get_metric_history(sink.run_id("t1"),
                                                            "val_acc")] == [0.7]


def _end_with_best(sink, checkpoint, **best) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 3,
                "run_name": "t1 stopped@3", "tags": {"sweeps.status": "stopped"}})
    sink.apply({"op": "sweep_end", "summary_csv": None, "status": "FINISHED", "tags": {},
                "ts": 4, "best": {"trial_id": "t1", "metric": "acc", "value": 0.9, "epoch": 3,
                                  "checkpoint": str(checkpoint), **best}})


def test_a_loops_own_checkpoint_is_logged_as_files_on_the_best_run(sink, tmp_path) -> None:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "model.pt").write_bytes(b"weights")
    _end_with_best(sink, checkpoint, model_form="files")
    run = sink.client.get_run(sink.run_id("t1"))
    assert run.info.run_name == "t1 best" and run.data.tags["sweeps.best"] == "true"
    assert run.info.status == "FINISHED"  # a stopped trial is not drawn as a failure
    files = [a.path for a in sink.client.list_artifacts(run.info.run_id, "best_checkpoint")]
    assert files == ["best_checkpoint/model.pt"]
    assert sink.state["model_logged"].endswith("/best_checkpoint")


def test_a_model_loader_registers_the_loops_checkpoint_as_a_model(tmp_path) -> None:
    import mlflow.pytorch
    import torch

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink = MLflowSink(uri, "unit", tmp_path, model_name="mine",
                      model_loader="tests.unit.loaders:linear_from_checkpoint")
    sink.apply({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "uid1", "params": {},
                "config_yaml": "", "search_space": {}, "tags": {}, "ts": 1})
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    torch.save(torch.nn.Linear(3, 2).state_dict(), checkpoint / "weights.pt")
    _end_with_best(sink, checkpoint, model_form="loader")
    mlflow.set_tracking_uri(uri)  # the sink left the caller's MLflow where it was
    model = mlflow.pytorch.load_model("models:/mine/1")
    assert model(torch.zeros(1, 3)).shape == (1, 2)


def test_runs_start_and_end_when_their_records_were_journaled(sink) -> None:
    """A trial whose records reach MLflow late (after an outage, or at once when the writer
    catches up) still shows its real duration in the runs table."""
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2_000})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 9_500})
    info = sink.client.get_run(sink.run_id("t1")).info
    assert (info.start_time, info.end_time) == (2_000, 9_500)
    assert sink.client.get_run(sink.parent_run_id).info.start_time == 1


def test_a_later_starts_new_best_takes_the_tag_and_logs_its_checkpoint(sink, tmp_path) -> None:
    """Issue 46: a grown sweep's best moved to another trial, then to a later checkpoint of
    that trial: one run is tagged best at a time (the old one gets its name back), and each new
    best checkpoint is logged."""
    def end(trial: str, epoch: int, ts: int) -> None:
        checkpoint = tmp_path / trial / f"checkpoint_epoch_{epoch:04d}"
        checkpoint.mkdir(parents=True, exist_ok=True)
        (checkpoint / "model.pt").write_bytes(f"{trial}@{epoch}".encode())
        sink.apply({"op": "sweep_end", "status": "FINISHED", "tags": {}, "ts": ts,
                    "best": {"trial_id": trial, "metric": "acc", "value": 0.9, "epoch": epoch,
                             "checkpoint": str(checkpoint), "model_form": "files"}})

    def bests() -> dict[str, tuple[str, str | None]]:
        return {t: (r.info.run_name, r.data.tags.get("sweeps.best")) for t, r in (
            (t, sink.client.get_run(sink.run_id(t))) for t in ("t1", "t2"))}

    def logged(trial: str) -> str:
        [artifact] = sink.client.list_artifacts(sink.run_id(trial), "best_checkpoint")
        local = sink.client.download_artifacts(sink.run_id(trial), artifact.path, str(tmp_path))
        return open(local).read()

    for trial in ("t1", "t2"):
        sink.apply({"op": "trial_start", "trial": trial, "params": {}, "ts": 2})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "KILLED", "ts": 3,
                "run_name": "t1 stopped@2"})
    end("t1", 2, 4)
    assert bests() == {"t1": ("t1 best", "true"), "t2": ("t2", None)}
    sink.state.pop("best_trial")  # as the state of a sweep written before it was kept
    end("t2", 2, 5)  # the grown sweep's new trial is better
    assert bests() == {"t1": ("t1 stopped@2", "false"), "t2": ("t2 best", "true")}
    assert (logged("t1"), logged("t2")) == ("t1@2", "t2@2")
    tags = {t: sink.client.get_run(sink.run_id(t)).data.tags for t in ("t1", "t2")}
    assert ("sweeps.best_checkpoint" in tags["t1"], "sweeps.best_checkpoint" in tags["t2"]) == (
        False, True)
    end("t2", 4, 6)  # a longer max_t: a later epoch of the same trial is better still
    assert logged("t2") == "t2@4" and sink.state["model_of"] == ["t2", str(tmp_path / "t2" /
                                                                        "checkpoint_epoch_0004")]
    end("t2", 4, 6)  # the same end replayed
    assert bests() == {"t1": ("t1 stopped@2", "false"), "t2": ("t2 best", "true")}


def test_system_samples_keep_their_times_and_steps_go_on_without_duplicates(sink) -> None:
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    cpu = "system/process_cpu_utilization_percentage"
    rank1 = "system/rank_1/gpu_3_memory_usage_megabytes"
    first = [[1000, {cpu: 50.0}], [6000, {cpu: 80.0, rank1: 900.0}]]
    sink.apply({"op": "system", "trial": "t1", "samples": first, "ts": 7000})
    sink.apply({"op": "system", "trial": "t1", "samples": first, "ts": 7000})  # applied again
    sink.apply({"op": "system", "trial": "t1", "samples": [[11000, {cpu: 70.0}]], "ts": 12000})
    many = [[20000 + i, {cpu: float(i)}] for i in range(1200)]  # over MLflow's 1000 per batch
    sink.apply({"op": "system", "trial": "t1", "samples": many, "ts": 30000})
    history = sink.client.get_metric_history(sink.run_id("t1"), cpu)
    assert sorted((m.timestamp, m.step, m.value) for m in history)[:3] == [
        (1000, 0, 50.0), (6000, 1, 80.0), (11000, 2, 70.0)]
    assert sorted(m.step for m in history) == list(range(3 + 1200))
    assert [(m.timestamp, m.step) for m in
            sink.client.get_metric_history(sink.run_id("t1"), rank1)] == [(6000, 0)]
