"""Tune's experiment state saved to storage now, before a new trial starts, and Tune's own saves.

    save_experiment_state(tune_controller)     # sweeps.search.scheduler_log, before a trial

A scheduler saves Tune's experiment state before a new trial can start (``save_experiment_state``):
Tune's own save runs once a second, so a trial added and started inside that second was unknown to a
resume after a kill -9 (its MLflow run and files orphaned, the search suggesting another).
Schedulers get the controller behind Tune's ``TrialRunnerWrapper``. ``TuneController.save_to_dir()``
writes the state into Tune's local staging directory
(``controller._storage.experiment_driver_staging_path``: the state files that Tune's resume reads
back, ``*.json``/``*.pkl`` at the top, and each trial's result files below, which the summary
reads); the adapter then uploads the files that changed since its last save to the experiment
directory on ``storage_filesystem``, each written beside and moved into place, the state files last.
Tune's own save copies the whole staging directory, every ended trial's files again: 0.1 s at 200
trials and growing, once a second in a thread of the driver. So from the first save on, Tune's own
saves (its period, the save forced after trial checkpoints, the last one) come here too, through its
checkpoint manager; the state file's unchanged trial entries are not encoded again either
(``sweeps._ray.tune_state_file``). Tune's background sync is waited for first
(``storage.syncer.wait()``) so the two never write the same file. Public route: none
(``CheckpointConfig`` forces a save only after a trial's checkpoints).
"""

from __future__ import annotations

import logging
import math
import os
import time
import weakref
from pathlib import Path
from typing import Any

from sweeps._ray.tune_state_file import save_to_dir
from sweeps.storage import objects
from sweeps.storage.full import storage_refusal

__all__ = ["save_experiment_state", "SAVE_THROTTLE"]

log = logging.getLogger(__name__)


def save_experiment_state(tune_controller: Any) -> None:
    """Save Tune's experiment state (trials, searcher, callbacks) to storage now, and wait for
    it: ``tune_controller`` is what Tune passes a scheduler (the controller in a wrapper).
    What is uploaded, in which order: the module docstring."""
    controller = getattr(tune_controller, "_tune_controller", tune_controller)
    _take_over_saves(controller)
    started = time.monotonic()
    storage = controller._storage
    try:
        storage.syncer.wait()  # a sync of Tune's own must not write these files meanwhile
    except Exception as exc:  # Tune logs a failed sync and goes on; so does this save
        log.warning("Tune's last sync of the experiment state failed: %s", exc)
    save_to_dir(controller)
    staging = storage.experiment_driver_staging_path
    uploaded = _UPLOADED.setdefault(staging, {})
    # Staging folders of the trials that ended: once uploaded after their end, their files no
    # longer change, so later saves skip them (the walk over every trial's files grew with the
    # sweep: 7 ms a save at 200 trials).
    ended = {name for trial in controller.get_trials()
             if (name := getattr(getattr(trial, "storage", None), "trial_dir_name", None))
             and trial.status in ("TERMINATED", "ERROR")}
    settled = _SETTLED.setdefault(staging, set())
    settled &= ended  # defensive: a trial seen running again is walked again (Tune retries
    # a trial without passing through ERROR, and a resume is a new process)
    changed = []
    for root, dirs, names in os.walk(staging):
        if root == staging:
            dirs[:] = [d for d in dirs if d not in settled]
        for name in names:
            path = os.path.join(root, name)
            stat = os.stat(path)
            if uploaded.get(path) != (stat.st_mtime_ns, stat.st_size):
                changed.append((root == staging, os.path.relpath(path, staging), path,
                                (stat.st_mtime_ns, stat.st_size)))
    fs, dest = storage.storage_filesystem, storage.experiment_fs_path
    made: set[str] = set()
    for _, rel, path, signature in sorted(changed):  # trial files first, the state last
        target = f"{dest}/{Path(rel).as_posix()}"
        try:
            _put(fs, path, target, made)
        except OSError as exc:  # pyarrow's error names no file: name the one refused
            refused = storage_refusal(exc)
            if refused is None or exc.filename:
                raise
            raise OSError(refused.errno, os.strerror(refused.errno), target) from exc
        uploaded[path] = signature
    settled |= ended
    _saved(controller, time.monotonic() - started)


