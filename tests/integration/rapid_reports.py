"""Test-only trainable, written as Ray Train's docs write a loop: it reports a loss every few
milliseconds, with no checkpoint, for ``epochs`` epochs.

A trial that ASHA stops keeps reporting: its Train run goes on until the sweep releases the
run's workers, and with ``trial.poll_interval_s=0.01`` its controller hands each of those
reports to the trial's Tune session, which no longer reads them. That is the case in which a
reused trial process used to wedge (``tests/integration/test_reused_train_process.py``).
"""

from __future__ import annotations

import time
from typing import Any

import ray.train


def train_rapid(config: dict[str, Any]) -> None:
    lr = float(config["lr"])
    for epoch in range(1, int(config.get("epochs", 40)) + 1):
        time.sleep(0.005)
        ray.train.report({"loss": 1.0 / (epoch * lr), "epoch": epoch})
