"""A loop that asks Ray Train for something the inline backend does not serve: the run's
``StorageContext`` (``get_context().get_storage()``, a DeveloperAPI)."""

from __future__ import annotations

import ray.train

from tests.conformance.observe import note


def train_func(config):
    storage = ray.train.get_context().get_storage()
    note(config, "storage", type=type(storage).__name__)
    ray.train.report({"loss": 1.0, "epoch": 1})
