"""Ray Tune internals the sweep relies on: a restored Tuner's scheduler, state files, env vars.

    tuner = tune.Tuner.restore(...); replace_restored_config(tuner, scheduler, callbacks, ...)
    limit = concurrency_limit(tuner); limit(3)     # trials at once, changed while Tune runs
    experiment_state_files(sweep_dir); trials_in_state(json.loads(path.read_text()))
    os.environ.update({k: v for k, v in tune_env(verbose=False).items() if k not in os.environ})

``Tuner.restore`` takes no scheduler and no run config: both come back from the pickled
experiment. A restored ASHA would start with empty rungs (ray#30838), and this run's callbacks
hold live state, so both are replaced on the restored ``TunerInternal`` (``tuner._local_tuner``,
its ``_tune_config`` and ``get_run_config()``). Public route: ``Tuner.restore(...,
tune_config=..., run_config=...)`` if Ray adds them (ray#30838).

A scheduler saves Tune's experiment state before a new trial can start
(``save_experiment_state``): Tune's own save runs once a second, so a trial added and started
inside that second was unknown to a resume after a kill -9 (its MLflow run and files orphaned,
the search suggesting another). Schedulers get the controller behind Tune's
``TrialRunnerWrapper``. ``TuneController.save_to_dir()`` writes the state into Tune's local
staging directory (``controller._storage.experiment_driver_staging_path``: the state files
that Tune's resume reads back, ``*.json``/``*.pkl`` at the top, and each trial's result files
below, which the summary reads); the adapter then uploads the files that changed since its
last save to the experiment directory on ``storage_filesystem``, each written beside and moved
into place, the state files last. Tune's own save copies the whole staging directory, every
ended trial's files again: 0.1 s at 200 trials and growing, once a second in a thread of the
driver. So from the first save on, Tune's own saves (its period, the save forced after trial
checkpoints, the last one) come here too, through its checkpoint manager; the state file's
unchanged trial entries are not encoded again either. Tune's background sync is waited for
first (``storage.syncer.wait()``) so the two never write the same file. Public route: none
(``CheckpointConfig`` forces a save only after a trial's checkpoints).

How many trials run at once is fixed when Tune starts (``TuneConfig.max_concurrent_trials``);
a sweep on a cluster that gains or loses nodes changes it while Tune runs, on the search
algorithm the Tuner holds (``tuner._local_tuner._tune_config.search_alg``, the pickled one after
a restore): a ``ConcurrencyLimiter`` through its ``set_max_concurrency``, a
``BasicVariantGenerator`` through its ``max_concurrent`` attribute, both read by Tune before
each new trial. Public route: none (ray#43451: Tune's own pending-trial limit is likewise
measured once, from the cluster at start).

Tune's ``experiment_state-<time>.json`` (newest last) holds ``trial_data``; the sweep checks it
parses before resuming, to fail with a clear error instead of Tune's traceback. Public route:
``ray.tune.ExperimentAnalysis`` loads it but raises opaque errors on a torn file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeps.storage import objects

__all__ = ["replace_restored_config", "concurrency_limit", "experiment_state_files",
           "trials_in_state", "tune_env", "set_trial_config", "save_experiment_state",
           "STATE_GLOB", "THREAD_TIMEOUT_ENV", "SAVE_THROTTLE"]

STATE_GLOB = "experiment_state-*.json"
# How long a reused function-trainable process waits for the last trial's thread to end
# (FunctionTrainable.reset_config, read at each reuse; Ray's default 2 s). Public route: none.
THREAD_TIMEOUT_ENV = "TUNE_FUNCTION_THREAD_TIMEOUT_S"

log = logging.getLogger(__name__)


def replace_restored_config(tuner: Any, scheduler: Any, callbacks: list, verbose: int,
                            failure_config: Any) -> None:
    """Give a ``Tuner.restore``'d tuner this run's scheduler, callbacks, verbosity and
    trial-retry limit (the pickled ones would be used otherwise)."""
    internal = getattr(tuner, "_local_tuner", None)
    if internal is None or not hasattr(internal, "_tune_config"):  # e.g. Ray Client (ray://)
        from sweeps.errors import RayIncompatible

        raise RayIncompatible("this Tuner has no local TunerInternal (ray:// Ray Client?), so "
                              "its scheduler cannot be replaced on resume; run the sweep on the "
                              "cluster's head node (ray.address=auto) instead")
    run_config = internal.get_run_config()
    run_config.callbacks = callbacks
    run_config.verbose = verbose
    run_config.failure_config = failure_config
    internal._tune_config.scheduler = scheduler


def concurrency_limit(tuner: Any) -> Callable[[int], bool] | None:
    """A function that sets how many trials ``tuner`` runs at once while it runs (True when
    set), or None when its search algorithm holds no limit that can change (an Optuna search
    that Tune itself wrapped, from ``TuneConfig.max_concurrent_trials``)."""
    from ray.tune.search import ConcurrencyLimiter
    from ray.tune.search.basic_variant import BasicVariantGenerator

    internal = getattr(tuner, "_local_tuner", None)
    alg = getattr(getattr(internal, "_tune_config", None), "search_alg", None)
    if isinstance(alg, ConcurrencyLimiter):
        return alg.set_max_concurrency
    if isinstance(alg, BasicVariantGenerator):
        def set_limit(n: int) -> bool:
            alg.max_concurrent = n  # 0 would mean no limit: callers pass >= 1
            return True

        return set_limit
    return None


def set_trial_config(trial: Any, config: dict[str, Any]) -> None:
    """Give a trial the config its next actor starts with (PBT's explored values), as Ray's
    own ``PopulationBasedTraining`` does: ``Trial.set_config`` (a method of the DeveloperAPI
    ``Trial``; Tune passes it to schedulers but documents no way to change its config)."""
    trial.set_config(config)


def save_experiment_state(tune_controller: Any) -> None:
    """Save Tune's experiment state (trials, searcher, callbacks) to storage now, and wait for
    it: ``tune_controller`` is what Tune passes a scheduler (the controller in a wrapper).

    Uploads the staging directory's files that changed since this sweep's last save (the trials'
    result files first, the state files last), each written beside and moved into place; the
    folder of a trial that ended before an earlier save is not looked at again. From the first
    call on, Tune's own saves go through here too (``_take_over_saves``)."""
    controller = getattr(tune_controller, "_tune_controller", tune_controller)
    _take_over_saves(controller)
    started = time.monotonic()
    storage = controller._storage
    try:
        storage.syncer.wait()  # a sync of Tune's own must not write these files meanwhile
    except Exception as exc:  # Tune logs a failed sync and goes on; so does this save
        log.warning("Tune's last sync of the experiment state failed: %s", exc)
    _save_to_dir(controller)
    staging = storage.experiment_driver_staging_path
    uploaded = _UPLOADED.setdefault(staging, {})
    ended = _ended_trial_dirs(controller)
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
            from sweeps.storage.full import storage_refusal

            refused = storage_refusal(exc)
            if refused is None or exc.filename:
                raise
            raise OSError(refused.errno, os.strerror(refused.errno), target) from exc
        uploaded[path] = signature
    settled |= ended
    _saved(controller, time.monotonic() - started)


def _take_over_saves(controller: Any) -> None:
    """Route Tune's own saves (every ``TUNE_GLOBAL_CHECKPOINT_S``, when trial checkpoints force
    one, and the last one) through ``save_experiment_state``, on the controller's
    ``_checkpoint_manager``: its ``sync_up_experiment_state`` writes the whole state and then
    copies the whole staging directory to storage in a thread, every ended trial's files
    again, once a second: 0.1 s of the driver's 2 cores a second at 200 trials, growing with
    every trial. The same throttle decides (the period, a save forced after trial
    checkpoints, ``force``); the upload is this module's, of what changed, and waited for.
    Nothing is done on a Ray whose manager lacks the throttle's fields (Tune's saves stay
    Tune's). The manager is not part of the saved state. Public route: none."""
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
            from sweeps.storage.full import storage_refusal

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


def _save_to_dir(controller: Any) -> None:
    """``controller.save_to_dir()``, its state file written by ``_CachedTrialsJson``: Tune's
    ``json.dump`` to a file runs Python's pure-Python encoder over the 3 MB of 200 trials'
    state (Tune keeps every numeric metric's last-5/last-10 windows per trial) on every save,
    and Tune's loop waits for it: 11-15 ms at 200 trials, where reusing each unchanged trial's
    encoded text costs 0.4 ms. The module's ``json`` is swapped for the call only; Tune's
    loop, the one thread that runs that module's code, is the one making this call. Public
    route: none."""
    import json

    import ray.tune.execution.tune_controller as module

    with _datasets_by_plan():
        if getattr(module, "json", None) is not json:  # a Ray that writes it otherwise
            controller.save_to_dir()
            return
        _unlink_state_file(controller)
        module.json = _CACHED_TRIALS_JSON
        try:
            controller.save_to_dir()
        finally:
            module.json = json


def _datasets_by_plan() -> Any:
    """The context Tune saves in: a Ray Dataset in a trial's config is saved as its plan, not
    its blocks (``out_of_band_serialize_dataset``)."""
    try:
        from ray.tune.impl.out_of_band_serialize_dataset import out_of_band_serialize_dataset
    except ImportError:
        return contextlib.nullcontext()
    return out_of_band_serialize_dataset()


def _unlink_state_file(controller: Any) -> None:
    """Remove the staging copy of the state file before Tune writes it again: its ``open(...,
    "w")`` truncates the 3 MB of 200 trials in place first, 2.3 ms on ext4 where a new file
    costs nothing. Storage keeps its copy (replaced whole by the upload)."""
    name = getattr(controller, "experiment_state_file_name", None)
    if isinstance(name, str):
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(controller._storage.experiment_driver_staging_path, name))


