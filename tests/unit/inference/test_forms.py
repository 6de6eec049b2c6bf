"""Which form a checkpoint is in (one rule: hf_checkpoint_dir), on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from sweeps.inference.hf import processor_kind, task_of
from sweeps.loop.checkpoint import hf_checkpoint_dir, model_form, save_checkpoint
from tests.unit.inference.hf_files import quiet, text_checkpoint, vit_checkpoint


def _config(directory: Path, content: object) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(content if isinstance(content, str)
                                           else json.dumps(content))
    return directory


@pytest.mark.parametrize(
    ("layout", "found"),
    [
        ({"config.json": {"architectures": ["BertForSequenceClassification"]}}, "."),
        ({"config.json": {"model_type": "vit"}}, "."),
        ({"checkpoint/config.json": {"model_type": "bert"}}, "checkpoint"),
        # both: the checkpoint root wins (it is what the loop saved itself)
        ({"config.json": {"model_type": "bert"}, "checkpoint/config.json": {"model_type": "x"}},
         "."),
        ({"config.json": {"lr": 0.1}}, None),  # a loop's own config.json, not a model's
        ({"config.json": "{not json"}, None),
        ({"config.json": ["model_type"]}, None),
        ({"other/config.json": {"model_type": "bert"}}, None),
        ({}, None),
    ],
)
def test_hf_checkpoint_dir(tmp_path: Path, layout: dict, found: str | None) -> None:
    for rel, content in layout.items():
        _config((tmp_path / rel).parent, content)
    assert hf_checkpoint_dir(tmp_path) == (None if found is None else tmp_path / found)


def test_hf_checkpoint_dir_of_nothing() -> None:
    assert hf_checkpoint_dir(None) is None and hf_checkpoint_dir("") is None
    assert hf_checkpoint_dir("/nonexistent/x") is None


def test_model_form_of_each_kind_of_checkpoint(tmp_path: Path) -> None:
    quiet()
    sweeps_ckpt = tmp_path / "sweeps"
    sweeps_ckpt.mkdir()
    save_checkpoint(sweeps_ckpt, {"model_state": {}, "model_factory": "m:f", "model_kwargs": {},
                                  "epoch": 1})
    hf_root = text_checkpoint(tmp_path / "hf_root")
    ray_layout = tmp_path / "ray"
    text_checkpoint(ray_layout / "checkpoint")
    own = tmp_path / "own"
    own.mkdir()
    torch.save({"w": 1}, own / "model.pt")
    assert [model_form(p, None) for p in (sweeps_ckpt, hf_root, ray_layout, own)] == [
        "sweeps", "transformers", "transformers", "files"]
    assert model_form(ray_layout, "pkg.mod:load") == "loader"  # the user's loader wins
    assert model_form(None, None) == "none"


def test_processor_and_task_of_real_checkpoints(tmp_path: Path) -> None:
    quiet()
    text = text_checkpoint(tmp_path / "text")
    image = vit_checkpoint(tmp_path / "image")
    assert processor_kind(text) == "tokenizer" and processor_kind(image) == "image_processor"
    (tmp_path / "bare").mkdir()
    assert processor_kind(tmp_path / "bare") is None
    assert [task_of(a) for a in ("BertForSequenceClassification", "ViTForImageClassification",
                                 "BertForMaskedLM", None)] == [
        "text-classification", "image-classification", None, None]


def test_offline_is_undone_after_loading(monkeypatch) -> None:
    """Loading a best model must not leave the caller's process unable to download models."""
    from sweeps.inference.hf import OFFLINE_ENV, offline

    for name in OFFLINE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")  # the user's own choice
    with offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "0"
    assert "HF_HUB_OFFLINE" not in os.environ and os.environ["TRANSFORMERS_OFFLINE"] == "0"
