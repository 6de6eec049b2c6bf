"""TensorBoard events of a sweep (sweeps.tracking.tensorboard), read back with TensorBoard's own
readers: one run per trial, steps = the trial's epochs with none twice, HParams sessions. No Ray
started: the callback is driven with Tune's hook calls and trial records as Tune passes them."""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ray.tune.logger import TBXLoggerCallback

from sweeps.protocol import CLOCK_KEY, SCHEDULER_LOG, STEP_KEY
from sweeps.storage import trees
from sweeps.storage.journal import Journal
from sweeps.tracking.tensorboard import TensorBoardEvents, TensorBoardSettings

pytest.importorskip("tensorboard")


@dataclass
class TrialRecord:  # the attributes of Tune's Trial the callback reads
    trial_id: str
    config: dict = field(default_factory=dict)
    last_result: dict = field(default_factory=dict)


def _settings(root: Path, scheduler: str = "asha", objectives=(("val_acc", "max"),),
              ) -> TensorBoardSettings:
    return TensorBoardSettings(str(root), tuple(objectives), ("lr", "model.hidden"), scheduler,
                               max_epochs=4)


def _result(epoch: int, acc: float, **extra: float) -> dict:
    """A Tune result as the trial's report bridge sends it (Tune's bookkeeping included)."""
    return {"epoch": epoch, "val_acc": acc, "loss": 1 - acc, STEP_KEY: epoch, CLOCK_KEY: epoch,
            "training_iteration": 1, "time_total_s": 1.0, "config": {"lr": 0.1},
            "trial_id": "x", "done": False, **extra}


def _run(events: TensorBoardEvents, trial: TrialRecord, results: list[dict],
         end: str | None = "complete") -> None:
    events.on_trial_start(0, [], trial)
    for result in results:
        events.on_trial_result(0, [], trial, result)
        trial.last_result = result
    if end == "complete":
        events.on_trial_complete(0, [], trial)
    elif end == "error":
        events.on_trial_error(0, [], trial)


def _scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    return {tag: [(e.step, round(e.value, 4)) for e in acc.Scalars(tag)]
            for tag in acc.Tags()["scalars"]}


def _sessions(run_dir: Path) -> tuple[dict, int | None]:
    """(hparams of the run's session start, its session end's status) as TensorBoard reads
    them (None: no end yet)."""
    from tensorboard.backend.event_processing.plugin_event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    acc = EventAccumulator(str(run_dir))
    acc.Reload()
    content = acc.PluginTagToContent("hparams")
    start = metadata.parse_session_start_info_plugin_data(
        content[metadata.SESSION_START_INFO_TAG])
    hparams = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
               for k, v in start.hparams.items()}
    end = content.get(metadata.SESSION_END_INFO_TAG)
    return hparams, (metadata.parse_session_end_info_plugin_data(end).status
                     if end is not None else None)


def test_one_run_per_trial_at_its_epochs_with_hparams_and_final_best(tmp_path) -> None:
    from tensorboard.plugins.hparams import api_pb2

    events = TensorBoardEvents(_settings(tmp_path))
    assert isinstance(events, TBXLoggerCallback)  # so Tune adds no TBX logger of its own
    config = {"lr": 0.1, "model": {"hidden": 32, "act": "relu"}}  # act: a constant, not searched
    _run(events, TrialRecord("a1", config),
         [_result(1, 0.5), _result(2, 0.7), _result(3, 0.6), _result(4, 0.65)])
    _run(events, TrialRecord("b2", {"lr": 0.01, "model": {"hidden": 8}}),
         [_result(1, 0.3, eval={"loss": 0.9})], end="error")
    events.on_experiment_end([])

    runs = tmp_path / "tensorboard"
    assert sorted(p.name for p in runs.iterdir()) == ["a1", "b2"]
    a1 = _scalars(runs / "a1")
    assert a1["val_acc"] == [(1, 0.5), (2, 0.7), (3, 0.6), (4, 0.65)]
    assert a1["final/val_acc"] == [(4, 0.65)] and a1["best/val_acc"] == [(4, 0.7)]
    assert set(a1) == {"val_acc", "loss", "final/val_acc", "best/val_acc"}  # no bookkeeping
    assert _sessions(runs / "a1") == ({"lr": 0.1, "model.hidden": 32.0},
                                      api_pb2.STATUS_SUCCESS)
    b2 = _scalars(runs / "b2")
    assert b2["eval/loss"] == [(1, 0.9)] and b2["best/val_acc"] == [(1, 0.3)]
    assert _sessions(runs / "b2") == ({"lr": 0.01, "model.hidden": 8.0},
                                      api_pb2.STATUS_FAILURE)


