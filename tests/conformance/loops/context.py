"""Everything Ray documents that a worker's loop can ask of Ray Train, and the collectives:
``ray.train.get_context()``, the process group and its environment variables,
``torch.distributed`` collectives, ``ray.train.collective``, ``get_device``, what
``import ray.train`` reaches, ``get_preemption_info`` and ``get_all_reported_checkpoints``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import ray.train
import ray.train.collective
import ray.train.torch
import torch
import torch.distributed as dist

from tests.conformance.observe import note


def train_func(config):
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    note(config, "context", world_size=world, world_rank=rank, local_rank=ctx.get_local_rank(),
         local_world_size=ctx.get_local_world_size(), node_rank=ctx.get_node_rank(),
         experiment_name_type=type(ctx.get_experiment_name()).__name__,
         checkpoint=ray.train.get_checkpoint() is not None,
         preemption=ray.train.get_preemption_info(),
         device=str(ray.train.torch.get_device()),
         reaches={m: hasattr(ray.train, m) for m in ("torch", "lightning", "huggingface",
                                                    "collective", "tensorflow", "xgboost")})
    note(config, "process_group", initialized=dist.is_initialized(),
         rank=dist.get_rank(), world_size=dist.get_world_size(), backend=dist.get_backend(),
         env={k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK",
                                             "LOCAL_WORLD_SIZE", "NODE_RANK")},
         master=bool(os.environ.get("MASTER_ADDR")) and bool(os.environ.get("MASTER_PORT")))
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    gathered = [torch.zeros(1) for _ in range(world)]
    dist.all_gather(gathered, torch.tensor([float(rank * 10)]))
    sent = torch.tensor([42.0 if rank == 0 else -1.0])
    dist.broadcast(sent, src=0)
    dist.barrier()
    ray.train.collective.barrier()
    shared = ray.train.collective.broadcast_from_rank_zero({"from": rank, "lr": config["lr"]})
    note(config, "collectives", all_reduce=value.item(), all_gather=[t.item() for t in gathered],
         broadcast=sent.item(), from_rank_zero=shared)
    for epoch, loss in ((1, 0.5), (2, 1.0), (3, 0.25)):  # not in order: kept by the metric
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "epoch.txt").write_text(str(epoch))
            ray.train.report({"loss": loss, "epoch": epoch},
                             checkpoint=ray.train.Checkpoint.from_directory(tmp))
    reported = ray.train.get_all_reported_checkpoints()
    note(config, "reported", count=len(reported),
         metrics=[{k: r.metrics[k] for k in ("loss", "epoch")} for r in reported],
         keys=[sorted(r.metrics) for r in reported],  # nothing a runner adds (system metrics)
         files=[sorted(os.listdir(r.checkpoint.path)) for r in reported])
