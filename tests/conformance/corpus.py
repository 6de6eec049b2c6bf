"""The conformance corpus: every loop the suite runs on every trial backend.

    LOOPS["lightning_ddp"].trainable       # 'tests.conformance.loops.lightning_ddp:train_func'

Adding a loop is one file in ``loops/`` (a ``train_func(config)`` written as Ray's guides
write it, noting what it observes with ``tests.conformance.observe.note``) and one line here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Loop:
    name: str  # the test id; its file in loops/ unless ``file`` names another
    metric: str  # the sweep's experiment.metric (minimized)
    compared_metrics: tuple[str, ...]  # the reported keys the loop controls
    params: dict[str, Any] = field(default_factory=dict)  # train_loop_config besides lr
    file: str | None = None  # loops/<file>.py, when several entries run one loop
    max_failures: int = 0  # restarts of a failed run (Train's FailureConfig.max_failures)
    dataset: bool = False  # the trainer's "train" dataset is the file's make_dataset()
    # The loop calls what the inline backend does not serve (sweeps.trial.backends.unserved): under
    # trial.executor=auto its trials run as Ray Train runs, saying so with this call's name.
    routed: str | None = None
    failing_rank: int | None = None  # the rank whose own error fails the run (of several)
    workers: tuple[int, ...] = (1, 2)  # the worker counts it runs with

    @property
    def module(self) -> str:
        return f"tests.conformance.loops.{self.file or self.name}"

    @property
    def trainable(self) -> str:
        return f"{self.module}:train_func"

    def function(self) -> Callable[[dict], None]:
        return importlib.import_module(self.module).train_func


LOOPS = {loop.name: loop for loop in [
    Loop("torch_ddp", "loss", ("loss", "epoch"), {"epochs": 3}, max_failures=1),
    Loop("shards", "loss", ("loss", "epoch"), {"epochs": 3}),
    Loop("context", "loss", ("loss", "epoch")),
    Loop("lightning_ddp", "train_loss", ("train_loss", "val_loss", "epoch", "step"),
         {"epochs": 2}),
    Loop("transformers_trainer", "eval_loss", ("eval_loss", "eval_accuracy", "epoch", "step"),
         {"num_train_epochs": 2, "n_train": 64, "n_eval": 32, "per_device_train_batch_size": 16,
          "learning_rate": 0.003}),
    Loop("ray_data", "loss", ("loss", "epoch"), dataset=True),
    Loop("rank_fails_in_collective", "loss", ("loss", "epoch"),
         {"epochs": 3, "where": "collective"}, file="rank_fails", failing_rank=1),
    # With 1 worker these two are rank_fails_in_collective's run (no rank 1): 2 workers only.
    Loop("rank_fails_at_report", "loss", ("loss", "epoch"), {"epochs": 3, "where": "report"},
         file="rank_fails", failing_rank=1, workers=(2,)),
    Loop("rank_fails_in_all_reduce", "loss", ("loss", "epoch"),
         {"epochs": 3, "where": "all_reduce"}, file="rank_fails", failing_rank=1, workers=(2,)),
    Loop("validation", "loss", ("loss", "epoch")),
    Loop("unserved", "loss", ("loss", "epoch"),
         routed="ray.train.get_context().get_storage()"),
]}
