"""PyTorch Lightning as Ray Train's Lightning guide writes it: ``RayDDPStrategy``,
``RayLightningEnvironment``, ``RayTrainReportCallback``, ``prepare_trainer``, and a restart
resuming through ``trainer.fit(ckpt_path=<checkpoint>/checkpoint.ckpt)``."""

from __future__ import annotations

import os

import lightning.pytorch as pl
import ray.train
import ray.train.lightning
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conformance.observe import note, stand_still


class Regressor(pl.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self.layer(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class StandStill(pl.Callback):
    """After Ray's callback reported an epoch: where a test kills the sweep's driver, once."""

    def __init__(self, config) -> None:
        self.config = config

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        stand_still(self.config, trainer.current_epoch)


def train_func(config):
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    data = TensorDataset(x, x.sum(1, keepdim=True))
    train_loader = DataLoader(data, batch_size=16, shuffle=True)
    val_loader = DataLoader(data, batch_size=32)
    model = Regressor(config["lr"])
    trainer = pl.Trainer(
        max_epochs=config["epochs"],
        devices="auto",
        accelerator="auto",
        strategy=ray.train.lightning.RayDDPStrategy(),
        plugins=[ray.train.lightning.RayLightningEnvironment()],
        callbacks=[ray.train.lightning.RayTrainReportCallback(), StandStill(config)],
        enable_checkpointing=False,
        enable_progress_bar=False,
        logger=False,
    )
    trainer = ray.train.lightning.prepare_trainer(trainer)
    checkpoint = ray.train.get_checkpoint()
    ckpt_path = None
    if checkpoint:
        with checkpoint.as_directory() as ckpt_dir:
            ckpt_path = os.path.join(ckpt_dir, "checkpoint.ckpt")
            note(config, "resumed", epoch=torch.load(ckpt_path, weights_only=False)["epoch"])
            trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader,
                        ckpt_path=ckpt_path)
    else:
        trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader)
    note(config, "ended", world_size=trainer.world_size, global_rank=trainer.global_rank,
         epoch=trainer.current_epoch,
         weight=[round(float(w), 6) for w in model.layer.weight.flatten()])
