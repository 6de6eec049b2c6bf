"""A PyTorch Lightning loop on Ray Train, as Ray's Lightning guide writes it.

    python -m sweeps +experiment=digits_lightning    # conf/experiment/digits_lightning.yaml

``train_func(config)`` runs on every Train worker: the MLP of ``+experiment=digits`` as a
``LightningModule`` (``DigitsClassifier``) on scikit-learn's bundled 8x8 digits (the same
1,438 / 359 split, seed 0, nothing downloaded), and a ``pl.Trainer`` with Ray's
``RayDDPStrategy``, ``RayLightningEnvironment`` and ``RayTrainReportCallback``, passed through
``prepare_trainer``. Each epoch ends with a validation pass, then the callback reports
``trainer.callback_metrics`` (``val_acc``, ``val_loss``, ``train_loss``), the 0-based ``epoch``
and ``step``, with a checkpoint holding ``checkpoint.ckpt``. After an interruption the trial
resumes from ``ray.train.get_checkpoint()`` through ``trainer.fit(..., ckpt_path=...)``.

It imports nothing from ``sweeps``: copy this file into your project as a starting point.
``config`` holds the keys of ``DEFAULTS``. Deliberate divergences from the guide:

- ``logger=False``, ``enable_progress_bar=False``, ``enable_model_summary=False``: Lightning's
  default logger writes ``lightning_logs/`` into the working directory (the directory you run
  the sweep from, for an inline trial); the sweep tracks the reported metrics itself.
- the DDP sampler Lightning puts on the validation loader pads the 359 images to 360 (one
  repeated), so the reported ``val_acc`` over 2 workers can differ from the accuracy over the
  359 by at most 1/360.
- Ray is imported inside ``train_func``: the model class needs only torch and Lightning, so
  the checkpoint (``load_model``) and the model logged to MLflow load without Ray.

The best checkpoint reloads with ``load_model(checkpoint_dir)`` (``experiment.model_loader``),
which is how the sweep registers it in MLflow: ``mlflow.pytorch.load_model("models:/
digits_lightning/1")`` gives back the ``DigitsClassifier``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

__all__ = ["DEFAULTS", "DigitsClassifier", "load_split", "dataloaders", "load_model",
           "train_func"]

DEFAULTS: dict[str, Any] = {
    "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0, "batch_size": 64,
    "hidden": 128, "depth": 2, "dropout": 0.1, "epochs": 6, "seed": 0,
}
CHECKPOINT_NAME = "checkpoint.ckpt"  # RayTrainReportCallback.CHECKPOINT_NAME


@lru_cache(maxsize=1)
def load_split(val_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_val, y_val) of the bundled digits: float32 pixels in [0, 1], int64
    labels; the split of ``trainables.digits.load_split``.

    Example:
        >>> [a.shape for a in load_split()]
        [(1438, 64), (1438,), (359, 64), (359,)]
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_val = int(round(len(x) * val_fraction))
    return x[order[n_val:]], y[order[n_val:]], x[order[:n_val]], y[order[:n_val]]


def dataloaders(batch_size: int) -> tuple[DataLoader, DataLoader]:
    """(train, val) loaders over the whole split; under DDP Lightning shards both per rank
    (a ``DistributedSampler``, reshuffled every epoch for training)."""
    x_tr, y_tr, x_va, y_va = (torch.from_numpy(a) for a in load_split())
    return (DataLoader(TensorDataset(x_tr, y_tr), batch_size=batch_size, shuffle=True),
            DataLoader(TensorDataset(x_va, y_va), batch_size=512))


class DigitsClassifier(pl.LightningModule):
    """64 pixels -> ``depth`` x (Linear ``hidden``, ReLU, Dropout) -> 10 logits, trained with
    SGD; logs ``train_loss``, ``val_loss`` and ``val_acc`` per epoch, averaged over ranks.

    Example:
        >>> DigitsClassifier(hidden=16, depth=1)(torch.zeros(3, 64)).shape
        torch.Size([3, 10])
    """

    def __init__(self, hidden: int = 128, depth: int = 2, dropout: float = 0.1,
                 lr: float = 0.05, momentum: float = 0.9, weight_decay: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()  # checkpoint.ckpt rebuilds the model from them
        layers: list[nn.Module] = []
        width = 64
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
            width = hidden
        self.net = nn.Sequential(*layers, nn.Linear(width, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True,
                 batch_size=len(y))
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True,
                 batch_size=len(y))
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean(), sync_dist=True,
                 batch_size=len(y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        h = self.hparams
        return torch.optim.SGD(self.parameters(), lr=h.lr, momentum=h.momentum,
                               weight_decay=h.weight_decay)


def load_model(checkpoint_dir: str) -> DigitsClassifier:
    """The model a checkpoint of ``train_func`` holds, on CPU in eval mode
    (``experiment.model_loader``: the sweep logs and registers it in MLflow with it).

    Example:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> trainer = pl.Trainer(max_epochs=0, logger=False, enable_checkpointing=False)
        >>> trainer.strategy.connect(DigitsClassifier(hidden=8, depth=1))
        >>> trainer.save_checkpoint(os.path.join(d, "checkpoint.ckpt"))
        >>> load_model(d).hparams.hidden, load_model(d).training
        (8, False)
    """
    path = os.path.join(checkpoint_dir, CHECKPOINT_NAME)
    return DigitsClassifier.load_from_checkpoint(path, map_location="cpu").eval()


def train_func(config: dict[str, Any]) -> None:
    """Per-worker loop (Ray Train's ``train_loop_per_worker``) of ``digits_lightning``."""
    import ray.train
    from ray.train.lightning import (
        RayDDPStrategy,
        RayLightningEnvironment,
        RayTrainReportCallback,
        prepare_trainer,
    )

    c = {**DEFAULTS, **config}
    torch.manual_seed(int(c["seed"]))  # the same initial weights on every rank
    model = DigitsClassifier(hidden=int(c["hidden"]), depth=int(c["depth"]),
                             dropout=float(c["dropout"]), lr=float(c["lr"]),
                             momentum=float(c["momentum"]),
                             weight_decay=float(c["weight_decay"]))
    train_loader, val_loader = dataloaders(int(c["batch_size"]))
    trainer = pl.Trainer(
        max_epochs=int(c["epochs"]),
        devices="auto",
        accelerator="auto",
        strategy=RayDDPStrategy(),
        plugins=[RayLightningEnvironment()],
        callbacks=[RayTrainReportCallback()],  # each epoch: metrics + checkpoint.ckpt
        enable_checkpointing=False,  # the callback above checkpoints
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer = prepare_trainer(trainer)
    checkpoint = ray.train.get_checkpoint()  # handed back after a crash or a resume
    if checkpoint:
        with checkpoint.as_directory() as d:
            trainer.fit(model, train_loader, val_loader,
                        ckpt_path=os.path.join(d, CHECKPOINT_NAME))
    else:
        trainer.fit(model, train_loader, val_loader)
