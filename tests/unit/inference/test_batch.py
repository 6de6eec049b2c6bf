"""predict without Ray: the actor's work on a batch (real models), CPU sizing, and every bad
input refused before Ray starts, with nothing written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sweeps import SweepError, load_best, predict
from sweeps.inference.batch import _root_cause, actor_cpus
from sweeps.inference.bundle import resolve_source
from sweeps.inference.predictor import Predictor
from sweeps.loop.checkpoint import save_checkpoint
from tests.unit.inference.hf_files import TEXTS, quiet, text_checkpoint, vit_checkpoint
from trainables.digits import build_mlp


@pytest.fixture(autouse=True)
def _quiet() -> None:
    quiet()


def _digits_checkpoint(directory: Path) -> torch.nn.Module:
    directory.mkdir(parents=True)
    torch.manual_seed(0)
    model = build_mlp(hidden=8, depth=1).eval()
    save_checkpoint(directory, {"model_state": model.state_dict(), "optimizer_state": {},
                                "epoch": 1, "model_factory": "trainables.digits:build_mlp",
                                "model_kwargs": {"hidden": 8, "depth": 1}})
    return model


def test_a_torch_batch_gets_class_index_and_score(tmp_path: Path) -> None:
    model = _digits_checkpoint(tmp_path / "ckpt")
    predictor = Predictor(resolve_source(tmp_path / "ckpt", "predict"), "x")
    x = np.random.default_rng(0).random((5, 64)).astype(np.float32)
    out = predictor({"x": x, "id": np.arange(5)})
    with torch.no_grad():
        probs = torch.softmax(model(torch.from_numpy(x)), dim=1)
    assert out["prediction"].tolist() == probs.argmax(dim=1).tolist()
    assert np.allclose(out["score"], probs.max(dim=1).values.numpy())
    assert "label" not in out and out["id"].tolist() == list(range(5))  # input kept
    # a column of per-row arrays (how parquet list columns arrive) predicts the same
    rows = np.empty(5, dtype=object)
    rows[:] = list(x.astype(np.float64))
    assert predictor({"x": rows})["prediction"].tolist() == out["prediction"].tolist()


def test_a_text_batch_gets_readable_labels(tmp_path: Path) -> None:
    text_checkpoint(tmp_path / "ckpt" / "checkpoint")
    predictor = Predictor(resolve_source(tmp_path / "ckpt", "predict"), "text")
    texts = np.array(TEXTS + ["a text far longer than the model's sixteen positions " * 3],
                     dtype=object)
    out = predictor({"text": texts})
    model, tokenizer = load_best(tmp_path / "ckpt")
    with torch.no_grad():
        logits = model(**tokenizer(TEXTS, padding=True, return_tensors="pt")).logits
    assert out["prediction"][:-1].tolist() == logits.argmax(dim=1).tolist()
    assert set(out["label"]) <= {"neg", "pos"}
    assert ((out["score"] >= 0.5) & (out["score"] <= 1)).all()


@pytest.mark.parametrize(("channels", "shape"), [(1, (8, 8)), (3, (8, 8)), (3, (8, 8, 3)),
                                                 (1, (8, 8, 1))])
def test_an_image_batch_of_hxw_or_hxwxc_arrays(tmp_path: Path, channels: int,
                                               shape: tuple[int, ...]) -> None:
    vit_checkpoint(tmp_path / "vit", channels=channels)
    predictor = Predictor(resolve_source(tmp_path / "vit", "predict"), "image")
    images = np.random.default_rng(0).integers(0, 16, size=(4, *shape)).astype(np.float32)
    out = predictor({"image": images})
    assert "label" not in out  # ViTConfig's LABEL_i placeholders are not readable labels
    # The same images as the model's own processor takes them, channels made explicit: an
    # HxW image is one gray channel, repeated for an RGB model.
    model, processor = load_best(tmp_path / "vit")
    chw = images.reshape(4, shape[0], shape[1], -1).transpose(0, 3, 1, 2)
    chw = np.repeat(chw, channels // chw.shape[1], axis=1)
    pixels = processor(list(chw), input_data_format="channels_first", return_tensors="pt")
    with torch.no_grad():
        probs = model(**pixels).logits.softmax(dim=1)
    assert out["prediction"].tolist() == probs.argmax(dim=1).tolist()
    assert np.allclose(out["score"], probs.max(dim=1).values.numpy(), atol=1e-5)


@pytest.mark.parametrize(
    ("cluster", "concurrency", "num_cpus", "reads", "expected"),
    [
        (2, 1, None, True, 1.0),
        (2, 2, None, True, 0.5),   # leaves one CPU to read the input
        (2, 3, None, True, 0.33),
        (1, 1, None, True, 0.5),
        (16, 4, None, True, 1.0),
        (2, 2, 1.0, False, 1.0),   # an in-memory Dataset needs no read task
        (4, 2, 1.5, True, 1.5),
    ],
)
def test_actor_cpus(cluster, concurrency, num_cpus, reads, expected) -> None:
    assert actor_cpus(cluster, concurrency, num_cpus, reads) == expected


@pytest.mark.parametrize(("cluster", "concurrency", "num_cpus", "reads"),
                         [(2, 2, 1.0, True), (2, 3, 1.0, False)])
def test_actor_cpus_that_cannot_fit(cluster, concurrency, num_cpus, reads) -> None:
    with pytest.raises(SweepError, match=r"predict: \d actor\(s\) x 1 CPU need \d of the "
                       r"cluster's 2 CPUs.*lower concurrency or num_cpus"):
        actor_cpus(cluster, concurrency, num_cpus, reads)


def test_root_cause_is_the_innermost_line() -> None:
    try:
        try:
            raise KeyError("text")
        except KeyError as inner:
            raise RuntimeError("wrapped\nwith a traceback") from inner
    except RuntimeError as outer:
        assert _root_cause(outer) == "KeyError: 'text'"


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    """A sweep without best.json, an own-format sweep, an MLM checkpoint, a checkpoint, data."""
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "experiment_state-2026.json").write_text("{}")
    own = tmp_path / "own"
    ckpt = own / "train" / "t1" / "checkpoint_000001"
    ckpt.mkdir(parents=True)
    (ckpt / "model.pt").write_bytes(b"w")
    (own / "best.json").write_text(json.dumps({"trial_id": "t1", "checkpoint": str(ckpt),
                                               "model_form": "files"}))
    from transformers import BertConfig, BertForMaskedLM

    BertForMaskedLM(BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=8)).save_pretrained(
        tmp_path / "mlm")
    bare = tmp_path / "bare"  # a text classifier saved without its tokenizer
    text_checkpoint(bare)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (bare / name).unlink()
    _digits_checkpoint(tmp_path / "digits")
    (tmp_path / "data.parquet").write_text("x")
    (tmp_path / "data.txt").write_text("x")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "old.parquet").write_text("x")
    return {"root": tmp_path}


@pytest.mark.parametrize(
    ("source", "data", "output", "message"),
    [
        ("nowhere", "data.parquet", None, "predict: nowhere is not a directory"),
        ("unfinished", "data.parquet", None,
         r"predict: unfinished has no best\.json \(a sweep that has not finished\)"),
        ("own", "data.parquet", None, "predict: the checkpoint .* is in the training loop's own "
         "format, which sweeps cannot rebuild into a model; pass model_loader="),
        ("mlm", "data.parquet", None, r"predict: the Transformers model of mlm: its head "
         r"\(BertForMaskedLM\) is not a sequence or image classifier; sweeps.predict runs"),
        ("bare", "data.parquet", None, "predict: the Transformers model of bare: no "
         "tokenizer or image processor is saved beside it"),
        ("digits", "missing.parquet", None, "predict: input missing.parquet does not exist"),
        ("digits", "data.txt", None, "predict: input data.txt is of an unknown file type"),
        ("digits", "data.parquet", "taken", "predict: output taken already exists and is not "
         "an empty directory"),
    ],
)
def test_bad_input_fails_before_ray_starts_and_writes_nothing(sources, monkeypatch, source,
                                                              data, output, message) -> None:
    monkeypatch.chdir(sources["root"])
    before = sorted(p.relative_to(sources["root"]) for p in sources["root"].rglob("*"))
    with pytest.raises(SweepError, match=message) as info:
        predict(source, data, output=output)
    assert "\n" not in str(info.value)
    assert sorted(p.relative_to(sources["root"]) for p in sources["root"].rglob("*")) == before
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()
