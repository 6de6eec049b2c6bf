"""Make a trial's Ray Train run directory safe to resume from, before Train reads it.

    notes = repair_run(sweep_dir / "train" / trial_id)     # [] when all is well

Ray Train restores a run from ``checkpoint_manager_snapshot.json`` and refuses to start at all
when that file is torn or names a checkpoint directory that is gone (deleted by hand), and it
hands a truncated ``checkpoint.pt`` to the training loop as if it were good. So, before a trial
starts again, every checkpoint the snapshot names is checked (the directory exists, its
``checkpoint.pt`` is a complete archive: cheap, nothing is unpickled). A bad one is moved aside
as ``<name>.corrupt`` (never deleted), and the snapshot is rewritten, atomically, without it:
the trial then falls back to the newest valid checkpoint, or starts from epoch 1 if none is
left. Each repair is returned as a sentence for the user.

``claim_run`` guards the other way: a run directory written for different params (a trial id
reused after a crash lost the trial that first had it) is moved aside, not resumed.
"""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps._ray import train_snapshot
from sweeps._ray.train_snapshot import SNAPSHOT_FILE as SNAPSHOT
from sweeps.files import write_atomic
from sweeps.loop.checkpoint import CHECKPOINT_FILE, load_checkpoint
from sweeps.protocol import TRIAL_FILE, checkpoint_dir_epoch, checkpoint_dir_name
from sweeps.storage import trees

__all__ = ["repair_run", "claim_run", "checkpoint_epochs", "latest_checkpoint", "SNAPSHOT"]


def _valid(directory: Path) -> bool:
    """A checkpoint directory that Train can hand back: it exists, and when it is in sweeps'
    own format (``checkpoint.pt``, ``TrialSession``) that file is a complete archive. A user
    loop's own files are the loop's business: only their directory's presence is checked."""
    if not files.is_dir(directory):
        return False
    path = directory / CHECKPOINT_FILE
    if not files.exists(path):
        return True
    try:
        with files.open_binary(path) as f, zipfile.ZipFile(f) as archive:
            return bool(archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def checkpoint_epochs(run_dir: Path) -> list[int]:
    """Epochs of the valid ``TrialSession`` checkpoints in ``run_dir``, ascending."""
    return sorted(e for name in files.listdir(run_dir)
                  if (e := checkpoint_dir_epoch(name)) is not None and _valid(run_dir / name)
                  and files.is_file(run_dir / name / CHECKPOINT_FILE))


def latest_checkpoint(run_dir: Path) -> tuple[str, dict[str, Any], int] | None:
    """(directory name, reported metrics, reports up to and including it) of the checkpoint
    Train resumes ``run_dir`` from, or None. Train re-runs the loop from there, so the trial's
    report count (``sweeps.trial.clock``) continues from the third value."""
    return train_snapshot.latest(train_snapshot.load(run_dir))


def _move_aside(directory: Path, suffix: str) -> Path:
    target = directory.with_name(f"{directory.name}.{suffix}")
    if files.exists(target):
        target = directory.with_name(f"{directory.name}.{suffix}-{int(time.time())}")
    trees.move(directory, target)
    return target


def repair_run(run_dir: Path) -> list[str]:
    """Check and, if needed, repair one Train run directory; return what was done."""
    snapshot_path = run_dir / SNAPSHOT
    if not files.is_file(snapshot_path):
        return []
    trial = run_dir.name
    try:
        snapshot = json.loads(files.read_text(snapshot_path))
        names = [name for name, _ in train_snapshot.entries(snapshot)]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        _move_aside(snapshot_path, "corrupt")
        found = []  # a snapshot made from the valid checkpoint directories alone
        for epoch in checkpoint_epochs(run_dir):
            name = checkpoint_dir_name(epoch)
            with trees.local_copy(run_dir / name) as local:
                metrics = load_checkpoint(local).get("metrics", {"epoch": epoch})
            found.append((name, metrics, epoch - 1))
        rebuilt = train_snapshot.rebuilt(found)
        train_snapshot.write(run_dir, rebuilt)
        latest = rebuilt["latest_checkpoint_result"]
        where = (f"epoch {latest['metrics'].get('epoch')}" if latest else "epoch 1 (no valid "
                 "checkpoint left)")
        return [f"trial {trial}: Train's run snapshot was unreadable ({type(exc).__name__}); "
                f"rebuilt it from the checkpoints on disk, the trial resumes from {where}"]
    bad = [name for name in names if not _valid(run_dir / name)]
    if not bad:
        return []
    notes = []
    for name in bad:
        directory = run_dir / name
        state = "is missing (deleted?)"
        if files.exists(directory):
            moved = _move_aside(directory, "corrupt")
            state = f"is unreadable (truncated?); moved to {moved.name}"
        notes.append(f"trial {trial}: checkpoint {name} {state}")
    snapshot = train_snapshot.without(snapshot, set(bad))
    train_snapshot.write(run_dir, snapshot)
    kept = snapshot["checkpoint_results"]
    if kept:
        fallback = kept[-1]["checkpoint_dir_name"]
        notes.append(f"trial {trial}: falling back to the previous valid checkpoint {fallback} "
                     f"(epoch {checkpoint_dir_epoch(fallback)}); it resumes from epoch "
                     f"{(checkpoint_dir_epoch(fallback) or 0) + 1}")
    else:
        notes.append(f"trial {trial}: no valid checkpoint left; it starts again from epoch 1")
    return notes


def claim_run(run_dir: Path, params: dict[str, Any]) -> list[str]:
    """Record which params ``run_dir`` trains (``trial.json``); a run directory left by a
    different trial with the same id is moved aside as ``<id>.orphan`` first."""
    marker = run_dir / TRIAL_FILE
    text = json.dumps(json.loads(json.dumps(params, default=str)), sort_keys=True)
    notes = []
    if files.is_file(marker):
        try:
            same = json.dumps(json.loads(files.read_text(marker)), sort_keys=True) == text
        except ValueError:
            same = False
        if same:
            return []
        moved = _move_aside(run_dir, "orphan")
        notes.append(f"trial {run_dir.name}: its run directory was written for other params (a "
                     f"trial lost in a crash had this id); moved to {moved.name}, starting anew")
    files.make_dirs(run_dir)
    write_atomic(marker, text)
    return notes
