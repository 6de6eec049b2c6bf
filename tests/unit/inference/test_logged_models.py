"""Best checkpoints through the MLflow sink into a SQLite store, and back in one call: a Hugging
Face one offline (transformers flavor as pipeline or components, pyfunc, load_best), and the
models:/ and runs:/ URIs load_best reads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from sweeps import Pretrained, load_best
from sweeps.tracking.mlflow_sink import MLflowSink
from tests.unit.inference.hf_files import TEXTS, quiet, text_checkpoint, vit_checkpoint

USERS_SERVER = "http://users-own-server:5000"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Hub; the caller's MLflow points at a server of their own (unreachable here: a call
    the sink makes through the global URI fails), set back afterwards (the tests themselves
    set_tracking_uri to load what was logged, as a user would)."""
    from mlflow.tracking._tracking_service import utils

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", USERS_SERVER)
    quiet()
    saved = utils._tracking_uri
    utils._tracking_uri = None  # the env var is the caller's setting, whatever ran before
    yield
    utils._tracking_uri = saved


def _sink_ends_with(tmp_path: Path, checkpoint: Path, model_name: str | None) -> MLflowSink:
    """A sweep of one trial whose best checkpoint is ``checkpoint``, replayed into the sink."""
    import mlflow

    from sweeps.loop.checkpoint import model_form

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink = MLflowSink(uri, "hf", tmp_path / "tracking", model_name=model_name)
    (tmp_path / "tracking").mkdir(exist_ok=True)
    sink.apply({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "u1", "params": {},
                "config_yaml": "", "search_space": {}, "tags": {}, "ts": 1})
    sink.apply({"op": "trial_start", "trial": "t1", "params": {"lr": 0.1}, "ts": 2})
    sink.apply({"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 3})
    sink.apply({"op": "sweep_end", "summary_csv": None, "status": "FINISHED", "tags": {},
                "ts": 4, "best": {"trial_id": "t1", "metric": "eval_accuracy", "value": 0.5,
                                  "epoch": 1, "checkpoint": str(checkpoint),
                                  "model_form": model_form(checkpoint, None)}})
    # Logging the best model left the caller's MLflow where it was.
    assert os.environ["MLFLOW_TRACKING_URI"] == USERS_SERVER
    assert mlflow.get_tracking_uri() == USERS_SERVER
    return sink


def test_a_text_classifier_is_logged_registered_and_loads_back(tmp_path: Path) -> None:
    import mlflow
    import mlflow.pyfunc
    import mlflow.transformers

    checkpoint = tmp_path / "train" / "t1" / "checkpoint_000001"
    text_checkpoint(checkpoint / "checkpoint")
    sink = _sink_ends_with(tmp_path, checkpoint, model_name="hf_text")
    parent = sink.client.get_run(sink.parent_run_id)
    assert "sweeps.model_error" not in parent.data.tags
    assert sink.state["model_logged"].startswith("models:/")
    best_run = sink.client.get_run(sink.run_id("t1"))
    assert best_run.data.tags["sweeps.best"] == "true"
    version = sink.client.get_model_version("hf_text", "1")
    assert version.run_id == sink.run_id("t1")

    mlflow.set_tracking_uri(sink.uri)
    pipeline = mlflow.transformers.load_model("models:/hf_text/1")
    answers = pipeline(TEXTS[:2])
    assert [a["label"] in ("neg", "pos") for a in answers] == [True, True]
    frame = mlflow.pyfunc.load_model("models:/hf_text/1").predict(TEXTS[:3])
    assert list(frame.columns) == ["label", "score"] and len(frame) == 3
    # sweeps' own one call: the same weights as the checkpoint, with the tokenizer
    model, tokenizer = load_best("models:/hf_text/1")
    direct, direct_tok = load_best(checkpoint)
    enc = tokenizer(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        assert torch.allclose(model(**enc).logits,
                              direct(**direct_tok(TEXTS, padding=True,
                                                  return_tensors="pt")).logits)
    # runs:/ of the best trial's run names the same model
    assert isinstance(load_best(f"runs:/{sink.run_id('t1')}/model"), Pretrained)


def test_an_image_classifier_is_logged_and_loads_back(tmp_path: Path) -> None:
    import mlflow
    import mlflow.pyfunc
    from PIL import Image

    checkpoint = vit_checkpoint(tmp_path / "vit")  # save_pretrained at the checkpoint's root
    sink = _sink_ends_with(tmp_path, checkpoint, model_name=None)  # logged, not registered
    uri = sink.state["model_logged"]
    mlflow.set_tracking_uri(sink.uri)
    model, processor = load_best(uri)
    assert type(model).__name__ == "ViTForImageClassification" and processor is not None
    image = tmp_path / "digit.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (8, 8)).astype(np.uint8)).save(
        image)
    frame = mlflow.pyfunc.load_model(uri).predict([str(image)])
    assert len(frame) == 1  # MLflow's image pipeline: paths, URLs or base64 in, top labels out
    assert sink.client.search_registered_models() == []


def test_a_head_sweeps_does_not_log_is_recorded_not_raised(tmp_path: Path) -> None:
    from transformers import BertConfig, BertForMaskedLM

    checkpoint = tmp_path / "mlm"
    BertForMaskedLM(BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1,
                               num_attention_heads=2, intermediate_size=8)).save_pretrained(
        checkpoint)
    sink = _sink_ends_with(tmp_path, checkpoint, model_name="mlm")
    parent = sink.client.get_run(sink.parent_run_id)
    assert "its head (BertForMaskedLM) is not a sequence or image classifier" in parent.data.tags[
        "sweeps.model_error"]
    assert parent.info.status == "FINISHED" and not sink.state.get("model_logged")


def test_a_trialsession_best_model_loads_from_its_runs_uri(tmp_path: Path) -> None:
    """The logged model lives in the sweep's experiment, so runs:/<best run>/model finds it."""
    from sweeps.loop.checkpoint import save_checkpoint
    from trainables.digits import build_mlp

    checkpoint = tmp_path / "checkpoint_epoch_0001"
    checkpoint.mkdir()
    model = build_mlp(hidden=8, depth=1).eval()
    save_checkpoint(checkpoint, {"model_state": model.state_dict(), "optimizer_state": {},
                                 "epoch": 1, "model_factory": "trainables.digits:build_mlp",
                                 "model_kwargs": {"hidden": 8, "depth": 1}})
    sink = _sink_ends_with(tmp_path, checkpoint, model_name="digits")
    import mlflow

    mlflow.set_tracking_uri(sink.uri)
    x = torch.rand(2, 64)
    for uri in ("models:/digits/1", f"runs:/{sink.run_id('t1')}/model"):
        assert torch.equal(load_best(uri)(x), model(x))
