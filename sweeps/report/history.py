"""Every trial's reports from its first one, for the summary, the best model and the plots.

    results = with_history(results, sweep_dir)    # sweeps.driver.fit, before summarize

Tune's ``Result.metrics_dataframe`` is the trial's ``progress.csv``, which Tune brings back on
a resume only for a trial with a Tune checkpoint of its own. A sweeps trial's checkpoints are
Train's, so a trial that goes on after a resume or a grown ``scheduler.max_t`` starts a fresh
file with this start's reports: its best epoch (and the checkpoint saved there) could be one
Tune no longer lists, and the summary would call a later, worse epoch the trial's best. Every
report is also in the trial's report log (``sweeps.trial.report_log``, in its run directory):
the reports before the first one Tune lists come from there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from sweeps.layout import SweepLayout
from sweeps.protocol import CHECKPOINT_PATH_KEY as CHECKPOINT
from sweeps.protocol import CLOCK_KEY
from sweeps.trial.report_log import records

__all__ = ["with_history", "full_history", "own_metrics"]


class _WithHistory:
    """A Tune ``Result`` whose ``metrics_dataframe`` is the trial's whole history."""

    def __init__(self, result: Any, history: pd.DataFrame) -> None:
        self._result, self.metrics_dataframe = result, history

    def __getattr__(self, name: str) -> Any:
        return getattr(self._result, name)


def own_metrics(result: Any) -> tuple[str, dict[str, Any]]:
    """(the trial id of a Tune ``Result``, its last metrics). The id is its directory's name
    (sweeps names trial directories by id). A trial the budget ended while Tune was handing it
    the process of a trial that just ended (``reuse_actors``) carries that process's metrics,
    the other trial's id and config among them (Tune's auto-filled defaults): not its own.

    Example:
        >>> class R: path, metrics = "/s/f98d6eb9", {"trial_id": "bb15c362", "config": {}}
        >>> own_metrics(R())
        ('f98d6eb9', {})
    """
    trial_id = Path(result.path).name
    metrics = result.metrics or {}
    return trial_id, metrics if metrics.get("trial_id", trial_id) == trial_id else {}


def with_history(results: Any, sweep_dir: Path) -> list[Any]:
    """``results`` (a Tune ``ResultGrid``), each trial's history completed from its report log
    where Tune's starts after the trial's first report."""
    layout, out = SweepLayout(sweep_dir), []
    for result in results:
        trial_id = own_metrics(result)[0]
        history = full_history(result.metrics_dataframe, layout.run_dir(trial_id), trial_id)
        out.append(result if history is result.metrics_dataframe else _WithHistory(result, history))
    return out


def full_history(history: pd.DataFrame | None, run_dir: Path, trial_id: str) -> pd.DataFrame | None:
    """``history`` preceded by the logged reports older than its first one; when none of its
    rows has a checkpoint (a trial Tune holds as ended is replayed from the scheduler's record,
    which keeps numbers only), each given the one logged at its clock. ``history`` itself when
    the log adds nothing, or cannot be read. (A clock reported twice, after a restart or a PBT
    exploit, is matched only in that replayed case: elsewhere Tune's rows are the truth.)

    Example:
        >>> from sweeps.trial import report_log
        >>> run = Path(tempfile.mkdtemp())
        >>> for n, acc in [(1, 0.9), (2, 0.8), (3, 0.7)]:
        ...     report_log.append(run, {"acc": acc, CLOCK_KEY: float(n)}, n, f"/c/{n}")
        >>> tune_lists = pd.DataFrame({"acc": [0.7], CLOCK_KEY: [3.0], "trial_id": ["t1"]})
        >>> full_history(tune_lists, run, "t1")[["acc", CLOCK_KEY, "trial_id", CHECKPOINT]]
           acc  sweeps_epoch trial_id checkpoint_path
        0  0.9           1.0       t1             /c/1
        1  0.8           2.0       t1             /c/2
        2  0.7           3.0       t1             /c/3
    """
    listed = history is not None and not history.empty
    if listed and CLOCK_KEY not in history:
        return history
    try:
        logged = {_clock(r): r for r in records(run_dir)}  # a clock reported again: the last
    except OSError:
        return history
    logged.pop(None, None)
    if not logged:
        return history
    clocks = pd.to_numeric(history[CLOCK_KEY], errors="coerce") if listed else None
    first = clocks.min() if listed else None
    earlier = [r for c, r in sorted(logged.items()) if first is None or c < first]
    if listed and CHECKPOINT not in history:
        history = history.assign(**{CHECKPOINT: None})
    if listed and history[CHECKPOINT].isna().all():  # a replayed end: numbers only
        known = [logged.get(c, {}).get(CHECKPOINT) for c in clocks]
        missing = history[CHECKPOINT].isna() & pd.Series([k is not None for k in known],
                                                          index=history.index)
        if missing.any():
            history = history.copy()
            history.loc[missing, CHECKPOINT] = [k for k, m in zip(known, missing, strict=True) if m]
    if not earlier:
        return history
    before = pd.DataFrame(earlier).drop(columns=["n"], errors="ignore").assign(trial_id=trial_id)
    return pd.concat([before, history], ignore_index=True) if listed else before


def _clock(record: dict[str, Any]) -> float | None:
    clock = pd.to_numeric(pd.Series([record.get(CLOCK_KEY)]), errors="coerce").iloc[0]
    return None if pd.isna(clock) else float(clock)
