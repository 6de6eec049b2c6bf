"""The inline executor's bookkeeping (sweeps.trial.backends.inline) and the in-process Train API
(sweeps._ray.train_fn), without a cluster: a run directory Train itself would accept."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from sweeps._ray import train_snapshot
from sweeps.trial.backends.inline_run import InlineRun, score_key
from sweeps.trial.clock import TrialClock


def _source(tmp_path: Path, name: str, payload: str) -> Path:
    src = tmp_path / "src" / name
    src.mkdir(parents=True)
    (src / "model.txt").write_text(payload)
    return src


def _run(tmp_path: Path, keep: int = 2, mode: str = "max", budget: float = math.inf) -> InlineRun:
    run_dir = tmp_path / "train" / "t1"
    return InlineRun(run_dir, "acc", mode, keep, TrialClock("epoch", str(run_dir)), budget)


def _checkpoint(path: Path):
    from ray.train import Checkpoint

    return Checkpoint(str(path))


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """What the inline run hands Tune (``ray.tune.report`` to the trial's real session), in
    order."""
    import sweeps._ray.tune_fn

    got: list[dict] = []
    monkeypatch.setattr(sweeps._ray.tune_fn, "report_to_tune", got.append)
    return got


def _register(run: InlineRun, tmp_path: Path, epoch: int, acc: float) -> None:
    name = f"checkpoint_epoch_{epoch:04d}"
    run.report({"epoch": epoch, "acc": acc}, _checkpoint(_source(tmp_path, name, f"e{epoch}")),
               name)


def test_keeps_the_best_by_the_metric_and_the_latest_as_train_does(tmp_path: Path,
                                                                   handed) -> None:
    run = _run(tmp_path, keep=2)
    for epoch, acc in [(1, 0.5), (2, 0.9), (3, 0.7), (4, 0.6)]:
        _register(run, tmp_path, epoch, acc)
    kept = sorted(p.name for p in run.run_dir.glob("checkpoint_epoch_*"))
    # best two: epoch 2 (0.9) and 3 (0.7); epoch 4 is kept as the latest although worse
    assert kept == ["checkpoint_epoch_0002", "checkpoint_epoch_0003", "checkpoint_epoch_0004"]
    snap = train_snapshot.load(run.run_dir)
    assert train_snapshot.latest(snap) == ("checkpoint_epoch_0004", {"epoch": 4, "acc": 0.6}, 4)
    # Train's order: worst to best; indices are each checkpoint's report
    assert train_snapshot.entries(snap) == [("checkpoint_epoch_0004", 3),
                                            ("checkpoint_epoch_0003", 2),
                                            ("checkpoint_epoch_0002", 1)]
    assert snap["current_report_index"] == 4
    assert (run.run_dir / "checkpoint_epoch_0004" / "model.txt").read_text() == "e4"
    assert run.checkpoint().path == str(run.run_dir / "checkpoint_epoch_0004")
    # each report stamped, logged and handed over with its checkpoint path
    assert [h["sweeps_epoch"] for h in handed] == [1.0, 2.0, 3.0, 4.0]
    assert handed[-1]["checkpoint_path"] == str(run.run_dir / "checkpoint_epoch_0004")
    from sweeps.trial import report_log

    assert [r["n"] for r in report_log.records(run.run_dir)] == [1, 2, 3, 4]


def test_a_resumed_run_continues_from_the_snapshot(tmp_path: Path, handed) -> None:
    first = _run(tmp_path)
    assert first.checkpoint() is None and first.next_index == 0
    _register(first, tmp_path, 1, 0.5)
    first.report({"epoch": 2, "acc": 0.6})  # a report without a checkpoint
    _register(first, tmp_path, 3, 0.8)
    assert "checkpoint_path" not in handed[1]
    again = _run(tmp_path)
    assert again.latest == "checkpoint_epoch_0003" and again.next_index == 3
    assert [k[0] for k in again.kept] == ["checkpoint_epoch_0001", "checkpoint_epoch_0003"]
    again.clock.count = 7
    again.restart()
    assert again.clock.count == 3  # the reports the latest checkpoint covers


def test_a_checkpoint_reported_again_replaces_the_old_copy_and_can_drop_its_source(
        tmp_path: Path, handed) -> None:
    run = _run(tmp_path)
    _register(run, tmp_path, 1, 0.5)
    src = tmp_path / "again"
    src.mkdir()
    (src / "model.txt").write_text("new")
    run._persist(_checkpoint(src), "checkpoint_epoch_0001", True, None)
    assert (run.run_dir / "checkpoint_epoch_0001" / "model.txt").read_text() == "new"
    assert not src.exists()
    assert not list(run.run_dir.glob(".*partial*"))


def test_score_order_is_trains() -> None:
    """NaN first; a missing metric is -inf before the mode's sign (Train's own rule, so a
    later trial.executor=train resume finds the list in the order it keeps)."""
    assert score_key({"acc": math.nan}, "acc", "max") == (False, -math.inf)
    assert score_key({}, "acc", "max") == (True, -math.inf) < score_key({"acc": -5.0}, "acc", "max")
    assert score_key({}, "loss", "min") == (True, math.inf)
    assert score_key({"loss": 0.1}, "loss", "min") > score_key({"loss": 0.2}, "loss", "min")
    assert score_key({"acc": np.float32(0.5)}, "acc", "max") == (True, 0.5)  # numpy's numbers
    assert score_key({"val": {"acc": 0.9}}, "val/acc", "max") == (True, 0.9)  # nested, as Ray
    with pytest.raises(ValueError, match="acc='high' is not a number"):
        score_key({"acc": "high"}, "acc", "max")


def test_the_budgets_last_report_waits_for_the_loop_to_return(tmp_path: Path, handed) -> None:
    """Tune stops a trial inside the report that reaches scheduler.max_t; handing it over only
    when the loop returns (or reports again) lets the loop's code after it run."""
    run = _run(tmp_path, budget=2)
    run.report({"epoch": 1, "acc": 0.5})
    run.report({"epoch": 2, "acc": 0.6})
    assert [h["epoch"] for h in handed] == [1] and run.pending["epoch"] == 2
    # Past the budget: the pending one goes first (in a trial, Tune stops the loop there).
    run.report({"epoch": 3, "acc": 0.7})
    assert [h["epoch"] for h in handed] == [1, 2] and run.pending["epoch"] == 3
    run.flush()
    assert run.pending is None and [h["epoch"] for h in handed] == [1, 2, 3]


