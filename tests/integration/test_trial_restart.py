"""A Train worker that dies mid-run: the trial restarts from its own last checkpoint."""

from __future__ import annotations

import pytest

from sweeps import compose, run_sweep

pytestmark = pytest.mark.slow


def test_worker_crash_resumes_from_last_checkpoint(tmp_path, ray_cluster) -> None:
    log = tmp_path / "attempts.log"
    cfg = compose("digits", [
        "experiment.trainable=tests.integration.flaky:train_crash_once",
        f"+experiment.params.log={log}", "+experiment.params.crash_epoch=3",
        "+experiment.params.crash_rank=1", "search=random", "scheduler=none",
        "search.num_samples=1", "scheduler.max_t=4", "scaling.num_workers=2",
        "trial.max_failures=1", f"sweep.dir={tmp_path / 'sweep'}",
    ])
    result = run_sweep(cfg)
    assert (tmp_path / "crashed").exists(), "the simulated crash happened"
    starts = sorted(log.read_text().split())
    # First attempt: both ranks start at epoch 1. After the crash in epoch 3, both restart at
    # epoch 3, i.e. right after the last checkpoint (epoch 2), not from scratch.
    assert starts == ["0:1", "0:3", "1:1", "1:3"], starts
    row = result.summary.table.iloc[0]
    assert (row["status"], row["epochs"]) == ("completed", 4)
    epochs = result.results[0].metrics_dataframe["epoch"].tolist()
    assert epochs == [1, 2, 3, 4], epochs
