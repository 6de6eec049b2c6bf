"""Test-only trainable: the digits MLP, but one worker dies once mid-run.

Each worker attempt appends ``<rank>:<first epoch it runs>`` to ``params.log``; on the first
attempt, rank ``params.crash_rank`` raises during epoch ``params.crash_epoch`` (before
reporting it), so Train must restart the worker group from the last checkpoint.

The crashing rank first waits until Train's controller has committed the previous epoch's
report. Without that wait the crash lands microseconds after the report returns, while rank 0
may still be persisting the checkpoint: Train's controller then sees rank 1's error before
rank 0's report, drops the half-collected round (Ray's worker ``poll_status`` has a "two phase
commit" TODO for this), and restarts from the epoch before. A real crash mid-epoch does not
race like that; the test is about what Train restores, not about that window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray.train

from sweeps import TrialSession
from trainables import digits


def train_crash_once(config: dict[str, Any]) -> None:
    session = TrialSession(config)
    p = session.params
    log = Path(p["log"])
    model = session.build_model(digits.build_mlp, hidden=32, depth=1, dropout=0.0)
    original_epochs = session.epochs

    def epochs(model: Any, optimizer: Any):
        first = True
        for epoch in original_epochs(model, optimizer):
            if first:
                with log.open("a") as f:
                    f.write(f"{session.rank}:{epoch}\n")
                first = False
            crashed_before = (log.parent / "crashed").exists()
            if epoch == p["crash_epoch"] and session.rank == p["crash_rank"] and not crashed_before:
                committed = ray.train.get_all_reported_checkpoints(
                    consistency_mode=ray.train.CheckpointConsistencyMode.COMMITTED, timeout_s=60
                )
                last = max((c.metrics.get("epoch", 0) for c in committed), default=0)
                assert last == epoch - 1, f"epoch {epoch - 1} not committed before the crash"
                (log.parent / "crashed").write_text("1")
                raise RuntimeError("simulated worker crash")
            yield epoch

    session.epochs = epochs  # type: ignore[method-assign]
    digits._fit(session, model)