def _take_over_saves(controller: Any) -> None:
    """Route Tune's own saves (every ``TUNE_GLOBAL_CHECKPOINT_S``, when trial checkpoints force
    one, and the last one) through ``save_experiment_state``: the controller's
    ``_checkpoint_manager.sync_up_experiment_state`` (whose copy of the whole staging directory
    the module docstring prices) is replaced. The same throttle decides (the period, a save
    forced after trial checkpoints, ``force``); the upload is this module's, of what changed,
    and waited for. Nothing is done on a Ray whose manager lacks the throttle's fields (Tune's
    saves stay Tune's). The manager is not part of the saved state. Public route: none."""
    manager = getattr(controller, "_checkpoint_manager", None)
    if manager is None or "sync_up_experiment_state" in vars(manager):
        return
    if _throttled(controller) is None:
        manager.sync_up_experiment_state = manager.sync_up_experiment_state  # looked at once
        return
    if not getattr(manager, "_auto_checkpoint_enabled", True):
        _PERIOD_FLOOR[manager] = manager._checkpoint_period

    # the last periodic save that failed: when it ended, how long to wait, when logged
    failed = {"at": -math.inf, "wait": 0.0, "logged": -math.inf}

    def sync_up_experiment_state(save_fn: Any = None, force: bool = False,
                                 wait: bool = False) -> None:
        now = time.monotonic()
        due = now - manager._last_save_time >= manager._checkpoint_period
        if not (force or due or manager._should_force_sync_up):
            return
        if not force and now - failed["at"] < failed["wait"]:
            return  # failed a moment ago: again after a period, not at every step
        try:
            save_experiment_state(controller)
        except Exception as exc:  # Tune's loop re-raises: one storage hiccup would end the
            # sweep, where Tune's own upload (in a thread) only logged it. Not marked saved,
            # so it is tried again, after a period or 19 times as long as the failed try
            # took (a store that times out); the save before a new trial still raises.
            if storage_refusal(exc) is not None:
                raise  # a full or read-only sweep directory: retrying will not help (fit ends)
            failed["at"] = time.monotonic()
            failed["wait"] = _stretched(manager._checkpoint_period, failed["at"] - now)
            if now - failed["logged"] > FAILED_SAVE_LOG_S:
                failed["logged"] = now
                log.warning("saving the experiment state to storage failed (tried again "
                            "in %.0f s, until it works): %s: %s",
                            failed["wait"], type(exc).__name__, exc)

    manager.sync_up_experiment_state = sync_up_experiment_state


FAILED_SAVE_LOG_S = 60.0  # a periodic save that keeps failing is logged at most this often
SAVE_SHARE = 19  # a fixed period stretches to this many times a save's duration (as "auto")
STRETCH_CAP_S = 60.0  # ... but not beyond this (one slow save, e.g. the first after a resume,
# which uploads every file, would otherwise leave storage's state behind for many minutes)
# Tune's checkpoint manager -> its fixed period (TUNE_GLOBAL_CHECKPOINT_S), the shortest
# period ``_saved`` sets
_PERIOD_FLOOR: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Tune's _ExperimentCheckpointManager: when it last saved, its period, a save forced by trial
# checkpoints (and their count since the last save)
SAVE_THROTTLE = ("_last_save_time", "_checkpoint_period", "_should_force_sync_up",
                 "_trial_num_checkpoints_since_last_sync")


def _throttled(controller: Any) -> Any:
    """The controller's checkpoint manager when it has Tune's throttle fields, else None."""
    manager = getattr(controller, "_checkpoint_manager", None)
    if manager is None or not all(hasattr(manager, name) for name in SAVE_THROTTLE):
        return None
    return manager


def _stretched(period: float, took: float) -> float:
    """``period``, or ``SAVE_SHARE`` times a save that ``took`` long, capped at
    ``STRETCH_CAP_S`` (never below ``period``).

    Example:
        >>> _stretched(1.0, 0.01), _stretched(1.0, 0.5), _stretched(1.0, 30.0)
        (1.0, 9.5, 60.0)
    """
    return max(period, min(took * SAVE_SHARE, STRETCH_CAP_S))


def _saved(controller: Any, took: float) -> None:
    """Tell Tune's checkpoint manager a save just happened (as its own save does), so its
    periodic save does not follow a forced one at once. The period follows the save's time:
    with "auto" as in Tune (``max(10 s, 19 x the save)``); a fixed period (sweeps' 1 s, or
    the user's ``TUNE_GLOBAL_CHECKPOINT_S``) is stretched the same way up to a minute
    (``_stretched``), never shortened, so periodic saves hold Tune's loop about 1/20 of the
    time. Tune uploaded in a thread; this save waits for its upload, which on an object store
    is 6 requests a changed file (``_put``)."""
    manager = _throttled(controller)
    if manager is None:
        return
    manager._trial_num_checkpoints_since_last_sync.clear()
    manager._should_force_sync_up = False
    floor = _PERIOD_FLOOR.get(manager)
    if floor is not None:
        manager._checkpoint_period = _stretched(floor, took)
    else:
        adjust = getattr(manager, "_update_auto_checkpoint_time", None)
        if adjust is not None:  # "auto": Tune's own rule
            adjust(took)
    manager._last_save_time = time.monotonic()


# staging dir -> file -> (mtime_ns, size) last uploaded by save_experiment_state
_UPLOADED: dict[str, dict[str, tuple[int, int]]] = {}
# staging dir -> trial folders uploaded after their trial ended (not walked again)
_SETTLED: dict[str, set[str]] = {}


def _put(fs: Any, local: str, remote: str, made: set[str]) -> None:
    """``local`` to ``remote`` on ``fs``, whole or not at all: written beside, closed, then
    moved. A refused upload raises (``objects.upload_file``); with pyarrow's ``copy_files``
    it looked done, and only the move of a missing file failed. Folders are made
    once per save (``made``), and not at all on an object store, where they are prefixes:
    ``create_dir`` there costs two checks and a marker object per folder."""
    parent, _, name = remote.rpartition("/")
    if parent not in made:
        if getattr(fs, "type_name", None) not in OBJECT_STORES:
            fs.create_dir(parent, recursive=True)
        made.add(parent)
    part = f"{parent}/.{name}.part"
    objects.upload_file(fs, local, part)
    fs.move(part, remote)


# pyarrow filesystems (``type_name``) whose folders are only key prefixes: S3, GCS (not
# Azure's, whose hierarchical namespace has real directories)
OBJECT_STORES = frozenset({"s3", "gcs"})
