"""Test-only trainable for the GPU-sharing and out-of-memory tests, and the overrides that make
a sweep of it out of the digits experiment.

    cfg = small_config(*memory_sweep([0, 10000], epochs=2), "scaling.num_workers=1")

Each worker writes what it saw to its trial's run directory: ``calls.rank<r>.txt`` gets a line
per call of the loop (so a test counts reruns), ``probe.rank<r>.json`` the device Ray Train gave
it, where the model ended up, ``CUDA_VISIBLE_DEVICES``, the process group's backend and world
size, and when it reached and left the rendezvous. With ``peers`` > 0, each worker waits (up to
5 minutes) in the folder ``rendezvous`` until ``peers`` workers have arrived there, so trials
that run together overlap whatever their speed: a test checks that the latest arrival came
before the earliest departure, which trials that did not run together cannot fake (no timing
threshold; the wait only ends early when all have arrived).

``alloc_gib`` GiB are allocated on the worker's device before training. On a GPU the allocation
is real (10 TB makes CUDA's caching allocator raise ``torch.OutOfMemoryError``). A CPU has no such
allocator to exhaust, so there a non-zero ``alloc_gib`` raises the error that allocator raises,
and the CPU tests exercise everything after it.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import ray.train
import ray.train.torch
import torch
import torch.distributed as dist

from sweeps import trial_context


def _rendezvous(folder: Path, name: str, peers: int, timeout_s: float = 300.0) -> int:
    """Wait until ``peers`` workers have arrived in ``folder``; how many had."""
    folder.mkdir(parents=True, exist_ok=True)
    mine = folder / name
    mine.touch()
    deadline, seen = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        seen = max(seen, len(list(folder.iterdir())))
        if seen >= peers:
            break
        time.sleep(0.2)
    return seen


def _allocate(gib: float, device: torch.device) -> None:
    if device.type == "cuda":
        block = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=device)
        del block
        return
    raise torch.cuda.OutOfMemoryError(
        f"CUDA out of memory. Tried to allocate {gib:.2f} GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 78.61 GiB is free. Including non-PyTorch memory, this process has "
        "560.00 MiB memory in use. (raised by tests/data/memory_loop.py on a CPU)")


def train_func(config: dict) -> None:
    context, train = trial_context(), ray.train.get_context()
    rank, run = train.get_world_rank(), Path(trial_context().run_dir)
    run.mkdir(parents=True, exist_ok=True)
    with open(run / f"calls.rank{rank}.txt", "a") as f:
        f.write("called\n")
    config.get("copy")  # the grid's copy number: read, so the unread-keys check stays quiet
    device = ray.train.torch.get_device()
    if float(config.get("alloc_gib", 0)):
        _allocate(float(config["alloc_gib"]), device)
    model = ray.train.torch.prepare_model(torch.nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    started, seen = time.time(), 0
    if int(config.get("peers", 0)):
        seen = _rendezvous(Path(config["rendezvous"]), f"{context.trial_id}.rank{rank}",
                           int(config["peers"]))
    left = time.time()
    (run / f"probe.rank{rank}.json").write_text(json.dumps({
        "device": str(device), "model_device": str(next(model.parameters()).device),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "backend": dist.get_backend() if dist.is_initialized() else None,
        "world_size": train.get_world_size(), "started": started, "left": left,
        "peers_seen": seen}))
    for epoch in range(1, int(config.get("epochs", 2)) + 1):
        x = torch.randn(64, 4, device=device)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()  # with 2+ workers: DDP's all-reduce through the process group
        optimizer.step()
        ray.train.report({"epoch": epoch, "val_acc": 0.5 + 0.1 * epoch, "loss": loss.item()})


def memory_sweep(alloc_gib: list[float], epochs: int = 2, copies: int = 1,
                 **params: object) -> list[str]:
    """Overrides turning the digits experiment into a grid over ``alloc_gib`` of this loop
    (``copies`` trials per value, every trial ``epochs`` epochs, no early stopping); ``params``:
    the loop's other params (``peers``, ``rendezvous``)."""
    copy = ([f"+experiment.search_space.copy='choice({', '.join(map(str, range(copies)))})'",
             "+experiment.params.copy=0"] if copies > 1 else [])
    drop = [f"~experiment.search_space.{k}" for k in ("lr", "hidden", "depth", "dropout",
                                                       "batch_size")]
    values = ", ".join(f"{v:g}" for v in alloc_gib)
    return ["experiment.trainable=tests.integration.memory_loop:train_func", *drop,
            f"+experiment.search_space.alloc_gib='choice({values})'",
            "+experiment.params.alloc_gib=0", "search=grid", "scheduler=none",
            f"scheduler.max_t={epochs}", f"+experiment.params.epochs={epochs}", *copy,
            *[f"+experiment.params.{k}={v}" for k, v in params.items()]]
