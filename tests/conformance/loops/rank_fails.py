"""A loop that fails on rank 1 only, as ``config["where"]`` says: inside a collective (rank 1
raises in the middle of its epoch while rank 0 waits in DDP's gradient all-reduce), before the
loop's own ``dist.all_reduce`` of the epoch's loss (rank 0 waits in it), or outside one (rank 1
raises before its report while rank 0 waits at its own)."""

from __future__ import annotations

import ray.train
import ray.train.torch
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conformance.observe import note


def train_func(config):
    rank = ray.train.get_context().get_world_rank()
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    loader = ray.train.torch.prepare_data_loader(
        DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8))
    model = ray.train.torch.prepare_model(nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for epoch in range(1, config["epochs"] + 1):
        for step, (xb, yb) in enumerate(loader):
            if rank == 1 and epoch == 2 and step == 1 and config["where"] == "collective":
                raise ValueError(f"rank 1 cannot go on: epoch {epoch}, step {step}")
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if rank == 1 and epoch == 2 and config["where"] == "all_reduce":
            raise ZeroDivisionError(f"rank 1 divided by zero in epoch {epoch}")
        mean = torch.tensor([loss.item()])
        dist.all_reduce(mean)  # the metric averaged over the ranks (rank 0 waits here)
        if rank == 1 and epoch == 2 and config["where"] == "report":
            raise KeyError(f"rank 1 lost its batch in epoch {epoch}")
        metrics = {"loss": round(mean.item() / dist.get_world_size(), 6), "epoch": epoch}
        note(config, "report", **metrics)
        ray.train.report(metrics)
