"""Trial schedulers whose decisions survive a crash of the sweep driver.

    scheduler = make_scheduler(cfg, sweep_dir)        # ResumableASHA or ResumableFIFO
    ended = ended_trials(sweep_dir)                   # trial id -> last metrics, on resume

Tune does not save a scheduler's state with the experiment, so a restored ASHA starts with
empty rungs (ray#30838) and re-decides from scratch. These schedulers append every result they
judge (trial, clock ``epoch``, metric value, decision, wall-clock time ``t``) to
``<sweep dir>/state/scheduler.jsonl``, fsync'ed before the decision goes back to Tune. A restored
scheduler replays that log through the same ``_Bracket`` code first, so its rungs hold exactly
what they held at the crash and every later decision is the one the uninterrupted sweep would
have made from the same results.

The log also says which trials ended (stopped by the scheduler, or ran all epochs). Tune saves
its experiment state only every second or so, so a trial that ended just before a crash may
come back as unfinished; its driver then only reports the recorded final result again (see
``sweeps.execution.trial_driver``), and the scheduler stops it at once instead of training it
further.

Both judge on the trial's clock (``sweeps_epoch``, see ``sweeps.execution.clock``), never on a key
of the
loop's own, and both stop a trial when its clock reaches ``scheduler.max_t`` (the budget).
Before judging they screen each result: a NaN/inf metric is judged as the worst value (logged
once per trial), and a trial whose clock reaches the first judgement (ASHA's grace period, or
epoch 1) without ever reporting the metric is stopped with an error naming the keys it did
report (``sweeps.search.outcome`` then calls it ``error``). Results without the metric are otherwise
fine: a loop may report a training loss between evaluations.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

from sweeps.protocol import CLOCK_KEY
from sweeps.search.outcome import Objective, Verdict, read_verdicts
from sweeps.tracking.callback import NOT_METRICS
from sweeps.tracking.journal import Journal

__all__ = ["ResumableASHA", "ResumableFIFO", "ended_trials", "decision_log", "verdicts",
           "LOG_NAME"]

log = logging.getLogger(__name__)
LOG_NAME = "scheduler"
_AUTO = NOT_METRICS - {"epoch", CLOCK_KEY}  # Tune's bookkeeping (the clock is the sweep's own)


def _reported(key: str) -> bool:
    """Whether a result key is one the loop reported (not Tune's or the sweep's bookkeeping)."""
    return key not in _AUTO and not key.startswith(("sweeps_", "config/"))


def decision_log(sweep_dir: str | Path) -> Journal:
    """The scheduler's log in ``<sweep dir>/state``."""
    return Journal(Path(sweep_dir) / "state", LOG_NAME)


def _metrics(result: dict[str, Any] | None) -> dict[str, Any]:
    """The trainable's own numbers from a Tune result (Tune's bookkeeping left out)."""
    out = {}
    for key, value in (result or {}).items():
        if key in _AUTO or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        out[key] = value if math.isfinite(value) else None
    return out


def verdicts(sweep_dir: str | Path) -> dict[str, Verdict]:
    """Trial id -> what this log decided about it (``sweeps.search.outcome.read_verdicts``)."""
    return read_verdicts(decision_log(sweep_dir).records())


def ended_trials(sweep_dir: str | Path) -> dict[str, dict[str, Any]]:
    """Trial id -> final metrics of every trial the log says ended (stopped or completed)."""
    return {r["trial"]: r.get("metrics", {}) for r in decision_log(sweep_dir).records()
            if _ends(r)}


def _ends(record: dict[str, Any]) -> bool:
    """Whether a logged judgement ended its trial (stopped, or ran all epochs)."""
    return bool(record.get("end")) or record.get("action") == TrialScheduler.STOP


