"""The trainable every benchmark runs: a small MLP trained for a fixed compute time per epoch.

    experiment.trainable=bench.workload:train  +experiment.params.epoch_s=0.5

Each epoch trains for about ``params.epoch_s`` seconds of compute (a step count timed once at
start and agreed by all ranks, since DDP needs the same count everywhere), then reports
``score`` and checkpoints through the sweeps contract (``TrialSession``), which a plain Ray
Train loop runs just as well: the plain-Ray baseline passes the same flat config, with the
epoch count as ``epochs`` (outside a sweep, ``TrialSession`` reads it there).

Every report also carries three wall-clock stamps (``time.time()`` seconds) for the phase
breakdown of ``bench.overhead``: ``t_proc_start``, when this process started (psutil, so
interpreter start and imports come after it); ``t_loop_entry``, when Ray called this function
(after Train set up the process group); ``t_report``, just before this report.
"""

from __future__ import annotations

import time
from typing import Any

import psutil
import torch
from torch import nn

from sweeps import TrialSession


def build_net(width: int = 64) -> nn.Module:
    return nn.Sequential(nn.Linear(32, width), nn.ReLU(), nn.Linear(width, 2))


def train(config: dict[str, Any]) -> None:
    stamps = {"t_loop_entry": time.time(), "t_proc_start": psutil.Process().create_time()}
    torch.set_num_threads(1)
    session = TrialSession(config)
    p = session.params
    epoch_s = float(p.get("epoch_s", 0.5))
    model = session.build_model(build_net, width=int(p.get("width", 64)))
    optimizer = torch.optim.SGD(model.parameters(), lr=float(p.get("lr", 0.05)))
    gen = torch.Generator().manual_seed(session.rank)
    x = torch.randn(256, 32, generator=gen)
    y = (x[:, 0] > 0).long()
    steps = _steps_per_epoch(session, model, optimizer, x, y, epoch_s)
    for epoch in session.epochs(model, optimizer):
        for _ in range(steps):  # the same count on every rank: DDP all-reduces each step
            loss = _step(model, optimizer, x, y)
        with torch.no_grad():
            score = (model(x).argmax(1) == y).float().mean().item()
        session.report(epoch, {"score": score, "loss": float(loss), **stamps,
                               "t_report": time.time()}, model, optimizer)


def _step(model: nn.Module, optimizer: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def _steps_per_epoch(session: TrialSession, model: nn.Module, optimizer: Any, x: torch.Tensor,
                     y: torch.Tensor, epoch_s: float) -> int:
    """Steps that take about ``epoch_s`` seconds here, agreed by all ranks (timed once).

    The fastest of six 10-step chunks: a trial times this while its neighbours still start
    (process launches and imports on the same 2 cores), and a plain average of 20 steps read
    those seconds as step cost, which made "5 s" epochs last 1.7-2.8 s."""
    chunks = []
    for _ in range(6):
        start = time.perf_counter()
        for _ in range(10):
            _step(model, optimizer, x, y)
        chunks.append(time.perf_counter() - start)
    per_step = min(chunks) / 10
    total = session.all_reduce_sum([per_step])[0]
    return max(1, round(epoch_s / (total / session.world_size)))