def test_resumed_trial_continues_its_curve_without_writing_a_step_twice(tmp_path) -> None:
    """A driver killed after epoch 3 (reported, not checkpointed); a new driver process (a new
    callback) resumes the trial from epoch 2's checkpoint: epoch 3 comes again, and so do
    epochs the loop reports twice (a retry after a failure in the same driver)."""
    trial = TrialRecord("r1", {"lr": 0.1, "model": {"hidden": 16}})
    _run(TensorBoardEvents(_settings(tmp_path)), trial,
         [_result(1, 0.5), _result(2, 0.6), _result(3, 0.7)], end=None)  # killed: no end

    events = TensorBoardEvents(_settings(tmp_path))
    _run(events, trial, [_result(3, 0.71), _result(4, 0.8)], end=None)
    events.on_trial_recover(0, [], trial)  # Tune retries it from epoch 3's checkpoint
    _run(events, trial, [_result(4, 0.81), _result(5, 0.9)])

    run_dir = tmp_path / "tensorboard" / "r1"
    assert len(list(run_dir.glob("events.out.tfevents.*"))) == 2  # one file per driver
    scalars = _scalars(run_dir)
    assert scalars["val_acc"] == [(1, 0.5), (2, 0.6), (3, 0.7), (4, 0.8), (5, 0.9)]
    assert scalars["best/val_acc"] == [(5, 0.9)]
    assert _sessions(run_dir)[0] == {"lr": 0.1, "model.hidden": 16.0}


def test_errored_trial_resumed_later_continues_and_keeps_one_session(tmp_path) -> None:
    """Tune resumes errored trials on the next start: its curve and final/best go on; the
    session's end stays the first one written (the one TensorBoard reads)."""
    from tensorboard.plugins.hparams import api_pb2

    trial = TrialRecord("e1", {"lr": 0.3})
    _run(TensorBoardEvents(_settings(tmp_path)), trial, [_result(1, 0.4), _result(2, 0.5)],
         end="error")
    _run(TensorBoardEvents(_settings(tmp_path)), trial, [_result(2, 0.55), _result(3, 0.6)])
    run_dir = tmp_path / "tensorboard" / "e1"
    scalars = _scalars(run_dir)
    assert scalars["val_acc"] == [(1, 0.4), (2, 0.5), (3, 0.6)]
    assert scalars["best/val_acc"] == [(2, 0.5), (3, 0.6)]
    assert _sessions(run_dir) == ({"lr": 0.3}, api_pb2.STATUS_FAILURE)
    assert _summary_tags(run_dir).count("_hparams_/session_start_info") == 1
    assert _summary_tags(run_dir).count("_hparams_/session_end_info") == 1


def _summary_tags(run_dir: Path) -> list[str]:
    """Every summary value's tag in the run's files, in order (repeats kept)."""
    from tensorboardX.proto.event_pb2 import Event

    from sweeps.tracking.event_files import records

    return [value.tag for path in sorted(run_dir.glob("events.out.tfevents.*"))
            for data in records(path.read_bytes())
            for value in Event.FromString(data).summary.value]


def test_trial_that_failed_before_reporting_is_listed_with_its_values(tmp_path) -> None:
    from tensorboard.plugins.hparams import api_pb2

    events = TensorBoardEvents(_settings(tmp_path, objectives=(("val_loss", "min"),)))
    _run(events, TrialRecord("f1", {"lr": 0.5}), [], end="error")
    run_dir = tmp_path / "tensorboard" / "f1"
    assert _scalars(run_dir) == {}
    assert _sessions(run_dir) == ({"lr": 0.5}, api_pb2.STATUS_FAILURE)


def test_trial_the_scheduler_failed_ends_as_a_failure_like_its_mlflow_run(tmp_path) -> None:
    """A trial that never reported the metric: Tune completes it, the scheduler's verdict
    (the scheduler log) makes it an error."""
    from tensorboard.plugins.hparams import api_pb2

    Journal(tmp_path / "state", SCHEDULER_LOG).append(
        {"trial": "n1", "epoch": 1, "error": "never reported val_acc"})
    events = TensorBoardEvents(_settings(tmp_path))
    _run(events, TrialRecord("n1", {"lr": 0.5}), [{"acc": 0.5, STEP_KEY: 1, CLOCK_KEY: 1}])
    assert _sessions(tmp_path / "tensorboard" / "n1")[1] == api_pb2.STATUS_FAILURE


