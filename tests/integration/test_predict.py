"""Batch inference after a sweep, for real: a digits sweep's best checkpoint over a Ray Dataset
and through the CLI on a parquet file; a Hugging Face text checkpoint in Ray Train's layout,
and the same model logged by the sweep's MLflow sink and predicted from its models:/ URI.

Each Ray instance started here is shut down by the ``local_ray`` fixture (2 CPUs, no
dashboard); the sweep starts and stops its own, the CLI its own in a subprocess.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sweeps
from trainables.digits import load_split

pytestmark = pytest.mark.slow
# The small sweep, its learning rate kept where two epochs learn (the experiment's whole range,
# 1e-4 to 0.5, left a 2-trial sweep at chance on one seed of three): predictions are checked
# against a model that learned.
SWEEP = ("experiment.search_space.lr='tag(log, interval(0.02, 0.2))'",)
# Its best reaches 0.524 to 0.864 over seeds 0-4 (bench/results/accuracy_bars.json, digits;
# chance is 0.1): the bar stands 0.12 below the lowest seed.
ACCURACY_BAR = 0.4


@pytest.fixture
def local_ray() -> Iterator[Callable[[], contextlib.AbstractContextManager[None]]]:
    """``with local_ray():`` a private 2-CPU Ray, shut down on the way out (and after the test
    whatever happened)."""
    import ray

    @contextlib.contextmanager
    def start() -> Iterator[None]:
        if ray.is_initialized():
            ray.shutdown()
        ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()

    try:
        yield start
    finally:
        if ray.is_initialized():
            ray.shutdown()


def _validation() -> tuple[np.ndarray, np.ndarray]:
    _, _, x_val, y_val = load_split()
    return x_val, y_val


def test_digits_best_checkpoint_predicts_on_ray_data_and_from_the_cli(small_config, local_ray,
                                                                      tmp_path: Path) -> None:
    import ray

    result = sweeps.run_sweep(small_config(*SWEEP))
    best = result.best
    assert best is not None and best["model_form"] == "sweeps"
    x_val, y_val = _validation()

    with local_ray():
        ds = ray.data.from_items([{"x": x, "y": int(y)} for x, y in zip(x_val, y_val,
                                                                          strict=True)])
        start = time.perf_counter()
        out = sweeps.predict(result.sweep_dir, ds, batch_size=128).to_pandas()
        wall = time.perf_counter() - start
        assert list(out.columns) == ["x", "y", "prediction", "score"]
        accuracy = float((out["prediction"] == out["y"]).mean())
        # What the small sweep reaches, and exactly what it measured for this checkpoint.
        assert accuracy > ACCURACY_BAR, accuracy
        assert accuracy == pytest.approx(best["value"], abs=1e-6)
        assert ((out["score"] > 0) & (out["score"] <= 1)).all()
        print(f"\npredict: {len(out)} rows in {wall:.2f} s ({len(out) / wall:.0f} rows/s, "
              "1 actor, model load and Ray Data start-up included)")

        # Two actors over a parquet file on 2 CPUs: sized so the read task still gets a CPU.
        data = tmp_path / "digits.parquet"
        pd.DataFrame({"features": list(x_val), "y": y_val}).to_parquet(data)
        written = sweeps.predict(result.sweep_dir, str(data), output=tmp_path / "preds_lib",
                                 concurrency=2)
        assert written.count() == len(y_val)
        # A column that is not in the data: one line, nothing written.
        with pytest.raises(sweeps.SweepError) as info:
            sweeps.predict(result.sweep_dir, str(data), output=tmp_path / "preds_bad",
                           column="pixels")
        assert str(info.value) == ("predict: the data has no column 'pixels'; its columns: "
                                   "features, y")
        assert not (tmp_path / "preds_bad").exists()
    back = pd.read_parquet(tmp_path / "preds_lib")
    assert float((back["prediction"] == back["y"]).mean()) == pytest.approx(accuracy, abs=1e-6)
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]

    env = {**os.environ, "RAY_ADDRESS": "", "PYTHONPATH": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", "predict", str(result.sweep_dir),
                           "--input", str(data), "--output", str(tmp_path / "preds_cli")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"predicted {len(y_val)} rows with {result.sweep_dir}; wrote "
                               f"{tmp_path / 'preds_cli'} (parquet); ")
    assert len(lines) == 6 and all(line.startswith("  prediction=") for line in lines[1:])
    cli_out = pd.read_parquet(tmp_path / "preds_cli")
    assert sorted(cli_out["prediction"]) == sorted(back["prediction"])
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def test_a_transformers_checkpoint_predicts_directly_and_from_the_registry(local_ray,
                                                                          tmp_path: Path) -> None:
    import ray

    from sweeps.tracking.mlflow_sink import MLflowSink
    from tests.unit.inference.hf_files import LABELS, TEXTS, quiet, text_checkpoint

    quiet()
    checkpoint = tmp_path / "train" / "t1" / "checkpoint_000001"
    text_checkpoint(checkpoint / "checkpoint")  # RayTrainReportCallback's layout
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink = MLflowSink(uri, "hf", tmp_path / "tracking", model_name="hf_text")
    (tmp_path / "tracking").mkdir()
    for record in ({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "u", "params": {},
                    "config_yaml": "", "search_space": {}, "tags": {}, "ts": 1},
                   {"op": "trial_start", "trial": "t1", "params": {}, "ts": 2},
                   {"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 3},
                   {"op": "sweep_end", "summary_csv": None, "status": "FINISHED", "tags": {},
                    "ts": 4, "best": {"trial_id": "t1", "metric": "eval_accuracy",
                                      "value": 0.5, "epoch": 1, "checkpoint": str(checkpoint),
                                      "model_form": "transformers"}}):
        sink.apply(record)
    assert sink.state["model_logged"].startswith("models:/")

    texts = TEXTS * 20
    with local_ray():
        ds = ray.data.from_items([{"text": t, "id": i} for i, t in enumerate(texts)])
        direct = sweeps.predict(checkpoint, ds, batch_size=32).to_pandas()
        registry = sweeps.predict("models:/hf_text/1", ds, tracking_uri=uri,
                                  output=tmp_path / "preds").to_pandas()
    assert list(direct.columns) == ["text", "id", "prediction", "label", "score"]
    assert len(direct) == len(texts) and set(direct["label"]) <= set(LABELS.values())
    assert (direct["label"] == direct["prediction"].map(LABELS)).all()
    # The logged model is the checkpoint: the same classes for every text.
    assert direct.sort_values("id")["prediction"].tolist() == registry.sort_values("id")[
        "prediction"].tolist()
    model, tokenizer = sweeps.load_best(checkpoint)
    import torch

    with torch.no_grad():
        logits = model(**tokenizer(TEXTS, padding=True, return_tensors="pt")).logits
    assert direct.sort_values("id")["prediction"].tolist()[:len(TEXTS)] == logits.argmax(
        dim=1).tolist()
    assert len(pd.read_parquet(tmp_path / "preds")) == len(texts)