def test_tensors_in_metrics_are_refused_as_ray_train_refuses_them(tmp_path: Path, handed) -> None:
    import ray.train
    import torch

    from sweeps._ray.train_fn import serving

    run = _run(tmp_path)
    with serving(name="t1", report=run.report, get_checkpoint=run.checkpoint,
                 reported=run.reported, datasets={}):
        with pytest.raises(ValueError, match="hold torch tensors"):
            ray.train.report({"acc": torch.tensor(0.5)})  # every rank's report goes here
    assert handed == []


def test_an_upload_function_is_called_as_train_calls_it(tmp_path: Path) -> None:
    run = _run(tmp_path)
    calls = []

    def upload(checkpoint, name):
        calls.append(name)
        target = run.run_dir / name
        target.mkdir(parents=True)
        return _checkpoint(target)

    src = _checkpoint(_source(tmp_path, "s", "x"))
    assert run._persist(src, "c1", False, upload) == run.run_dir / "c1" and calls == ["c1"]
    with pytest.raises(ValueError, match="keeps its checkpoints in .*trial.executor=train"):
        run._persist(src, "c2", False, lambda c, n: _checkpoint(tmp_path / "elsewhere"))


def test_the_loop_gets_a_process_group_of_one_and_trains_env() -> None:
    import os

    import torch
    import torch.distributed as dist

    from sweeps.trial.backends.inline import world_of_one

    before = os.environ.get("WORLD_SIZE")
    with world_of_one(use_gpu=False):
        assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_rank() == 0
        tensor = torch.ones(2)
        dist.all_reduce(tensor)
        dist.barrier()
        assert tensor.tolist() == [1.0, 1.0]
        assert (os.environ["RANK"], os.environ["WORLD_SIZE"]) == ("0", "1")
    assert not dist.is_initialized() and os.environ.get("WORLD_SIZE") == before


def test_rays_per_worker_api_is_served_in_process(tmp_path: Path) -> None:
    """ray.train.report / get_checkpoint / get_context / get_dataset_shard, as a loop written
    from Ray's docs calls them, reach the sweep; outside the block they refuse again."""
    import ray.train
    import ray.train.torch

    from sweeps._ray.train_fn import serving

    reports: list[tuple] = []
    start = _checkpoint(_source(tmp_path, "start", "s"))
    with serving(name="t1", report=lambda *a, **k: reports.append((a, k)),
                 reported=list,
                 get_checkpoint=lambda: start, datasets={"train": [1, 2]}):
        context = ray.train.get_context()
        assert (context.get_world_size(), context.get_world_rank()) == (1, 0)
        assert context.get_experiment_name() == "t1"
        assert ray.train.get_checkpoint() is start
        assert ray.train.get_dataset_shard("train") == [1, 2]
        with pytest.raises(KeyError, match="declares \\['train'\\] in experiment.datasets"):
            ray.train.get_dataset_shard("val")
        assert str(ray.train.torch.get_device()) == "cpu"
        ray.train.report({"acc": 0.5}, checkpoint=start, checkpoint_dir_name="c1")
        with pytest.raises(ValueError, match="`validation_config` was not set on the trainer"):
            ray.train.report({"acc": 0.5}, checkpoint=start, validation=True)
    (metrics, checkpoint, name), options = reports[0]
    assert (metrics, checkpoint, name) == ({"acc": 0.5}, start, "c1")
    assert options == {"delete_source": False, "upload": None}
    with pytest.raises(RuntimeError):
        ray.train.get_context()
