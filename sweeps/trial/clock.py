"""A trial's progress clock: the loop's own epoch key made 1-based, or its report count.

    clock = TrialClock.load(run_dir, time_attr="epoch", reports_before=3)
    result = clock.stamp({"epoch": 3, "val_acc": 0.9})   # adds sweeps_epoch=4, sweeps_step=3

ASHA's rungs, the epoch budget (``scheduler.max_t``) and "completed or stopped" all need one
monotone, 1-based count of epochs, but loops count their own way: ``TrialSession`` reports
``epoch`` 1, 2, ...; loops written from Ray Train's docs report ``epoch`` 0, 1, ...; the
Transformers callback reports ``epoch`` 1.0, 2.0, ...; some loops report no epoch at all. So:

* ``time_attr`` (``experiment.time_attr``, default ``epoch``) present in the trial's first report:
  the clock is that value, plus one if the first value was 0 (a 0-based loop).
* absent from the first report (or ``time_attr: null``): the clock is the number of reports.

How the trial reads its clock is decided on its first report and saved in ``clock.json`` in its run
directory, so a trial resumed from a checkpoint (its first report now says epoch 4) keeps the same
reading. The report count continues from the checkpoint Train resumes from (``reports_before``). The
MLflow step is the loop's own epoch when it is a whole number, else the report count.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sweeps.files import make_dirs, read_text, write_atomic
from sweeps.protocol import CLOCK_FILE, CLOCK_KEY, FAILURE_KEY, RESTARTS_KEY, STEP_KEY, run_file

__all__ = ["TrialClock", "numeric", "finite_float"]


def numeric(value: Any) -> bool:
    """A finite real number, numpy's too (not a bool).

    Example:
        >>> numeric(3), numeric(2.0), numeric(float("nan")), numeric(True), numeric("1")
        (True, True, False, False, False)
    """
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))


def finite_float(value: Any) -> float | None:
    """``value`` as a float when it is ``numeric``, else None: ``finite_float(2) == 2.0``."""
    return float(value) if numeric(value) else None


@dataclass
class TrialClock:
    """Turns each report of one trial into (clock, step); see the module docstring."""

    time_attr: str | None
    run_dir: str | None = None  # where clock.json lives; None: not saved (tests)
    by: str | None = None  # "attr" or "reports"; None until the first report
    offset: float = 0.0
    count: int = 0  # reports so far (continued across resumes)
    last_clock: float = 0.0
    last_step: int = 0
    restarts: int = 0  # restarts of the loop after it raised, in this trial process
    failure: str = ""  # the last one, in one line

    def restarted(self, who: str, error: BaseException, attempt: int, limit: int,
                  resumed: float | None) -> str:
        """Note that the loop raised ``error`` (``who``: "the loop", "rank 1 of 2") and runs
        again from its latest checkpoint (written at epoch ``resumed``; None: none) as attempt
        ``attempt`` of ``limit`` (-1: unlimited); the line the console and MLflow show, carried
        by every report from now on.

        Example:
            >>> print(TrialClock("epoch").restarted("rank 1 of 2", RuntimeError("boom"), 2, 3,
            ...                                     None))
            rank 1 of 2 raised RuntimeError: boom before its first report; restarted from the
            start, attempt 2 of 3 (trial.max_failures)
        """
        cause = getattr(error, "cause", None)
        error = cause if isinstance(cause, BaseException) else error
        text = (str(error).strip().splitlines() or [""])[0][:200]
        self.restarts += 1
        when = f"after epoch {self.last_clock:g}" if self.last_clock else "before its first report"
        self.failure = (f"{who} raised {type(error).__name__}{': ' + text if text else ''} "
                        f"{when}; restarted from "
                        + (f"the checkpoint of epoch {resumed:g}" if resumed else "the start")
                        + f", attempt {attempt} of {'unlimited' if limit == -1 else limit} "
                        "(trial.max_failures)")
        self._save()
        return self.failure

    @classmethod
    def load(cls, run_dir: str | Path, time_attr: str | None,
             reports_before: int = 0) -> TrialClock:
        """The clock of the trial in ``run_dir``, as decided on its first report if any."""
        clock = cls(time_attr, str(run_dir), count=reports_before)
        try:
            saved = json.loads(read_text(run_file(run_dir, CLOCK_FILE)))
            clock.restarts, clock.failure = int(saved.get("restarts", 0)), saved.get("failure", "")
            if saved.get("time_attr") == time_attr:
                clock.by, clock.offset = saved["by"], float(saved["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return clock

    def _decide(self, metrics: dict[str, Any]) -> None:
        value = metrics.get(self.time_attr) if self.time_attr else None
        if numeric(value):
            self.by, self.offset = "attr", 1.0 if value == 0 else 0.0
        else:
            self.by = "reports"
        self._save()

    def _save(self) -> None:
        """How the clock reads the loop, and its restarts, in ``clock.json`` (a retried or
        resumed trial goes on from them)."""
        if self.run_dir is not None:
            path = run_file(self.run_dir, CLOCK_FILE)
            make_dirs(path.parent)
            write_atomic(path, json.dumps({k: v for k, v in asdict(self).items() if k in (
                "time_attr", "by", "offset", "restarts", "failure")}))

    def stamp(self, metrics: dict[str, Any], advance: bool = True) -> dict[str, Any]:
        """``metrics`` plus ``CLOCK_KEY`` and ``STEP_KEY``; ``advance=False`` for a report that
        is only handed to Tune again (already counted before an interruption).

        Example:
            >>> clock = TrialClock("epoch")
            >>> [clock.stamp({"epoch": e})["sweeps_epoch"] for e in (0, 1, 2)]
            [1.0, 2.0, 3.0]
            >>> clock = TrialClock("epoch")
            >>> [clock.stamp({"loss": 1.0})["sweeps_epoch"] for _ in range(2)]
            [1, 2]
        """
        if self.by is None:
            self._decide(metrics)
        count = self.count + 1
        if advance:
            self.count = count
        value = metrics.get(self.time_attr) if self.time_attr else None
        if self.by == "attr" and numeric(value):
            clock: float = float(value) + self.offset
            step = int(value) if float(value).is_integer() else count
        elif self.by == "attr":  # a report without the epoch (e.g. a mid-epoch loss)
            clock, step = self.last_clock, max(self.last_step, 1)
        else:
            clock, step = count, count
        if advance:
            self.last_clock, self.last_step = clock, step
        restarts = {RESTARTS_KEY: self.restarts, FAILURE_KEY: self.failure} if self.restarts else {}
        return {**metrics, CLOCK_KEY: clock, STEP_KEY: step, **restarts}
