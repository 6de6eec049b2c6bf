"""load_best beyond a TrialSession sweep: Transformers checkpoints (real save_pretrained files),
checkpoint directories given directly, and a loop's own format with a model_loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from sweeps import Pretrained, SweepError, load_best
from sweeps.loop.checkpoint import save_checkpoint
from tests.unit.inference.hf_files import TEXTS, quiet, text_checkpoint, vit_checkpoint
from trainables.digits import build_mlp

LOADER = "tests.unit.loaders:linear_from_checkpoint"


@pytest.fixture(autouse=True)
def _no_progress_bars() -> None:
    quiet()


def _sweep(root: Path, checkpoint: Path, trial: str = "t1", **best: object) -> Path:
    (root / "best.json").write_text(json.dumps({"trial_id": trial, "checkpoint": str(checkpoint),
                                                **best}))
    return root


def _ray_checkpoint(root: Path, build, trial: str = "t1") -> Path:
    """``<root>/train/<trial>/checkpoint_000001/checkpoint/``: RayTrainReportCallback's layout."""
    ckpt = root / "train" / trial / "checkpoint_000001"
    build(ckpt / "checkpoint")
    return ckpt


def _logits(model, tokenizer, texts=TEXTS) -> torch.Tensor:
    with torch.no_grad():
        return model(**tokenizer(texts, padding=True, return_tensors="pt")).logits


def test_a_transformers_sweep_loads_model_and_tokenizer(tmp_path: Path) -> None:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    ckpt = _ray_checkpoint(tmp_path / "sweep", text_checkpoint)
    _sweep(tmp_path / "sweep", ckpt, model_form="transformers")
    loaded = load_best(tmp_path / "sweep")
    assert isinstance(loaded, Pretrained)
    model, tokenizer = loaded
    assert type(model).__name__ == "BertForSequenceClassification" and not model.training
    reference = AutoModelForSequenceClassification.from_pretrained(ckpt / "checkpoint").eval()
    expected = _logits(reference, AutoTokenizer.from_pretrained(ckpt / "checkpoint"))
    assert torch.equal(_logits(model, tokenizer), expected)
    assert model.config.id2label == {0: "neg", 1: "pos"}


@pytest.mark.parametrize("pick", ["outer", "inner"])
def test_a_transformers_checkpoint_directory_loads_directly(tmp_path: Path, pick: str) -> None:
    ckpt = _ray_checkpoint(tmp_path, text_checkpoint)
    model, tokenizer = load_best(ckpt if pick == "outer" else ckpt / "checkpoint")
    assert _logits(model, tokenizer).shape == (len(TEXTS), 2)


@pytest.mark.parametrize("channels", [1, 3])
def test_an_image_model_loads_with_its_image_processor(tmp_path: Path, channels: int) -> None:
    model, processor = load_best(vit_checkpoint(tmp_path / "vit", channels=channels))
    assert type(processor).__name__.startswith("ViTImageProcessor") and not model.training
    image = np.random.default_rng(0).integers(0, 16, size=(8, 8, channels)).astype(np.float32)
    pixels = processor(images=[image], return_tensors="pt",
                       input_data_format="channels_last")["pixel_values"]
    assert pixels.shape == (1, channels, 8, 8)
    with torch.no_grad():
        assert model(pixel_values=pixels).logits.shape == (1, 10)


def test_a_moved_transformers_sweep_still_loads(tmp_path: Path) -> None:
    ckpt = _ray_checkpoint(tmp_path / "sweep", text_checkpoint)
    _sweep(tmp_path / "sweep", ckpt)
    (tmp_path / "sweep").rename(tmp_path / "moved")
    assert isinstance(load_best(tmp_path / "moved"), Pretrained)


def test_a_trialsession_checkpoint_directory_or_file_loads_directly(tmp_path: Path) -> None:
    ckpt = tmp_path / "checkpoint_epoch_0002"
    ckpt.mkdir()
    torch.manual_seed(0)
    model = build_mlp(hidden=8, depth=1).eval()
    save_checkpoint(ckpt, {"model_state": model.state_dict(), "optimizer_state": {}, "epoch": 2,
                           "model_factory": "trainables.digits:build_mlp",
                           "model_kwargs": {"hidden": 8, "depth": 1}})
    x = torch.rand(3, 64)
    for source in (ckpt, ckpt / "checkpoint.pt", str(ckpt)):
        loaded = load_best(source)
        assert isinstance(loaded, torch.nn.Module) and not loaded.training
        assert torch.equal(loaded(x), model(x))


def _own_format(ckpt: Path) -> torch.nn.Module:
    ckpt.mkdir(parents=True)
    model = torch.nn.Linear(3, 2)
    torch.save(model.state_dict(), ckpt / "weights.pt")
    return model


def test_a_loops_own_format_says_how_to_load_it(tmp_path: Path) -> None:
    ckpt = tmp_path / "sweep" / "train" / "t1" / "checkpoint_000003"
    _own_format(ckpt)
    _sweep(tmp_path / "sweep", ckpt, model_form="files", model_loader=None)
    for source in (tmp_path / "sweep", ckpt):
        with pytest.raises(SweepError, match=r"load_best: the checkpoint .*checkpoint_000003 is "
                           r"in the training loop's own format.*model_loader=.*"
                           r"experiment\.model_loader"):
            load_best(source)


def test_a_model_loader_rebuilds_a_loops_own_format(tmp_path: Path) -> None:
    ckpt = tmp_path / "sweep" / "train" / "t1" / "checkpoint_000003"
    model = _own_format(ckpt)
    x = torch.rand(4, 3)
    # Given to load_best, or recorded in best.json by a sweep that had experiment.model_loader
    # (then its checkpoint directories load too: the sweep around them says how).
    _sweep(tmp_path / "sweep", ckpt, model_form="files")
    assert torch.equal(load_best(tmp_path / "sweep", model_loader=LOADER)(x), model(x))
    _sweep(tmp_path / "sweep", ckpt, model_form="loader", model_loader=LOADER)
    for source in (tmp_path / "sweep", ckpt):
        loaded = load_best(source)
        assert not loaded.training and torch.equal(loaded(x), model(x))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("models:/nothing/1", "needs an MLflow store, and there is none at sqlite:///"),
        ("plain_dir", "has no best.json (not a sweep directory) and holds no checkpoint"),
    ],
)
def test_what_is_neither_a_sweep_nor_a_checkpoint(tmp_path: Path, source: str, message: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking._tracking_service import utils

    # MLflow's default store (sqlite:///mlflow.db here), whatever an earlier test pointed it at
    monkeypatch.setattr(utils, "_tracking_uri", None)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "plain_dir").mkdir()
    (tmp_path / "plain_dir" / "notes.txt").write_text("x")
    with pytest.raises(SweepError, match="load_best: .*" + message.replace("(", r"\(")
                       .replace(")", r"\)")):
        load_best(source)
    assert not (tmp_path / "mlflow.db").exists()  # nothing created on the way
