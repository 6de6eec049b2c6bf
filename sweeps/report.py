"""End-of-sweep summary: one row per trial, the best trial, its best checkpoint.

    summary = summarize(results, metric="val_acc", mode="max", max_epochs=9, params=[...])
    print(format_table(summary.table))

A trial's status is ``completed`` (ran all ``max_epochs``), ``stopped`` (ended early by the
scheduler), or ``error``. Its score is the best value of the metric over its epochs, and its
checkpoint is the one saved at the best epoch whose checkpoint Train kept (it keeps the best
``checkpoint.keep`` by the same metric; of equal scores, the latest).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sweeps.space import flatten

__all__ = ["Summary", "summarize", "format_table", "write_summary", "best_overrides"]

CHECKPOINT_KEY = "checkpoint_path"


@dataclass
class Summary:
    """The per-trial table and the best trial (``None`` when no trial reported the metric)."""

    table: pd.DataFrame
    best: dict[str, Any] | None


def _trial_row(result: Any, metric: str, mode: str, max_epochs: int,
               param_paths: list[str]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    history = result.metrics_dataframe
    trial_id = (result.metrics or {}).get("trial_id") or Path(result.path).name
    config = flatten(result.config or {})
    row: dict[str, Any] = {"trial_id": trial_id}
    row.update({p: config.get(p) for p in param_paths})
    if history is None or history.empty or metric not in history:
        row.update({metric: math.nan, "epochs": 0, "status": "error" if result.error else "empty"})
        return row, None
    history = history.dropna(subset=[metric])
    epochs = int(history["epoch"].max()) if "epoch" in history else len(history)
    pick = history[metric].idxmax() if mode == "max" else history[metric].idxmin()
    status = "error" if result.error else ("completed" if epochs >= max_epochs else "stopped")
    row.update({metric: float(history.loc[pick, metric]), "epochs": epochs, "status": status})
    with_ckpt = history.dropna(subset=[CHECKPOINT_KEY]) if CHECKPOINT_KEY in history else None
    best = None
    if with_ckpt is not None:
        with_ckpt = with_ckpt[[_kept(p) for p in with_ckpt[CHECKPOINT_KEY]]]
    if with_ckpt is not None and not with_ckpt.empty:
        # Ties go to the latest epoch, as in Train's own ranking (equal scores: the newer
        # checkpoint is kept, the older deleted).
        latest_first = with_ckpt.iloc[::-1]
        at = latest_first[metric].idxmax() if mode == "max" else latest_first[metric].idxmin()
        best = {"trial_id": trial_id, "metric": metric,
                "value": float(with_ckpt.loc[at, metric]),
                "epoch": int(with_ckpt.loc[at, "epoch"]),
                "checkpoint": str(with_ckpt.loc[at, CHECKPOINT_KEY]),
                "config": result.config}
    return row, best


def _kept(path: Any) -> bool:
    """Whether a reported checkpoint is still there (Train deletes all but ``keep``); remote
    storage (``s3://...``) is not listed here and counts as kept."""
    text = str(path)
    return "://" in text or Path(text).is_dir()


def summarize(results: Any, metric: str, mode: str, max_epochs: int,
              param_paths: list[str]) -> Summary:
    """Build the summary from a Tune ``ResultGrid`` (or any iterable of ``Result``)."""
    rows, bests = [], []
    for result in results:
        row, best = _trial_row(result, metric, mode, max_epochs, param_paths)
        rows.append(row)
        if best is not None:
            bests.append(best)
    table = pd.DataFrame(rows)
    if not table.empty:
        table = table.sort_values(metric, ascending=(mode == "min"), na_position="last")
        table = table.reset_index(drop=True)
    best = None
    if bests:
        pick = max if mode == "max" else min
        best = pick(bests, key=lambda b: b["value"])
    return Summary(table=table, best=best)


def format_table(table: pd.DataFrame) -> str:
    """The table as aligned plain text (floats to 4 significant digits)."""
    if table.empty:
        return "(no trials)"
    return table.to_string(index=False, float_format=lambda v: f"{v:.4g}")


def write_summary(summary: Summary, sweep_dir: Path) -> None:
    """``summary.csv``, ``summary.parquet`` and ``best.json`` in the sweep directory."""
    summary.table.to_csv(sweep_dir / "summary.csv", index=False)
    mixed = [c for c in summary.table if summary.table[c].dtype == object]
    summary.table.astype({c: str for c in mixed}).to_parquet(sweep_dir / "summary.parquet",
                                                             index=False)
    (sweep_dir / "best.json").write_text(json.dumps(summary.best, indent=2, default=str) + "\n")


def best_overrides(config: dict[str, Any]) -> str:
    """The sampled values as search-space constants: pasted after ``+experiment=NAME`` they
    replace the searched ranges, so the run trains exactly this configuration.

    Example:
        >>> best_overrides({"lr": 0.1, "model": {"act": "relu"}})
        'experiment.search_space.lr=0.1 experiment.search_space.model.act=relu'
    """

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "null" if value is None else repr(value) if isinstance(value, float) else str(value)

    return " ".join(f"experiment.search_space.{k}={text(v)}" for k, v in flatten(config).items())
