"""Ray Data ingestion as Ray Train's data guide writes it: the trainer's ``train`` dataset,
split across the workers, read with ``get_dataset_shard("train").iter_torch_batches``."""

from __future__ import annotations

import ray.data
import ray.train
import torch
import torch.distributed as dist

from tests.conformance.observe import note


def make_dataset():
    return ray.data.range(48)


def train_func(config):
    shard = ray.train.get_dataset_shard("train")
    for epoch in (1, 2):
        rows, total = 0, 0
        for batch in shard.iter_torch_batches(batch_size=8):
            rows, total = rows + len(batch["id"]), total + int(batch["id"].sum())
        seen = torch.tensor([float(rows), float(total)])
        dist.all_reduce(seen)
        note(config, "epoch", epoch=epoch, rows=int(seen[0]), total=int(seen[1]))
        ray.train.report({"loss": 1.0 / epoch, "epoch": epoch})
