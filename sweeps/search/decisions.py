"""The scheduler's decision log, read without Ray: which trials ended, and how.

    ended_trials(sweep_dir)     # trial id -> final metrics of every trial that ended
    verdicts(sweep_dir)         # trial id -> Verdict (stopped, completed, failed and why)

The log (``<sweep dir>/state/scheduler.jsonl``) is written by the schedulers
(``sweeps.search.schedulers``, which import Ray); the driver, the trackers, a resume and
``sweeps status`` read it through here, so reading it never imports Ray.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweeps.layout import SweepLayout
from sweeps.protocol import SCHEDULER_LOG, TUNE_STOP
from sweeps.search.outcome import Verdict, read_verdicts
from sweeps.storage.journal import Journal

__all__ = ["LOG_NAME", "STOP", "decision_log", "verdicts", "ended_ids", "ended_trials", "ended_in",
           "ends", "reopens"]

LOG_NAME = SCHEDULER_LOG  # the file name, shared with the trial drivers
STOP = TUNE_STOP  # Tune's decision to stop a trial (sweeps._ray.compat checks the value)


def decision_log(sweep_dir: str | Path) -> Journal:
    """The scheduler's log in ``<sweep dir>/state``."""
    return Journal(SweepLayout(Path(sweep_dir)).state, LOG_NAME)


def verdicts(sweep_dir: str | Path) -> dict[str, Verdict]:
    """Trial id -> what this log decided about it (``sweeps.search.outcome.read_verdicts``)."""
    return read_verdicts(decision_log(sweep_dir).records())


def ended_trials(sweep_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Trial id -> final metrics of every trial the log says ended (``ended_in``)."""
    return ended_in(decision_log(sweep_dir).records())


def ended_in(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Trial id -> final metrics of every trial ``records`` (the log's) say ended (stopped or
    completed) and that no later record reopened (a grown ``scheduler.max_t``, a raised
    budget: ``sweeps.resume.grow.reopen_trials``).

    Example:
        >>> ended_in([{"trial": "a", "action": "STOP", "metrics": {"x": 1}},
        ...           {"trial": "b", "end": True}, {"trial": "b", "reopen": True}])
        {'a': {'x': 1}}
    """
    out: dict[str, dict[str, Any]] = {}
    for r in records:
        if "trial" not in r:
            continue
        if ends(r):
            out[r["trial"]] = r.get("metrics", {})
        elif reopens(r):
            out.pop(r["trial"], None)
    return out


def ended_ids(records: list[dict[str, Any]]) -> set[str]:
    """The trials ``records`` say ended and no later record reopened (``ended_in``).

    Example:
        >>> sorted(ended_ids([{"trial": "a", "end": True}, {"trial": "b", "action": "STOP"},
        ...                   {"trial": "c", "action": "CONTINUE"}]))
        ['a', 'b']
    """
    return set(ended_in(records))


def ends(record: dict[str, Any]) -> bool:
    """Whether a logged judgement ended its trial (stopped, or ran all epochs).

    Example:
        >>> ends({"trial": "a", "action": "STOP"}), ends({"trial": "a", "action": "CONTINUE"})
        (True, False)
    """
    return bool(record.get("end")) or record.get("action") == STOP


def reopens(record: dict[str, Any]) -> bool:
    """Whether a record reopened an ended trial: a sweep grown to a larger ``scheduler.max_t``
    continues the trials that had trained the old one (``sweeps.resume.grow``).

    Example:
        >>> reopens({"trial": "a", "reopen": True}), reopens({"trial": "a", "end": True})
        (True, False)
    """
    return bool(record.get("reopen"))
