"""Ray Data ingestion, as Ray Train's ResNet/MNIST guides write it, on the bundled 8x8 digits.

    python -m sweeps +experiment=digits_data

The experiment's ``datasets`` entries call ``digits(split=...)`` once per sweep, on the driver;
every trial's ``TorchTrainer`` gets the datasets through ``datasets=`` and each worker reads its
split with ``ray.train.get_dataset_shard("train").iter_torch_batches(...)``. The loop imports
nothing from ``sweeps``: copy this file into your project as a starting point (point
``experiment.datasets`` at your own function, or at parquet/csv files).

Checkpoints are ``model.pt`` files (model, optimizer, epoch, the model's shape), written by
rank 0; ``load_model`` rebuilds the network from one, which is what the experiment's
``model_loader`` names, so the best is registered in MLflow and ``sweeps.load_best`` and
``sweeps.predict`` work on it. Rows are ``{"x": 64 floats in [0, 1], "y": label}``.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np
import ray.data
import ray.train
import ray.train.torch
import torch
from ray.train import Checkpoint
from torch import nn

__all__ = ["digits", "build_model", "train_func", "load_model"]


def digits(split: str = "train", val_fraction: float = 0.2, seed: int = 0) -> ray.data.Dataset:
    """The ``split`` ("train" or "val") of scikit-learn's digits as a Ray Dataset of
    ``{"x": float32[64], "y": int}`` rows (the same fixed split for every call)."""
    from sklearn.datasets import load_digits

    if split not in ("train", "val"):
        raise ValueError(f"split={split!r}: use 'train' or 'val'")
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_val = int(round(len(x) * val_fraction))
    rows = order[:n_val] if split == "val" else order[n_val:]
    return ray.data.from_items([{"x": x[i], "y": int(data.target[i])} for i in rows])


def build_model(hidden: int = 128, dropout: float = 0.1) -> nn.Module:
    """64 -> hidden -> hidden -> 10 logits."""
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(hidden, 10))


def load_model(checkpoint_dir: str) -> nn.Module:
    """The network a checkpoint of ``train_func`` holds, in eval mode.

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> torch.save({"model": build_model(16).state_dict(), "hidden": 16, "dropout": 0.1},
        ...            os.path.join(d, "model.pt"))
        >>> load_model(d)(torch.zeros(2, 64)).shape
        torch.Size([2, 10])
    """
    state = torch.load(os.path.join(checkpoint_dir, "model.pt"), map_location="cpu")
    model = build_model(state["hidden"], state["dropout"])
    model.load_state_dict(state["model"])
    return model.eval()


def train_func(config: dict[str, Any]) -> None:
    """Per-worker loop: train on this worker's split of "train"; evaluate on "val", which the
    experiment does not split (``datasets_to_split: [train]``), so every worker computes
    ``val_acc`` over the whole validation set and rank 0's report is exact."""
    hidden, dropout = config["hidden"], config["dropout"]
    batch_size, epochs = config["batch_size"], config["epochs"]
    model = ray.train.torch.prepare_model(build_model(hidden, dropout))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"],
                                  weight_decay=config["weight_decay"])
    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            state = torch.load(os.path.join(checkpoint_dir, "model.pt"), map_location="cpu")
            getattr(model, "module", model).load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start = state["epoch"] + 1

    device = ray.train.torch.get_device()
    train_shard = ray.train.get_dataset_shard("train")
    val_data = ray.train.get_dataset_shard("val")  # whole: not in datasets_to_split
    for epoch in range(start, epochs):
        model.train()
        train_loss = 0.0
        for i, batch in enumerate(train_shard.iter_torch_batches(batch_size=batch_size,
                                                                 device=device)):
            if i == 0 and len(batch["y"]) < batch_size:
                raise ValueError(
                    f"batch_size={batch_size} is larger than this worker's split of the train "
                    f"dataset ({len(batch['y'])} rows): every epoch would be one short batch; "
                    f"use batch_size <= {len(batch['y'])} or fewer workers")
            loss = nn.functional.cross_entropy(model(batch["x"]), batch["y"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_loss = loss.item()
        val_acc, val_loss = _evaluate(model, val_data, device)
        metrics = {"val_acc": val_acc, "val_loss": val_loss, "train_loss": train_loss,
                   "epoch": epoch}
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            checkpoint = None
            if ray.train.get_context().get_world_rank() == 0:
                torch.save({"model": getattr(model, "module", model).state_dict(),
                            "optimizer": optimizer.state_dict(), "epoch": epoch,
                            "hidden": hidden, "dropout": dropout},
                           os.path.join(temp_checkpoint_dir, "model.pt"))
                checkpoint = Checkpoint.from_directory(temp_checkpoint_dir)
            ray.train.report(metrics, checkpoint=checkpoint)


def _evaluate(model: nn.Module, data: Any, device: torch.device) -> tuple[float, float]:
    """(accuracy, mean loss) over ``data`` (this worker's whole validation set)."""
    model.eval()
    correct = loss_sum = rows = 0.0
    with torch.no_grad():
        for batch in data.iter_torch_batches(batch_size=256, device=device):
            logits = model(batch["x"])
            correct += (logits.argmax(1) == batch["y"]).sum().item()
            loss_sum += nn.functional.cross_entropy(logits, batch["y"], reduction="sum").item()
            rows += len(batch["y"])
    return correct / rows, loss_sum / rows
