"""A loop that asks Ray Train to validate its checkpoint (``report(..., validation=True)``), as
Ray's checkpoint-validation guide does, on a trainer without a ``validation_config``."""

from __future__ import annotations

import tempfile

import ray.train

from tests.conformance.observe import note


def train_func(config):
    note(config, "start")
    with tempfile.TemporaryDirectory() as tmp:
        ray.train.report({"loss": 1.0, "epoch": 1},
                         checkpoint=ray.train.Checkpoint.from_directory(tmp), validation=True)
