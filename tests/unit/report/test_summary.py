"""The end-of-sweep summary picks a best checkpoint that is on disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sweeps.report.summary import summarize
from sweeps.search.outcome import Objective


@dataclass
class Finished:
    """What ``summarize`` reads of a Tune result: its history, config, path and error."""

    metrics_dataframe: pd.DataFrame
    path: str
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None


def _history(tmp_path: Path, scores: list[float], kept: set[int]) -> pd.DataFrame:
    rows = []
    for epoch, score in enumerate(scores, 1):
        ckpt = tmp_path / "train" / "t1" / f"checkpoint_epoch_{epoch:04d}"
        if epoch in kept:
            ckpt.mkdir(parents=True)
        rows.append({"epoch": epoch, "score": score, "checkpoint_path": str(ckpt)})
    return pd.DataFrame(rows)


def test_tied_best_scores_pick_the_latest_kept_checkpoint(tmp_path) -> None:
    # Train kept 2 checkpoints by score; of the three tied at 1.0 it deleted the oldest.
    history = _history(tmp_path, [0.5, 1.0, 1.0, 1.0], kept={3, 4})
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 4), [])
    assert summary.best["epoch"] == 4
    assert Path(summary.best["checkpoint"]).is_dir()
    assert summary.table.iloc[0]["score"] == 1.0


def test_a_deleted_best_checkpoint_falls_back_to_the_best_kept_one(tmp_path) -> None:
    history = _history(tmp_path, [0.9, 0.7, 0.8], kept={2, 3})  # epoch 1's deleted by hand
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 3), [])
    assert (summary.best["epoch"], summary.best["value"]) == (3, 0.8)
    assert summary.table.iloc[0]["score"] == 0.9  # the trial's score is still its best epoch


def test_a_loop_without_checkpoints_still_has_a_best_trial(tmp_path) -> None:
    history = pd.DataFrame({"epoch": [0, 1, 2], "score": [0.5, float("nan"), 0.7]})
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 3), [])
    assert summary.best["value"] == 0.7 and summary.best["checkpoint"] is None
    assert summary.table.iloc[0]["status"] == "completed"


def test_all_nan_metrics_score_nan_without_crashing(tmp_path) -> None:
    history = pd.DataFrame({"epoch": [1, 2], "score": [float("nan"), float("nan")]})
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 3), [])
    assert summary.best is None and pd.isna(summary.table.iloc[0]["score"])
