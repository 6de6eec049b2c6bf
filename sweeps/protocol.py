"""Names that cross process boundaries, defined once.

    from sweeps.protocol import CLOCK_KEY, STEP_KEY, run_file

A sweep runs in several processes: the sweep driver (Tune, the scheduler, MLflow), one trial
actor per trial, the trial's Ray Train controller and its workers. What they hand each other
through Tune results or files in a trial's run directory (``<sweep dir>/train/<trial id>``) is
named here, so a rename is made in one place.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CLOCK_KEY", "STEP_KEY", "CHECKPOINT_PATH_KEY", "REPORTS_FILE", "CONFIG_READS_FILE",
           "CLOCK_FILE", "TRIAL_FILE", "run_file"]

# Added to every result by the trial's report bridge (sweeps.execution.report_bridge): the trial's
# progress in epochs, 1-based and monotone (from the loop's own time attribute, shifted by one
# when the loop counts from 0, or the number of reports when it reports none). ASHA, the
# epoch budget and "completed vs stopped" all read this, never the loop's raw key.
CLOCK_KEY = "sweeps_epoch"
# The MLflow step of a result: the loop's own epoch when it reports an integral one, else the
# report count.
STEP_KEY = "sweeps_step"
# Tune's key for the checkpoint a result came with (ray.tune.integration.ray_train).
CHECKPOINT_PATH_KEY = "checkpoint_path"

# Files in a trial's run directory.
REPORTS_FILE = "reports.jsonl"  # TrialSession's rank-0 report log (fsync'ed per epoch)
CONFIG_READS_FILE = "config_reads.json"  # keys of the config the loop read (rank 0)
CLOCK_FILE = "clock.json"  # how the clock reads the loop's time attribute (see report_bridge)
TRIAL_FILE = "trial.json"  # the params the run directory was written for


def run_file(run_dir: str | Path, name: str) -> Path:
    """Path of one of the files above in a trial's run directory.

    Example:
        >>> run_file("/s/train/ab12", CLOCK_FILE).as_posix()
        '/s/train/ab12/clock.json'
    """
    return Path(run_dir) / name
