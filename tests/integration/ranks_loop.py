"""Test-only trainable, written as Ray Train's docs write a loop of several workers: DDP via
``prepare_model``, a ``DistributedSampler`` via ``prepare_data_loader``, every rank reporting
with its own part of the checkpoint, ``ray.train.collective`` and ``get_checkpoint`` to resume.

``config["fault"]``: ``raise`` makes rank 1 raise once per trial at epoch 2 (before its report,
rank 0 waiting at its own report), ``step`` makes it raise in epoch 2's first step (rank 0 then
waits in DDP's gradient all-reduce), ``kill`` makes rank 1's process kill itself at epoch 2
(as the OOM killer would); ``marker_dir`` remembers that it happened, so the restarted attempt
goes on. ``uneven``: rank 0 reports once more than rank 1 at the end (a loop bug).
"""

from __future__ import annotations

import os
import signal
import tempfile
from pathlib import Path
from typing import Any

import ray.train
import ray.train.collective
import ray.train.torch
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def train_ranks(config: dict[str, Any]) -> None:
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    assert dist.is_initialized() and (dist.get_rank(), dist.get_world_size()) == (rank, world)
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    loader = ray.train.torch.prepare_data_loader(
        DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8, shuffle=True))
    model = ray.train.torch.prepare_model(nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=float(config["lr"]))
    start = 1
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            state = torch.load(Path(d) / "model.pt")
            assert (Path(d) / f"rank{rank}.txt").read_text() == str(state["epoch"])
        getattr(model, "module", model).load_state_dict(state["model"])
        start = state["epoch"] + 1
    shared = ray.train.collective.broadcast_from_rank_zero(f"lr={config['lr']}")
    ray.train.collective.barrier()
    for epoch in range(start, int(config["epochs"]) + 1):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        total = torch.zeros(2)
        marker = Path(config["marker_dir"]) / f"{ctx.get_experiment_name()}.{config['fault']}"
        for xb, yb in loader:
            if (rank == 1 and epoch == 2 and config["fault"] == "step"
                    and not marker.exists()):
                marker.write_text("done")
                raise RuntimeError("rank 1 fails once, mid-step")
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        dist.all_reduce(total)
        if (rank == 1 and epoch == 2 and config["fault"] in ("raise", "kill")
                and not marker.exists()):
            marker.write_text("done")
            if config["fault"] == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("rank 1 fails once")
        with tempfile.TemporaryDirectory() as tmp:
            if rank == 0:
                torch.save({"model": getattr(model, "module", model).state_dict(),
                            "epoch": epoch}, Path(tmp) / "model.pt")
            (Path(tmp) / f"rank{rank}.txt").write_text(str(epoch))
            ray.train.report({"loss": float(total[0] / total[1]), "epoch": epoch,
                              "world_size": world, "resumed_from": start - 1,
                              "ddp": isinstance(model, nn.parallel.DistributedDataParallel),
                              "sampler": isinstance(loader.sampler, DistributedSampler),
                              "shared_ok": shared == f"lr={config['lr']}"},
                             checkpoint=ray.train.Checkpoint.from_directory(tmp))
    if rank == 0 and config["fault"] == "uneven":
        ray.train.report({"loss": 0.0, "epoch": int(config["epochs"]) + 1})
