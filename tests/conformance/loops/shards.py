"""Per-rank checkpoint shards: every rank writes its own file and reports it; Ray Train puts
every rank's files in one checkpoint. In epoch 2 only the last rank passes a checkpoint (a
checkpoint of that rank's files alone); a restart reads every shard back."""

from __future__ import annotations

import tempfile
from pathlib import Path

import ray.train
import ray.train.collective

from tests.conformance.observe import note


def train_func(config):
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    checkpoint = ray.train.get_checkpoint()
    note(config, "start", checkpoint=checkpoint is not None)
    for epoch in range(1, config["epochs"] + 1):
        with tempfile.TemporaryDirectory() as tmp:
            shard = Path(tmp, f"shard-{rank}-of-{world}.txt")
            shard.write_text(f"epoch {epoch}, rank {rank}")
            Path(tmp, "nested").mkdir()
            Path(tmp, "nested", f"part{rank}.bin").write_bytes(bytes([rank]) * (epoch + rank))
            mine = epoch != 2 or rank == world - 1
            ray.train.report({"loss": 1.0 / epoch, "epoch": epoch},
                             checkpoint=ray.train.Checkpoint.from_directory(tmp) if mine
                             else None)
        # Every rank's part is there once every rank's report returned (right after its own
        # report, a Train worker may see the checkpoint before another rank's upload ends).
        ray.train.collective.barrier()
        latest = ray.train.get_checkpoint()
        with latest.as_directory() as directory:
            note(config, "after_report", epoch=epoch, files=sorted(
                str(p.relative_to(directory)) for p in Path(directory).rglob("*")
                if p.is_file()))
