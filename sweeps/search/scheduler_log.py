"""The decision log, its replay and the result screen that the sweep's schedulers share.

    class ResumableFIFO(_Logged, FIFOScheduler):   # sweeps.search.schedulers (and .pbt)
        self._init_log(sweep_dir, objective, first_judgement=1)
        result, error = self._screen(trial_id, result)   # then _fail, or _record a decision

``_Logged`` appends every judged result and each trial's end to
``<sweep dir>/state/scheduler.jsonl`` (``sweeps.search.decisions``), fsync'ed before the decision
goes back to Tune, and replays it on first use after a restore (``_replay``: each scheduler
re-applies a record to its own state). It stops a trial that ended before an interruption at once
(``_ended``), screens each result (a NaN/inf metric judged the worst; a trial that never reports the
metric by its first judgement (ASHA's grace period, or epoch 1) fails, naming the keys it did
report; a result carrying ``ERROR_KEY``, a trial driver ending its trial without a retry, e.g. out
of GPU memory, stops it with that error) and saves Tune's experiment state before a new trial starts
(``sweeps._ray.tune_state.save_experiment_state``). ``sweeps/search/schedulers.py`` says why.
"""

from __future__ import annotations

import difflib
import logging
import math
import numbers
import time
from pathlib import Path
from typing import Any

from ray.tune.schedulers import TrialScheduler

from sweeps._ray.tune_state import save_experiment_state
from sweeps.protocol import CLOCK_KEY, ERROR_KEY, NOT_METRICS
from sweeps.search.decisions import decision_log, ended_in, ends
from sweeps.search.outcome import Objective
from sweeps.storage.journal import Journal

__all__ = ["_Logged"]

log = logging.getLogger(__name__)
_AUTO = NOT_METRICS - {"epoch", CLOCK_KEY}  # Tune's bookkeeping (the clock is the sweep's own)


def _reported(key: str) -> bool:
    """Whether a result key is one the loop reported (not Tune's or the sweep's bookkeeping)."""
    return key not in _AUTO and not key.startswith(("sweeps_", "config/"))


def _metrics(result: dict[str, Any] | None) -> dict[str, Any]:
    """The trainable's own numbers from a Tune result (Tune's bookkeeping left out)."""
    return {key: value if math.isfinite(value) else None for key, value in (result or {}).items()
            if key not in _AUTO and not isinstance(value, bool) and isinstance(value, int | float)}


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
    # search.max_concurrent_trials: Tune's limit holds back only new suggestions, so trials
    # restored as pending (reopened by a grown max_t or a raised budget) are held here
    max_running: int | None = None

    def _init_log(self, sweep_dir: str | Path, objective: Objective,
                  first_judgement: float) -> None:
        self._log_dir = str(sweep_dir)
        self._log, self._ended, self._replayed = None, {}, False
        self._objective, self._first_judgement = objective, first_judgement
        self._seen, self._warned = set(), set()
        self._trials_saved = 0

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles the scheduler into ``tuner.pkl``; the log is reopened lazily."""
        return {**self.__dict__, "_log": None, "_ended": {}, "_replayed": False, "_trials_saved": 0}

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        """Tune asks before it starts any trial: first save its experiment state if trials
        were added since the last save, so a trial never runs (and opens an MLflow run, writes
        checkpoints) unknown to a resume after a kill -9."""
        trials = tune_controller.get_trials()
        if len(trials) > self._trials_saved:
            save_experiment_state(tune_controller)
            self._trials_saved = len(trials)
        cap = getattr(self, "max_running", None)
        if cap and sum(t.status == "RUNNING" for t in trials) >= cap:
            return None  # held trials (see hold_past_cap) wait their turn
        return super().choose_trial_to_run(tune_controller)  # type: ignore[misc]

    def hold_past_cap(self, tune_controller: Any, trial: Any) -> None:
        """A trial added pending while ``max_running`` trials are already pending or running
        (a resume restores every reopened trial as pending: a grown ``max_t``, a raised
        budget) waits paused. Tune starts pending trials without asking the scheduler
        (``TuneController._maybe_add_actors``), paused ones only through
        ``choose_trial_to_run``, which holds them while the cap is reached."""
        cap = getattr(self, "max_running", None)
        if not cap or trial.status != "PENDING":
            return
        active = sum(t.status in ("PENDING", "RUNNING") for t in tune_controller.get_trials()
                     if t is not trial)
        if active >= cap:
            trial.set_status("PAUSED")

    @property
    def log(self) -> Journal:
        if self._log is None:
            self._log = decision_log(self._log_dir)
        return self._log

    def _ensure_replayed(self) -> None:
        if self._replayed:
            return
        self._replayed = True
        records = self.log.records()
        self._ended = ended_in(records)
        for record in records:
            if record.get("value") is not None:
                self._seen.add(record["trial"])
            self._replay(record)

    def _replay(self, record: dict[str, Any]) -> None:
        """Re-apply one logged judgement to the in-memory state."""

    def _record(self, trial_id: str, result: dict[str, Any], **fields: Any) -> None:
        metrics = _metrics(result)
        self.log.append({"trial": trial_id, **fields, "t": round(time.time(), 3),
                         "metrics": metrics})
        if ends(fields):
            self._ended[trial_id] = metrics

    def _screen(self, trial_id: str, result: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """(the result to judge, an error that fails the trial) for one result."""
        if result.get(ERROR_KEY):  # the trial driver ended it (sweeps.loop.gpu_memory)
            return result, str(result[ERROR_KEY])
        metric, objective = self._objective.metric, self._objective
        if metric in result:
            self._seen.add(trial_id)
            value = result[metric]
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, numbers.Real)):
                return result, (f"reported {metric}={value!r} (a {type(value).__name__}) at "
                                f"epoch {result.get(CLOCK_KEY, 0):g}; experiment.metric must be a "
                                f"number: report it as one (float(...), .item())")
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
                        f"reported: {', '.join(keys) or 'nothing'}. {_close_key(metric, keys)}"
                        f"Report it with ray.train.report({{'{metric}': ...}}) (ray.tune."
                        "report in a Tune function), or set experiment.metric to one of those "
                        "keys")

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        """The trial's end, logged (the rung schedulers also record its last result)."""
        self._ensure_replayed()
        result = result or trial.last_result
        self._record(trial.trial_id, result, end=True,
                     **self._complete_unseen(trial.trial_id, result))

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


def _close_key(metric: str, keys: list[str]) -> str:
    """"did you mean K? " for the reported key closest to ``metric`` (a Transformers Trainer
    reports its evaluation metrics as ``eval_<name>``), or "".

    Example:
        >>> _close_key("accuracy", ["epoch", "eval_accuracy", "eval_loss"])
        'did you mean experiment.metric=eval_accuracy? '
    """
    close = [k for k in keys if k == f"eval_{metric}"] or \
        difflib.get_close_matches(metric, keys, n=1, cutoff=0.6)
    return f"did you mean experiment.metric={close[0]}? " if close else ""