def test_pbt_restart_on_a_donors_lower_clock_goes_on_after_the_last_step(tmp_path) -> None:
    events = TensorBoardEvents(_settings(tmp_path, scheduler="pbt"))
    trial = TrialRecord("p1", {"lr": 0.1})
    _run(events, trial, [_result(1, 0.5), _result(2, 0.6), _result(3, 0.62)], end=None)
    Journal(tmp_path / "state", SCHEDULER_LOG).append(
        {"trial": "p1", "epoch": 3, "exploit": {"generation": 1, "donor": "p2",
                                                "donor_epoch": 2,
                                                "changed": {"lr": [0.1, 0.12]}}})
    trial.config = {"lr": 0.12}
    _run(events, trial, [_result(3, 0.7), _result(4, 0.75)])  # the donor's clock: 2 -> 3
    run_dir = tmp_path / "tensorboard" / "p1"
    assert _scalars(run_dir)["val_acc"] == [(1, 0.5), (2, 0.6), (3, 0.62), (4, 0.7), (5, 0.75)]
    assert _sessions(run_dir)[0] == {"lr": 0.1}  # the values it started with (TensorBoard
    # reads a run's first session start; MLflow keeps the first params too)


def test_switched_off_it_writes_nothing(tmp_path) -> None:
    events = TensorBoardEvents(None)
    assert isinstance(events, TBXLoggerCallback)  # Tune's own TBX logger stays off too
    _run(events, TrialRecord("o1", {"lr": 0.1}), [_result(1, 0.5)])
    events.on_experiment_end([])
    assert not (tmp_path / "tensorboard").exists()


def test_on_an_object_store_the_runs_are_uploaded_and_a_resume_reads_them_back(
        moto_s3) -> None:
    from sweeps.storage import stand_in, uri_of

    root = stand_in(f"s3://{moto_s3.BUCKET}/unit/{uuid.uuid4().hex[:8]}")
    trial = TrialRecord("s1", {"lr": 0.1})
    _run(TensorBoardEvents(_settings(root)), trial, [_result(1, 0.5), _result(2, 0.6)],
         end="error")
    prefix = uri_of(root / "tensorboard" / "s1").split("/", 3)[3]
    assert len(moto_s3.keys(prefix)) == 1
    shutil.rmtree(root)  # the resume runs on another machine
    _run(TensorBoardEvents(_settings(root)), trial, [_result(2, 0.61), _result(3, 0.7)])
    assert len(moto_s3.keys(prefix)) == 2
    shutil.rmtree(root)

    local = trees.download(root / "tensorboard" / "s1", root.parent / f"{root.name}-copy")
    try:
        assert _scalars(local)["val_acc"] == [(1, 0.5), (2, 0.6), (3, 0.7)]
    finally:
        shutil.rmtree(local)


def test_on_an_object_store_a_killed_driver_loses_no_step_and_its_local_copy_is_ignored(
        moto_s3) -> None:
    """A driver killed mid-trial (no end, no close): every step Tune saw is already on the
    store; the resumed driver, on the same machine, reads the store, not the stale local copy
    (here holding a step the store never got), and continues after what the store holds."""
    from sweeps.storage import stand_in

    root = stand_in(f"s3://{moto_s3.BUCKET}/unit/{uuid.uuid4().hex[:8]}")
    trial = TrialRecord("k1", {"lr": 0.1})
    _run(TensorBoardEvents(_settings(root)), trial, [_result(1, 0.5), _result(2, 0.6)],
         end=None)  # killed: nothing closed, nothing uploaded at an end
    run_dir = root / "tensorboard" / "k1"
    stale = TensorBoardEvents(_settings(root.parent / f"{root.name}-stale"))
    _run(stale, TrialRecord("k1"), [_result(3, 0.9)], end=None)  # written, never uploaded
    shutil.copytree(root.parent / f"{root.name}-stale" / "tensorboard" / "k1", run_dir,
                    dirs_exist_ok=True)
    _run(TensorBoardEvents(_settings(root)), trial, [_result(3, 0.7), _result(4, 0.8)])
    copy = trees.download(run_dir, root.parent / f"{root.name}-copy")
    try:
        assert _scalars(copy)["val_acc"] == [(1, 0.5), (2, 0.6), (3, 0.7), (4, 0.8)]
    finally:
        for path in (copy, root.parent / f"{root.name}-stale", root):
            shutil.rmtree(path, ignore_errors=True)