class _CachedTrialsJson:
    """``json``, except ``dump``: the state document's ``trial_data`` entries (each trial's
    ``(state, metadata)`` texts, which Tune keeps as the same string objects until the trial
    changes) are encoded once and reused while the same strings come back; the rest of the
    document is encoded at once (the C encoder). The bytes written are ``json.dumps``'s.
    A document of another shape, or other ``json`` options, is written by ``json.dumps``."""

    def __init__(self) -> None:
        # (id(state), id(metadata)) -> (state, metadata, encoded): the strings are held so
        # their ids stay theirs; rebuilt at each dump with the entries of that dump only
        self._encoded: dict[tuple[int, ...], tuple[Any, ...]] = {}

    def __getattr__(self, name: str) -> Any:
        import json

        return getattr(json, name)

    def dump(self, obj: Any, fp: Any, **kwargs: Any) -> None:
        import json

        trials = obj.get("trial_data") if isinstance(obj, dict) else None
        if (set(kwargs) - {"cls"} or not isinstance(trials, list)
                or not all(isinstance(k, str) for k in obj)
                or not all(_texts(entry) for entry in trials)):
            fp.write(json.dumps(obj, **kwargs))
            return
        before, encoded = self._encoded, {}
        fragments = []
        for entry in trials:
            key = tuple(map(id, entry))
            hit = before.get(key)
            if hit is None or any(a is not b for a, b in zip(hit, entry, strict=False)):
                hit = (*entry, json.dumps(entry, **kwargs))
            encoded[key] = hit
            fragments.append(hit[-1])
        self._encoded = encoded
        # piece by piece: joining 3 MB first costs more than encoding what changed
        for i, (key, value) in enumerate(obj.items()):
            fp.write(("{" if i == 0 else ", ") + json.dumps(key) + ": ")
            if key != "trial_data":
                fp.write(json.dumps(value, **kwargs))
                continue
            for j, fragment in enumerate(fragments):
                fp.write(("[" if j == 0 else ", ") + fragment)
            fp.write("]" if fragments else "[]")
        fp.write("}" if obj else "{}")


