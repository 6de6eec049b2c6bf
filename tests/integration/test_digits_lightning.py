"""``+experiment=digits_lightning``: the Lightning loop of Ray's guide, swept end to end.

A 2-trial sweep of 2 epochs on 2 DDP workers per trial, on the default executor (``auto``:
inline, rank 1 in a peer process) with a real MLflow store on SQLite: both trials report
``val_acc`` every epoch (Lightning's 0-based ``current_epoch``, once each), the best trial's
checkpoint holds Lightning's ``checkpoint.ckpt`` of the epoch it was reported at, and the
registered model loads with one ``mlflow.pytorch.load_model`` call and scores what the trial
reported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from sweeps import compose, load_best, run_sweep
from trainables.digits_lightning import load_model, load_split

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sweep(tmp_path_factory, ray_cluster):
    root = tmp_path_factory.mktemp("digits_lightning")
    cfg = compose("digits_lightning", [
        "search.num_samples=2", "scheduler.max_t=2", "scaling.num_workers=2", "sweep.seed=0",
        # what learns something in 2 epochs: 22 steps an epoch per worker, no tiny rates
        "experiment.search_space.lr='tag(log, interval(0.1, 0.3))'",
        "experiment.search_space.batch_size=32",
        f"sweep.dir={root / 'sweep'}", f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
    ])
    assert cfg.trial.executor == "auto" and cfg.experiment.params["epochs"] == 2
    return run_sweep(cfg), root


def _padded_accuracy(model: torch.nn.Module) -> float:
    """``val_acc`` as 2 ranks compute it: Lightning's DistributedSampler (no shuffle) pads the
    359 validation images to 360 with image 0, each rank averages its 180, and ``sync_dist``
    averages the ranks."""
    _, _, x_val, y_val = load_split()
    with torch.no_grad():
        right = (model(torch.from_numpy(x_val)).argmax(1).numpy() == y_val).astype(np.float64)
    padded = np.concatenate([right, right[:1]])
    return float((padded[0::2].mean() + padded[1::2].mean()) / 2)


def test_both_trials_report_val_acc_every_epoch(sweep) -> None:
    result, _ = sweep
    assert not result.failed
    table = result.summary.table
    assert len(table) == 2 and set(table["status"]) <= {"completed", "stopped"}, table
    assert result.best is not None and result.best["value"] == table["val_acc"].max()
    assert result.best["value"] > 0.7, table  # 10 classes: chance is 0.1
    for trial in result.results:  # RayTrainReportCallback: current_epoch, 0-based, once each
        reports = trial.metrics_dataframe
        assert {"val_acc", "val_loss", "train_loss", "step"} <= set(reports.columns)
        epochs = list(reports["epoch"])
        assert epochs == list(range(len(epochs))) and 1 <= len(epochs) <= 2, epochs


def test_the_best_checkpoint_is_lightnings_of_the_best_epoch(sweep) -> None:
    result, _ = sweep
    best = result.best
    checkpoint = Path(best["checkpoint"]) / "checkpoint.ckpt"
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert state["epoch"] + 1 == best["epoch"]  # the sweep counts Lightning's epoch 0 as 1
    assert state["hyper_parameters"]["lr"] == pytest.approx(best["config"]["lr"])
    model = load_model(best["checkpoint"])
    assert _padded_accuracy(model) == pytest.approx(best["value"], abs=1e-6)
    assert isinstance(load_best(result.sweep_dir), type(model))  # best.json names the loader


def test_the_registered_model_loads_in_one_call(sweep) -> None:
    import mlflow
    import mlflow.pytorch
    from mlflow import MlflowClient

    result, root = sweep
    client = MlflowClient(f"sqlite:///{root / 'mlflow.db'}")
    versions = client.search_model_versions("name='digits_lightning'")
    assert [int(v.version) for v in versions] == [1]
    run = client.get_run(versions[0].run_id)
    assert run.data.tags["sweeps.trial_id"] == result.best["trial_id"]
    mlflow.set_tracking_uri(client.tracking_uri)
    model = mlflow.pytorch.load_model("models:/digits_lightning/1").eval()
    assert type(model).__name__ == "DigitsClassifier"
    assert _padded_accuracy(model) == pytest.approx(result.best["value"], abs=1e-6)
