"""load_best: a finished sweep's model, or a clear error for anything else."""

from __future__ import annotations

import json

import pytest
import torch

from sweeps import SweepError, load_best
from sweeps.loop.checkpoint import save_checkpoint
from trainables.digits import build_mlp


def _finished_sweep(root, trial="t1"):
    ckpt = root / "train" / trial / "checkpoint_epoch_0002"
    ckpt.mkdir(parents=True)
    torch.manual_seed(0)
    model = build_mlp(hidden=8, depth=1)
    save_checkpoint(ckpt, {"model_state": model.state_dict(), "optimizer_state": {},
                           "epoch": 2, "model_factory": "trainables.digits:build_mlp",
                           "model_kwargs": {"hidden": 8, "depth": 1}})
    (root / "best.json").write_text(json.dumps({"trial_id": trial, "checkpoint": str(ckpt)}))
    return model


def test_loads_the_best_model_in_eval_mode(tmp_path) -> None:
    model = _finished_sweep(tmp_path / "sweep")
    loaded = load_best(tmp_path / "sweep")
    x = torch.rand(3, 64)
    assert not loaded.training
    assert torch.equal(loaded(x), model.eval()(x))


def test_a_moved_sweep_directory_still_loads(tmp_path) -> None:
    _finished_sweep(tmp_path / "sweep")
    (tmp_path / "sweep").rename(tmp_path / "moved")
    assert load_best(tmp_path / "moved") is not None


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "is not a directory"),
        (lambda d: d.mkdir(), "no best.json (not a sweep directory)"),
        (lambda d: (d.mkdir(), (d / "experiment_state-x.json").write_text("{}")),
         "no best.json (a sweep that has not finished)"),
        (lambda d: (d.mkdir(), (d / "best.json").write_text("null")), "saved a checkpoint"),
        (lambda d: (d.mkdir(), (d / "best.json").write_text(
            json.dumps({"trial_id": "t", "checkpoint": "/nowhere/ckpt"}))), "is gone"),
    ],
)
def test_clear_error_for_what_is_not_a_finished_sweep(tmp_path, setup, message) -> None:
    target = tmp_path / "x"
    setup(target)
    with pytest.raises(SweepError, match="load_best: .*" + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        load_best(target)