def _texts(entry: Any) -> bool:
    """Whether a ``trial_data`` entry is Tune's: a tuple or list of strings."""
    return isinstance(entry, tuple | list) and all(isinstance(x, str) for x in entry)


_CACHED_TRIALS_JSON = _CachedTrialsJson()


def _ended_trial_dirs(controller: Any) -> set[str]:
    """Staging folder names of the trials that have ended (``TERMINATED``/``ERROR``): once
    uploaded after their end, their files no longer change, so later saves skip them (the
    walk over every trial's files grew with the sweep: 7 ms a save at 200 trials)."""
    names = set()
    for trial in controller.get_trials():
        name = getattr(getattr(trial, "storage", None), "trial_dir_name", None)
        if name and trial.status in ("TERMINATED", "ERROR"):
            names.add(name)
    return names


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


def experiment_state_files(sweep_dir: Path) -> list[Path]:
    """Tune's experiment-state files in ``sweep_dir`` (a local path or an object-store stand-in,
    ``sweeps.files``), oldest first."""
    import fnmatch

    from sweeps import files

    return [sweep_dir / name for name in files.listdir(sweep_dir)
            if fnmatch.fnmatch(name, STATE_GLOB)]


def trials_in_state(data: dict[str, Any]) -> list:
    """The trial list of a parsed experiment-state file (``KeyError``/``TypeError`` if torn)."""
    trials = data["trial_data"]
    if not isinstance(trials, list):
        raise TypeError(f"trial_data is a {type(trials).__name__}, not a list")
    return trials


def trial_statuses(data: dict[str, Any]) -> dict[str, str]:
    """Trial id -> Tune's status of it (``RUNNING``, ``TERMINATED``, ``ERROR``, ...) in a parsed
    experiment-state file: each entry of ``trial_data`` is a list whose first item is the
    trial's own JSON text. ``KeyError``/``TypeError``/``ValueError`` if torn.

    Example:
        >>> trial_statuses({"trial_data": [['{"trial_id": "a1", "status": "ERROR"}', "..."]]})
        {'a1': 'ERROR'}
    """
    return {(t := json.loads(entry[0]))["trial_id"]: t.get("status", "")
            for entry in trials_in_state(data)}


def tune_env(verbose: bool) -> dict[str, str]:
    """Env vars set (unless the user set them) before Tune starts, and why:

    - ``TUNE_GLOBAL_CHECKPOINT_S=1``: Tune saves its experiment state every second, not every
      10 s, so a crash loses less (the scheduler's log covers the rest);
    - ``TUNE_DISABLE_STRICT_METRIC_CHECKING=1``: a report without the metric (a training loss
      between evaluations) is fine; the sweep's scheduler fails a trial that never reports it,
      where Tune's own check would end the whole sweep;
    - ``RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS=0``: no V1-to-V2 notices on every trial;
    - ``RAY_AIR_NEW_OUTPUT=0`` when not verbose: the new output engine prints a header box
      even at verbose=0.

    Example:
        >>> sorted(tune_env(verbose=True))[0]
        'RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS'
    """
    env = {"RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS": "0", "TUNE_GLOBAL_CHECKPOINT_S": "1",
           "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1"}
    if not verbose:
        env["RAY_AIR_NEW_OUTPUT"] = "0"
    return env
