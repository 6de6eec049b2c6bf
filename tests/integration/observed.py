"""Test-only trainable: the digits MLP, slowed down and observable from outside.

Every epoch each worker writes its pid to ``<params.log_dir>/pids/<trial>-r<rank>-e<epoch>``
(so a test can kill a worker mid-epoch), sleeps ``params.epoch_sleep`` seconds (so a kill lands
inside an epoch), raises once in epoch ``params.raise_at_epoch`` if set (before training it),
trains, and rank 0 appends ``<trial> <epoch> <time>`` to ``<params.log_dir>/trained.log`` when
the epoch was trained, just before it is reported, and to ``<params.log_dir>/epochs.log`` once
the report returned (so a test can tell which epochs ran twice after a crash; a kill between the
two leaves an epoch that was trained, and perhaps reported, out of ``epochs.log``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sweeps import TrialSession
from trainables import digits


def train_observed(config: dict[str, Any]) -> None:
    import ray.train

    session = TrialSession(config)
    p = session.params
    log_dir = Path(p["log_dir"])
    (log_dir / "pids").mkdir(parents=True, exist_ok=True)
    trial = ray.train.get_context().get_experiment_name()
    model = session.build_model(digits.build_mlp, hidden=int(p.get("hidden", 32)), depth=1,
                                dropout=0.0)
    original_epochs = session.epochs

    def epochs(model: Any, optimizer: Any) -> Iterator[int]:
        for epoch in original_epochs(model, optimizer):
            (log_dir / "pids" / f"{trial}-r{session.rank}-e{epoch}").write_text(str(os.getpid()))
            time.sleep(float(p.get("epoch_sleep", 0.5)))
            marker = log_dir / f"{trial}-raised"
            if epoch == int(p.get("raise_at_epoch", 0)) and not marker.exists():
                marker.write_text(str(os.getpid()))
                raise RuntimeError(f"injected failure in epoch {epoch}")
            yield epoch
            if session.rank == 0:
                with (log_dir / "epochs.log").open("a") as f:
                    f.write(f"{trial} {epoch} {time.time():.3f}\n")

    report = session.report

    def reporting(epoch: int, metrics: dict[str, float], model: Any, optimizer: Any) -> None:
        if session.rank == 0:
            with (log_dir / "trained.log").open("a") as f:
                f.write(f"{trial} {epoch} {time.time():.3f}\n")
        report(epoch, metrics, model, optimizer)

    session.epochs = epochs  # type: ignore[method-assign]
    session.report = reporting  # type: ignore[method-assign]
    digits._fit(session, model)