class _TrialRef:
    """What ``_Bracket.on_result`` needs of a trial during replay: its id."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id = trial_id


class _Logged:
    """Shared by both schedulers: the log, the replay, the ended-trial short cut, the screen."""

    _log_dir: str
    _log: Journal | None
    _ended: dict[str, dict[str, Any]]
    _replayed: bool
    _objective: Objective
    _first_judgement: float
    _seen: set[str]  # trials that reported the metric at least once
    _warned: set[str]

    def _init_log(self, sweep_dir: str | Path, objective: Objective,
                  first_judgement: float) -> None:
        self._log_dir = str(sweep_dir)
        self._log, self._ended, self._replayed = None, {}, False
        self._objective, self._first_judgement = objective, first_judgement
        self._seen, self._warned = set(), set()

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles the scheduler into ``tuner.pkl``; the log is reopened lazily."""
        return {**self.__dict__, "_log": None, "_ended": {}, "_replayed": False}

    @property
    def log(self) -> Journal:
        if self._log is None:
            self._log = decision_log(self._log_dir)
        return self._log

    def _ensure_replayed(self) -> None:
        if self._replayed:
            return
        self._replayed = True
        for record in self.log.records():
            if record.get("value") is not None:
                self._seen.add(record["trial"])
            self._replay(record)
            if _ends(record):
                self._ended[record["trial"]] = record.get("metrics", {})

    def _replay(self, record: dict[str, Any]) -> None:
        """Re-apply one logged judgement to the in-memory state."""

    def _record(self, trial_id: str, result: dict[str, Any], **fields: Any) -> None:
        metrics = _metrics(result)
        self.log.append({"trial": trial_id, **fields, "t": round(time.time(), 3),
                         "metrics": metrics})
        if _ends(fields):
            self._ended[trial_id] = metrics

    def _screen(self, trial_id: str, result: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """(the result to judge, an error that fails the trial) for one result."""
        metric, objective = self._objective.metric, self._objective
        if metric in result:
            self._seen.add(trial_id)
            value = result[metric]
            judged = objective.judged(value)
            if judged != value:
                if trial_id not in self._warned:
                    self._warned.add(trial_id)
                    log.warning("trial %s reported %s=%r at epoch %s; judged as the worst value",
                                trial_id, metric, value, result.get(CLOCK_KEY))
                result = {**result, metric: judged}
            return result, None
        clock = result.get(CLOCK_KEY, 0)
        if trial_id in self._seen or clock < self._first_judgement:
            return result, None
        keys = sorted(k for k in result if _reported(k))
        return result, (f"never reported {metric} (experiment.metric) by epoch {clock:g}; it "
                        f"reported: {', '.join(keys) or 'nothing'}. Report it with "
                        f"ray.train.report({{'{metric}': ...}}), or set experiment.metric to "
                        "one of those keys")

    def _fail(self, trial_id: str, result: dict[str, Any], error: str) -> str:
        log.warning("trial %s: %s", trial_id, error)
        self._record(trial_id, result, epoch=result.get(CLOCK_KEY), value=None,
                     action=TrialScheduler.STOP, error=error)
        return TrialScheduler.STOP

    def _complete_unseen(self, trial_id: str, result: dict[str, Any] | None) -> dict[str, Any]:
        """The end record's extra fields for a trial that ended without ever reporting the
        metric (its loop returned early): an error naming what it did report."""
        if trial_id in self._seen or any(r.get("trial") == trial_id and r.get("error")
                                         for r in self.log.records()):
            return {}
        result = result or {}
        keys = sorted(k for k in result if _reported(k))
        return {"error": f"never reported {self._objective.metric} (experiment.metric); it "
                         f"reported: {', '.join(keys) or 'nothing'}"}


class ResumableASHA(_Logged, ASHAScheduler):
    """``ASHAScheduler`` (one bracket per trial, as upstream) on the trial clock, with a
    replayable decision log."""

    def __init__(self, sweep_dir: str | Path, objective: Objective, **kwargs: Any) -> None:
        ASHAScheduler.__init__(self, time_attr=CLOCK_KEY, max_t=objective.budget, **kwargs)
        self._init_log(sweep_dir, objective, kwargs.get("grace_period", 1))

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self._ensure_replayed()
        super().on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        self._ensure_replayed()
        if trial.trial_id in self._ended:  # ended before an interruption; only re-reported
            return TrialScheduler.STOP
        result, error = self._screen(trial.trial_id, result)
        if error:
            return self._fail(trial.trial_id, result, error)
        action = super().on_trial_result(tune_controller, trial, result)
        if self._time_attr in result and self._metric in result:
            bracket = self._brackets.index(self._trial_info[trial.trial_id])
            self._record(trial.trial_id, result, epoch=result[self._time_attr],
                         value=result[self._metric], bracket=bracket, action=action)
        return action

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        self._ensure_replayed()
        bracket = self._trial_info.get(trial.trial_id)
        result = result or trial.last_result
        if result and self._metric in result:
            result, _ = self._screen(trial.trial_id, result)
        if bracket is not None:
            super().on_trial_complete(tune_controller, trial, result)
        fields: dict[str, Any] = {"end": True, **self._complete_unseen(trial.trial_id, result)}
        if result and self._time_attr in result and self._metric in result and bracket:
            fields.update(epoch=result[self._time_attr], value=result[self._metric],
                          bracket=self._brackets.index(bracket))
        self._record(trial.trial_id, result, **fields)

    def _replay(self, record: dict[str, Any]) -> None:
        if "epoch" not in record or record.get("value") is None:
            return
        bracket = self._brackets[int(record.get("bracket", 0)) % len(self._brackets)]
        stopped_at_max = record["epoch"] >= self._max_t and self._stop_last_trials
        if not record.get("end") and stopped_at_max:
            self._num_stopped += 1
            return
        action = bracket.on_result(_TrialRef(record["trial"]), record["epoch"],
                                   self._metric_op * record["value"])
        if not record.get("end") and action == TrialScheduler.STOP:
            self._num_stopped += 1

    def rungs(self) -> list[tuple[float, dict[str, float]]]:
        """(milestone, {trial id: signed metric}) of the first bracket, highest milestone first."""
        return [(m, dict(r)) for m, r in self._brackets[0]._rungs]


class ResumableFIFO(_Logged, FIFOScheduler):
    """``FIFOScheduler`` (every trial trains until the budget or until its loop returns) with
    the same log and screen, for resume."""

    def __init__(self, sweep_dir: str | Path, objective: Objective) -> None:
        FIFOScheduler.__init__(self)
        self._init_log(sweep_dir, objective, 1)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        self._ensure_replayed()
        if trial.trial_id in self._ended:
            return TrialScheduler.STOP
        result, error = self._screen(trial.trial_id, result)
        if error:
            return self._fail(trial.trial_id, result, error)
        clock = result.get(CLOCK_KEY)
        action = (TrialScheduler.STOP if clock is not None and clock >= self._objective.budget
                  else TrialScheduler.CONTINUE)
        if clock is not None and self._objective.metric in result:
            self._record(trial.trial_id, result, epoch=clock,
                         value=result[self._objective.metric], action=action)
        return action

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        self._ensure_replayed()
        result = result or trial.last_result
        self._record(trial.trial_id, result, end=True,
                     **self._complete_unseen(trial.trial_id, result))
