"""How a trial ended, decided in one place: completed, stopped or error.

    objective = Objective("val_acc", "max", budget=9)
    verdicts = read_verdicts(decision_log(sweep_dir).records())   # or schedulers.verdicts()
    objective.outcome(clock=3, verdict=verdicts.get(trial_id), errored=False)   # "stopped"

* ``error``: the loop raised (Tune's trial errored), or the scheduler failed it because it never
  reported ``experiment.metric`` (the verdict names the keys it did report).
* ``stopped``: the scheduler (ASHA) stopped it before its clock reached the budget; or the
  sweep's compute budget (``sweep.budget``) did, which its verdict's ``budget`` names.
* ``completed``: everything else (all ``scheduler.max_t`` epochs, or the loop returned early).

The verdicts come from the durable decision log (``sweeps.search.schedulers``), so the summary,
the live view and MLflow read the same answer, after a resume too.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

__all__ = ["Objective", "Verdict", "not_started", "read_verdicts", "WORST"]

WORST = 1e300  # what a NaN/inf metric counts as (signed to lose), finite so ASHA's percentiles work


@dataclass(frozen=True)
class Verdict:
    """What the scheduler decided about one trial."""

    stopped_at: float | None = None  # the clock at which it returned STOP
    error: str | None = None  # why it failed the trial
    budget: str | None = None  # the sweep.budget key that stopped it (sweeps.search.budget)


@dataclass(frozen=True)
class Objective:
    """The metric, its direction and every trial's epoch budget."""

    metric: str
    mode: str
    budget: float

    def worst(self) -> float:
        """The value a non-finite metric is judged as: loses to every real value.

        Example:
            >>> Objective("val_acc", "max", 9).worst() < 0 < Objective("loss", "min", 9).worst()
            True
        """
        return -WORST if self.mode == "max" else WORST

    def judged(self, value: Any) -> float | None:
        """The value a scheduler judges: the metric, or ``worst()`` when it is NaN/inf/not a
        number; None when there is no value."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(
                value):
            return self.worst()
        return float(value)

    def outcome(self, clock: float, verdict: Verdict | None, errored: bool) -> str:
        """``completed``, ``stopped`` or ``error`` (see the module docstring).

        Example:
            >>> o = Objective("val_acc", "max", 9)
            >>> o.outcome(3, Verdict(stopped_at=3), False), o.outcome(9, Verdict(9), False)
            ('stopped', 'completed')
            >>> o.outcome(6, None, False), o.outcome(2, Verdict(error="no val_acc"), False)
            ('completed', 'error')
        """
        if errored or (verdict is not None and verdict.error):
            return "error"
        if verdict is not None and verdict.stopped_at is not None and (
                verdict.stopped_at < self.budget and clock < self.budget):
            return "stopped"
        return "completed"


def not_started(verdict: Verdict | None, clock: float) -> bool:
    """Whether ``sweep.budget`` ended the trial before its first report: status ``not started``
    in the summary and ``sweeps status`` (``outcome`` still says ``stopped``).

    Example:
        >>> not_started(Verdict(stopped_at=0, budget="trials"), 0), not_started(None, 0)
        (True, False)
    """
    return verdict is not None and bool(verdict.budget) and not clock


def read_verdicts(records: list[dict[str, Any]]) -> dict[str, Verdict]:
    """Trial id -> its verdict, from the scheduler's decision log: a trial's first stop or
    its error; a reopen record (a grown ``scheduler.max_t``) forgets what came before it.

    Example:
        >>> read_verdicts([{"trial": "a", "action": "STOP", "epoch": 9},
        ...                {"trial": "a", "reopen": True}, {"trial": "a", "action": "STOP",
        ...                "epoch": 27}])["a"]
        Verdict(stopped_at=27, error=None, budget=None)
    """
    out: dict[str, Verdict] = {}
    for r in records:
        trial = r.get("trial")
        if trial is None:
            continue
        if r.get("reopen"):
            out.pop(trial, None)
        elif r.get("error"):
            out[trial] = Verdict(r.get("epoch"), str(r["error"]))
        elif r.get("action") == "STOP" and trial not in out:
            out[trial] = Verdict(stopped_at=r.get("epoch"), budget=r.get("budget"))
    return out
