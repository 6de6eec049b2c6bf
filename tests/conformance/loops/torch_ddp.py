"""Plain torch DDP as Ray Train's PyTorch guide writes it: ``prepare_model``,
``prepare_data_loader`` (a ``DistributedSampler``), a rank-0 checkpoint every epoch, and resume
from ``ray.train.get_checkpoint()``. The last rank raises once in epoch 2, so the run restarts
from epoch 1's checkpoint, as Ray Train restarts a failed worker group.

It raises only once Ray has registered epoch 1's checkpoint (``get_all_reported_checkpoints``
blocks until then). Without that wait the failure races rank 0's epoch-1 report: Ray Train
(2.60) consolidates a report only when every rank's has arrived, and a poll that finds the error
first restarts the group without it, from no checkpoint. Plain Ray Train has the same race; a
sweep's Train controller polls every 0.1 s (``trial.poll_interval_s``) instead of Ray's 2 s, so
it lands in that window more often (it did once in CI)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import ray.train
import ray.train.torch
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from tests.conformance.observe import note, stand_still


def train_func(config):
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    loader = ray.train.torch.prepare_data_loader(
        DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8, shuffle=True))
    model = ray.train.torch.prepare_model(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    start = 1
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            state = torch.load(os.path.join(checkpoint_dir, "model.pt"))
        model.module.load_state_dict(state["model"]) if world > 1 else \
            model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
    note(config, "start", epoch=start, sampler=type(loader.sampler).__name__,
         model=type(model).__name__)
    marker = Path(config["observe_dir"]) / "failed_once"
    for epoch in range(start, config["epochs"] + 1):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(xb), count + len(xb)
        if epoch == 2 and rank == world - 1 and not marker.exists():
            ray.train.get_all_reported_checkpoints()  # epoch 1's is registered: see above
            marker.write_text("once")
            raise RuntimeError("the last rank fails once, in epoch 2")
        metrics = {"loss": round(total / count, 6), "epoch": epoch}
        note(config, "report", **metrics)
        with tempfile.TemporaryDirectory() as tmp:
            saved = None
            if rank == 0:
                torch.save({"model": (model.module if world > 1 else model).state_dict(),
                            "optimizer": optimizer.state_dict(), "epoch": epoch},
                           os.path.join(tmp, "model.pt"))
                saved = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report(metrics, checkpoint=saved)
        stand_still(config, epoch)  # a test kills the sweep's driver here, once
