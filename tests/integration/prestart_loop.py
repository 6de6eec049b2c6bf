"""A loop written as Ray Train's guides write one, reporting what ``test_prestart`` compares:
when its process was created, when it reported, and torch's thread count.

    experiment.trainable=tests.integration.prestart_loop:train_func
"""

from __future__ import annotations

import os
import time

import psutil
import ray.train
import torch


def train_func(config: dict) -> None:
    created = psutil.Process().create_time()
    for epoch in range(1, int(config.get("epochs", 3)) + 1):
        deadline = time.monotonic() + float(config.get("epoch_s", 2.0))
        x = torch.randn(64, 64)
        while time.monotonic() < deadline:  # compute, as training does (not a sleep)
            x = torch.tanh(x @ x.T / 64)
        ray.train.report({"val_acc": float(x.abs().mean()), "epoch": epoch,
                          "t_proc_start": created, "t_report": time.time(),
                          "threads": torch.get_num_threads(),
                          "omp": int(os.environ.get("OMP_NUM_THREADS", "0"))})
