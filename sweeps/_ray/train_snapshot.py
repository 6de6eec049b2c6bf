"""Ray Train's run snapshot (``checkpoint_manager_snapshot.json``), read and rewritten.

    snap = load(run_dir)                       # None when missing or torn
    latest(snap)                               # (dir name, metrics, reports so far) or None
    entries(snap)                              # [(checkpoint dir name, report index)]
    write(run_dir, without(snap, {"checkpoint_epoch_0003"}))
    write(run_dir, rebuilt([(name, metrics, index), ...]))

Train V2 restores a run from this file and refuses to start when it is torn or names a
checkpoint directory that is gone; the sweep repairs it first (``sweeps.resume.train_runs``).
The format is Train's internal ``_CheckpointManagerState`` (``ray/train/v2/_internal/
execution/checkpoint/checkpoint_manager.py``), versioned by the ``ray_version`` it carries.
Public route: none; a Train option to skip unreadable checkpoints on restore would replace it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.files import write_atomic

__all__ = ["SNAPSHOT_FILE", "load", "latest", "entries", "without", "rebuilt", "write",
           "REQUIRED_KEYS", "ALL_KEYS"]

SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"
REQUIRED_KEYS = ("checkpoint_results", "checkpoint_report_indices", "latest_checkpoint_result")
_VALIDATION_LISTS = ("validated_checkpoint_dir_names", "timed_out_validation_checkpoint_dir_names",
                     "failed_validation_checkpoint_dir_names")
# Every field a rebuilt snapshot writes (Train validates the file against its model).
ALL_KEYS = (*REQUIRED_KEYS, "ray_version", "pending_training_results", "pending_validation_specs",
            "current_report_index", *_VALIDATION_LISTS)


def load(run_dir: Path) -> dict[str, Any] | None:
    """The parsed snapshot of ``run_dir``, or None when it is missing or does not parse."""
    try:
        return json.loads(files.read_text(run_dir / SNAPSHOT_FILE))
    except (OSError, ValueError):
        return None


def entries(snapshot: dict[str, Any]) -> list[tuple[str, int]]:
    """(checkpoint dir name, 0-based report index) of every registered checkpoint; raises
    ``KeyError``/``TypeError`` on a snapshot of another shape."""
    return [(r["checkpoint_dir_name"], int(i)) for r, i in
            zip(snapshot["checkpoint_results"], snapshot["checkpoint_report_indices"],
                strict=False)]


def latest(snapshot: dict[str, Any] | None) -> tuple[str, dict[str, Any], int] | None:
    """(directory name, reported metrics, reports up to and including it) of the checkpoint
    Train resumes from, or None."""
    try:
        result = snapshot["latest_checkpoint_result"] if snapshot else None
        if not result:
            return None
        name = result["checkpoint_dir_name"]
        count = next((i + 1 for n, i in entries(snapshot) if n == name), 0)
        return name, dict(result.get("metrics") or {}), count
    except (KeyError, TypeError, ValueError):
        return None


def without(snapshot: dict[str, Any], bad: set[str]) -> dict[str, Any]:
    """``snapshot`` minus the checkpoints named in ``bad``; the newest kept one is latest."""
    kept = [(r, i) for r, i in zip(snapshot["checkpoint_results"],
                                   snapshot["checkpoint_report_indices"], strict=False)
            if r["checkpoint_dir_name"] not in bad]
    names = {r["checkpoint_dir_name"] for r, _ in kept}
    return {**snapshot,
            "checkpoint_results": [r for r, _ in kept],
            "checkpoint_report_indices": [i for _, i in kept],
            "latest_checkpoint_result": kept[-1][0] if kept else None,
            "pending_training_results": [], "pending_validation_specs": [],
            **{key: [n for n in snapshot.get(key, []) if n in names] for key in _VALIDATION_LISTS}}


def rebuilt(checkpoints: Iterable[tuple[str, dict[str, Any], int]],
            ray_version: str | None = None, latest_name: str | None = None,
            next_index: int | None = None) -> dict[str, Any]:
    """A snapshot listing ``checkpoints`` (dir name, metrics, 0-based report index) in
    Train's order (by score when there is one, else oldest first), for a run whose own
    snapshot is torn or that sweeps writes itself (``sweeps.trial.backends.inline``). The latest
    checkpoint is ``latest_name`` (default: the last listed); ``next_index`` is the index of
    the run's next report (default: one past the last listed).

    Example:
        >>> snap = rebuilt([("checkpoint_epoch_0001", {"epoch": 1}, 0)], "2.60.0")
        >>> latest(snap)
        ('checkpoint_epoch_0001', {'epoch': 1}, 1)
    """
    if ray_version is None:
        import importlib.metadata

        ray_version = importlib.metadata.version("ray")
    results, indices = [], []
    for name, metrics, index in checkpoints:
        results.append({"version": 0, "checkpoint_dir_name": name, "metrics": metrics})
        indices.append(index)
    latest_result = next((r for r in results if r["checkpoint_dir_name"] == latest_name),
                         results[-1] if results else None)
    return {"ray_version": ray_version, "checkpoint_results": results,
            "checkpoint_report_indices": indices, "latest_checkpoint_result": latest_result,
            "pending_training_results": [], "pending_validation_specs": [],
            "current_report_index": next_index if next_index is not None
            else (indices[-1] + 1) if indices else 0,
            **{key: [] for key in _VALIDATION_LISTS}}


def write(run_dir: Path, snapshot: dict[str, Any]) -> None:
    """Replace ``run_dir``'s snapshot atomically."""
    write_atomic(run_dir / SNAPSHOT_FILE, json.dumps(snapshot))
