"""Every report of a trial, durably, before Tune sees it; what a resumed trial must hand Tune.

    append(run_dir, stamped_metrics, n=7, checkpoint="/s/train/ab12/checkpoint_...")  # bridge
    unseen(run_dir, judged=3)   # on resume: reports up to the restored checkpoint Tune never saw

Train runs ahead of Tune: when the sweep driver dies, the trial's last reports may be trained,
checkpointed and registered by Train but never seen by Tune (the result was still on its way). The
loop then resumes after that checkpoint and never reports those epochs again, so ASHA would not
judge them and MLflow would miss them. The report bridge (``sweeps.trial.backends.report_bridge``,
in the trial's Train controller) appends each report here, fsync'ed, right after Train registered
its checkpoint. On resume, the trial driver re-reports the ones the restored checkpoint covers and
the scheduler's log has not judged, oldest first, before training goes on.

One JSON line per report: the stamped metrics, ``n`` (the report's 1-based index in the trial)
and ``checkpoint_path`` (or null). A torn last line (a crash mid-write) is skipped.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.files import append_line, read_lines
from sweeps.protocol import CHECKPOINT_PATH_KEY, CLOCK_KEY, REPORTS_FILE, run_file
from sweeps.resume.train_runs import latest_checkpoint

if TYPE_CHECKING:
    from sweeps.trial.clock import TrialClock

__all__ = ["append", "record", "records", "restored_count", "reports_before", "unseen"]


def append(run_dir: str | Path, metrics: dict[str, Any], n: int, checkpoint: str | None) -> None:
    """Add one report, fsync'ed."""
    line = json.dumps({**metrics, "n": n, CHECKPOINT_PATH_KEY: checkpoint}, default=float)
    append_line(run_file(run_dir, REPORTS_FILE), line)


def record(clock: TrialClock, metrics: dict[str, Any], checkpoint: str | None) -> dict[str, Any]:
    """One report of a trial as it happens: stamped with the trial's clock and, when the clock
    has a run directory, logged; returns the stamped metrics, to hand to Tune. Used by the
    Train -> Tune bridge and by an inline trial (``sweeps.trial.backends.inline``)."""
    stamped = clock.stamp(metrics)
    if clock.run_dir is not None:
        append(clock.run_dir, stamped, clock.count, checkpoint)
    return stamped


def records(run_dir: str | Path) -> list[dict[str, Any]]:
    """Every complete line, in order."""
    out = []
    for line in read_lines(run_file(run_dir, REPORTS_FILE)):
        with contextlib.suppress(ValueError):  # torn last line
            out.append(json.loads(line))
    return out


def _upto_restored(run_dir: str | Path) -> list[dict[str, Any]]:
    """The log up to the last line of the checkpoint Train will resume from."""
    latest = latest_checkpoint(Path(run_dir))
    lines = records(run_dir)
    if latest is None:
        return []
    name = latest[0]
    at = max((i for i, r in enumerate(lines)
              if Path(str(r.get(CHECKPOINT_PATH_KEY) or "")).name == name), default=None)
    return [] if at is None else lines[:at + 1]


def restored_count(run_dir: str | Path) -> int | None:
    """Reports the trial had made when it wrote the checkpoint it resumes from (None: the log
    does not know that checkpoint)."""
    lines = _upto_restored(run_dir)
    return int(lines[-1]["n"]) if lines else None


def restored_clock(run_dir: str | Path) -> float | None:
    """The trial's clock (``sweeps.trial.clock``) when it wrote the checkpoint it resumes from
    (None: no checkpoint, or one the log does not know): what any loop's checkpoints resume
    from, whatever they are named."""
    lines = _upto_restored(run_dir)
    clock = lines[-1].get(CLOCK_KEY) if lines else None
    return float(clock) if isinstance(clock, int | float) else None


def reports_before(run_dir: str | Path) -> int:
    """How many reports the trial had made when it wrote the checkpoint it resumes from: the
    log's count, else Train's snapshot's (a log that does not know that checkpoint), else 0."""
    restored = restored_count(run_dir)
    if restored is not None:
        return restored
    latest = latest_checkpoint(Path(run_dir))
    return latest[2] if latest else 0


def unseen(run_dir: str | Path, judged: float) -> list[dict[str, Any]]:
    """Reports the restored checkpoint covers whose clock is past ``judged`` (the latest clock
    the scheduler's log has for the trial), oldest first, without the log's ``n``."""
    latest: dict[int, dict[str, Any]] = {}
    for record in _upto_restored(run_dir):  # a report made again after a restore replaces it
        latest[int(record["n"])] = record
    return [{k: v for k, v in r.items() if k != "n"} for _, r in sorted(latest.items())
            if float(r.get(CLOCK_KEY) or 0) > judged]
