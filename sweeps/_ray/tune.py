"""Ray Tune internals the sweep relies on: a restored Tuner's scheduler, state files, env vars.

    tuner = tune.Tuner.restore(...); replace_restored_config(tuner, scheduler, callbacks, ...)
    limit = concurrency_limit(tuner); limit(3)     # trials at once, changed while Tune runs
    experiment_state_files(sweep_dir); trials_in_state(json.loads(path.read_text()))
    save_experiment_state(tune_controller)         # in sweeps._ray.tune_state
    os.environ.update({k: v for k, v in tune_env(verbose=False).items() if k not in os.environ})

``Tuner.restore`` takes no scheduler and no run config: both come back from the pickled
experiment. A restored ASHA would start with empty rungs (ray#30838), and this run's callbacks
hold live state, so both are replaced on the restored ``TunerInternal`` (``tuner._local_tuner``,
its ``_tune_config`` and ``get_run_config()``). Public route: ``Tuner.restore(...,
tune_config=..., run_config=...)`` if Ray adds them (ray#30838).

How many trials run at once is fixed when Tune starts (``TuneConfig.max_concurrent_trials``); a
sweep on a cluster that gains or loses nodes changes it while Tune runs, on the search algorithm the
Tuner holds (``tuner._local_tuner._tune_config.search_alg``, the pickled one after a restore): a
``ConcurrencyLimiter`` through its ``set_max_concurrency``, a ``BasicVariantGenerator`` through its
``max_concurrent`` attribute, both read by Tune before each new trial. Public route: none
(ray#43451: Tune's own pending-trial limit is likewise measured once, from the cluster at start).

Tune's ``experiment_state-<time>.json`` (newest last) holds ``trial_data``; the sweep checks it
parses before resuming, to fail with a clear error instead of Tune's traceback. Public route:
``ray.tune.ExperimentAnalysis`` loads it but raises opaque errors on a torn file.
"""

from __future__ import annotations

import fnmatch
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.errors import RayIncompatible

__all__ = ["quiet_trial_lines", "replace_restored_config", "concurrency_limit",
           "experiment_state_files", "trials_in_state", "trial_statuses", "tune_env",
           "set_trial_config", "STATE_GLOB", "newest_trial_statuses", "ensure_trial_dir",
           "THREAD_TIMEOUT_ENV"]

STATE_GLOB = "experiment_state-*.json"
# How long a reused function-trainable process waits for the last trial's thread to end
# (FunctionTrainable.reset_config, read at each reuse; Ray's default 2 s). Public route: none.
THREAD_TIMEOUT_ENV = "TUNE_FUNCTION_THREAD_TIMEOUT_S"


def quiet_trial_lines() -> Any:
    """Tune's own per-trial printer (``TrialProgressCallback``, which Tune adds unless one is
    given) with its lines sent to the log (the sweep's ``ray.log``) instead of stdout: at
    verbose 0 it still prints "Trial run_trial_<id> completed. Last result: ..." for some
    trials, beside the sweep's own lines (``sweeps.report.progress``)."""
    from ray.tune.progress_reporter import TrialProgressCallback

    class QuietTrialLines(TrialProgressCallback):
        def _print(self, msg: str) -> None:
            logging.getLogger("ray.tune").info("%s", msg)

        def __reduce__(self) -> tuple[Any, ...]:  # Tune pickles its callbacks (tuner.pkl)
            return quiet_trial_lines, ()

    return QuietTrialLines()


def replace_restored_config(tuner: Any, scheduler: Any, callbacks: list, verbose: int,
                            failure_config: Any) -> None:
    """Give a ``Tuner.restore``'d tuner this run's scheduler, callbacks, verbosity and
    trial-retry limit (the pickled ones would be used otherwise)."""
    internal = getattr(tuner, "_local_tuner", None)
    if internal is None or not hasattr(internal, "_tune_config"):  # e.g. Ray Client (ray://)
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
    from ray.tune.search.search_generator import SearchGenerator

    internal = getattr(tuner, "_local_tuner", None)
    alg = getattr(getattr(internal, "_tune_config", None), "search_alg", None)
    if isinstance(alg, SearchGenerator):  # a grown sweep's (sweeps._ray.tune_grow)
        alg = alg.searcher
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


def experiment_state_files(sweep_dir: Path) -> list[Path]:
    """Tune's experiment-state files in ``sweep_dir`` (a local path or an object-store stand-in,
    ``sweeps.files``), oldest first."""
    return [sweep_dir / name for name in files.listdir(sweep_dir)
            if fnmatch.fnmatch(name, STATE_GLOB)]


def newest_trial_statuses(sweep_dir: Path) -> dict[str, str]:
    """Trial id -> its status in Tune's newest experiment state ({} when none, or torn)."""
    found = experiment_state_files(sweep_dir)
    try:
        return trial_statuses(json.loads(files.read_text(found[-1])) if found else
                              {"trial_data": []})
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return {}


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


def ensure_trial_dir(trial: Any) -> None:
    """Give a trial Tune never scheduled its directory (``Trial.init_local_path``, what scheduling
    would make): a trial ended before it started has none, and Tune's ``ResultGrid`` raises reading
    it (``result_grid.py``: "Should not access ``trial_fs_path``")."""
    if not getattr(trial, "relative_logdir", True) and hasattr(trial, "init_local_path"):
        trial.init_local_path()


def reopen_search(search_alg: Any) -> bool:
    """Undo ``set_finished()`` on a restored search algorithm (True when it was finished):
    a sweep whose budget ran out finished its search, and one resumed with a larger budget
    goes on drawing trials. ``SearchGenerator`` and ``BasicVariantGenerator`` keep the flag in
    ``_finished`` (saved with the experiment); each still ends on its own when its samples or
    variants run out (``is_finished`` also counts them)."""
    was = bool(getattr(search_alg, "_finished", False))
    search_alg._finished = False
    return was

