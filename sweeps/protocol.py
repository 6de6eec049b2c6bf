"""Names that cross process boundaries, defined once.

    from sweeps.protocol import CLOCK_KEY, STEP_KEY, run_file

A sweep runs in several processes: the sweep driver (Tune, the scheduler, MLflow), one trial
actor per trial, the trial's Ray Train controller and its workers. What they hand each other
through Tune results or files in a trial's run directory (``<sweep dir>/train/<trial id>``) is
named here, so a rename is made in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["CLOCK_KEY", "STEP_KEY", "CHECKPOINT_PATH_KEY", "RANK_ATTR", "WORLD_SIZE_ATTR",
           "ERROR_KEY", "RESTARTS_KEY", "FAILURE_KEY", "NOT_METRICS", "REPORTS_FILE",
           "CONFIG_READS_FILE", "CLOCK_FILE", "TRIAL_FILE", "OUT_OF_MEMORY_FILE", "SCHEDULER_LOG",
           "TUNE_STOP", "run_file", "checkpoint_dir_name", "checkpoint_dir_epoch"]

# Added to every result by the trial's report bridge (sweeps.trial.backends.report_bridge): the
# trial's progress in epochs, 1-based and monotone (from the loop's own time attribute, shifted by
# one when the loop counts from 0, or the number of reports when it reports none). ASHA, the epoch
# budget and "completed vs stopped" all read this, never the loop's raw key.
CLOCK_KEY = "sweeps_epoch"
# The MLflow step of a result: the loop's own epoch when it reports an integral one, else the
# report count.
STEP_KEY = "sweeps_step"
# Tune's key for the checkpoint a result came with (ray.tune.integration.ray_train).
CHECKPOINT_PATH_KEY = "checkpoint_path"
# Set on the exception a failed trial of several ranks raises (sweeps.trial.backends.rank_error):
# which rank raised it, of how many (sweeps.report.failure reads them on the driver).
RANK_ATTR = "sweeps_rank"
WORLD_SIZE_ATTR = "sweeps_world_size"
# A trial driver's last result when it ends its trial as failed without raising (so that Tune
# does not retry it): the reason, which the scheduler makes the trial's verdict
# (sweeps.loop.gpu_memory: a trial out of GPU memory).
ERROR_KEY = "sweeps_error"
# On every report after a trial's loop raised and was restarted from its checkpoint (by the inline
# backend, or by Ray Train: trial.max_failures): how many times, and the last failure in one line
# (sweeps.trial.clock.TrialClock.restarted); the console, the summary and MLflow show them.
RESTARTS_KEY = "sweeps_restarts"
FAILURE_KEY = "sweeps_last_failure"

# Keys of a Tune result that are bookkeeping (Tune's, Train's, the bridge's), not the loop's
# metrics: every tracker (MLflow, TensorBoard) logs a result minus these.
NOT_METRICS = frozenset({
    "training_iteration", "time_total_s", "episodes_total", "timesteps_total", "node_ip",
    "hostname", "pid", "time_this_iter_s", "timestamp", "date", "time_since_restore",
    "timesteps_since_restore", "iterations_since_restore", "config", "checkpoint_dir_name",
    "done", "trial_id", "experiment_tag", "should_checkpoint", CHECKPOINT_PATH_KEY, "epoch",
    CLOCK_KEY, STEP_KEY, ERROR_KEY, RESTARTS_KEY, FAILURE_KEY,
})

# Files in a trial's run directory.
REPORTS_FILE = "reports.jsonl"  # TrialSession's rank-0 report log (fsync'ed per epoch)
CONFIG_READS_FILE = "config_reads.json"  # keys of the config the loop read (rank 0)
CLOCK_FILE = "clock.json"  # how the clock reads the loop's time attribute (see report_bridge)
TRIAL_FILE = "trial.json"  # the params the run directory was written for
# A worker's note that it ran out of GPU memory, one per rank (sweeps.loop.gpu_memory)
OUT_OF_MEMORY_FILE = "out_of_memory.rank{rank}.json"


# The scheduler's decision log, ``<sweep dir>/state/<SCHEDULER_LOG>.jsonl``: written by the
# driver's scheduler, read by every trial driver on resume (sweeps.search.schedulers).
SCHEDULER_LOG = "scheduler"
TUNE_STOP = "STOP"  # ray.tune.schedulers.TrialScheduler.STOP, as the decision log holds it

# A TrialSession checkpoint's directory in the run directory, written by the workers (rank 0)
# and read back by the trial driver, the resume repair and load_best.
_CHECKPOINT_DIR = re.compile(r"^checkpoint_epoch_(\d+)$")


def checkpoint_dir_name(epoch: int) -> str:
    """Directory name of a ``TrialSession`` checkpoint taken after ``epoch``.

    Example:
        >>> checkpoint_dir_name(7), checkpoint_dir_epoch("checkpoint_epoch_0007")
        ('checkpoint_epoch_0007', 7)
    """
    return f"checkpoint_epoch_{epoch:04d}"


def checkpoint_dir_epoch(name: str) -> int | None:
    """The epoch in a ``TrialSession`` checkpoint directory name (None for any other name)."""
    match = _CHECKPOINT_DIR.match(name)
    return int(match.group(1)) if match else None


def run_file(run_dir: str | Path, name: str) -> Path:
    """Path of one of the files above in a trial's run directory.

    Example:
        >>> run_file("/s/train/ab12", CLOCK_FILE).as_posix()
        '/s/train/ab12/clock.json'
    """
    return Path(run_dir) / name
