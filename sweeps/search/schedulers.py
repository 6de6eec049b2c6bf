"""Trial schedulers whose decisions survive a crash of the sweep driver.

    scheduler = make_scheduler(cfg, sweep_dir, params)  # ResumableASHA or ResumableFIFO
    ended = ended_trials(sweep_dir)                   # trial id -> last metrics, on resume

Tune does not save a scheduler's state with the experiment, so a restored ASHA starts with empty
rungs (ray#30838) and re-decides from scratch. These schedulers append every result they judge
(trial, clock ``epoch``, metric value, decision, wall-clock time ``t``) to
``<sweep dir>/state/scheduler.jsonl``, fsync'ed before the decision goes back to Tune. A restored
scheduler replays that log through the same rung code (``sweeps.search.asha``) first, so its
rungs hold exactly what they held at the crash and every later decision is the one the
uninterrupted sweep would have made from the same results.

The log also says which trials ended (stopped by the scheduler, or ran all epochs). Tune saves its
experiment state only every second or so, so a trial that ended just before a crash may come back as
unfinished; its driver then only reports the recorded final result again (see
``sweeps.trial.driver``), and the scheduler stops it at once instead of training it further.

Both judge on the trial's clock (``sweeps_epoch``, see ``sweeps.trial.clock``), never on a key
of the loop's own, and both stop a trial when its clock reaches ``scheduler.max_t`` (the budget).
The log, its replay and the screen of each result are ``_Logged``'s
(``sweeps.search.scheduler_log``, shared with ``sweeps.search.pbt``). A result without the
metric is otherwise fine: a loop may report a training loss between evaluations.
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from sweeps.errors import ConfigError
from sweeps.protocol import CLOCK_KEY
from sweeps.search.asha import AsyncHalving, logged_point, replay_record
from sweeps.search.decisions import LOG_NAME, decision_log, ended_trials, verdicts
from sweeps.search.outcome import Objective
from sweeps.search.scheduler_log import _Logged

__all__ = ["ResumableASHA", "ResumableFIFO", "ended_trials", "decision_log", "verdicts", "LOG_NAME"]


class _Rungs(_Logged):
    """What Tune asks of a rung scheduler (ASHA, MO-ASHA) besides its decisions: the metric
    and mode it judges (the Objective's primary), and which trials are live."""

    _live: set[str]
    _halving: AsyncHalving
    _num_stopped: int
    _label = "AsyncHyperBand"  # what debug_string names it, as Ray's

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with empty rungs: the log, replayed on first use, is what fills them."""
        h = self._halving
        fresh = type(h)(h.grace_period, h.max_t, h.rf, h.stop_last_trials)
        return {**super().__getstate__(), "_halving": fresh, "_num_stopped": 0}

    def rungs(self) -> list[tuple[float, dict[str, Any]]]:
        """(milestone, {trial id: signed metric, or point}), highest milestone first."""
        self._ensure_replayed()
        return self._halving.rungs()

    def debug_string(self) -> str:
        self._ensure_replayed()
        return f"Using {self._label}: num_stopped={self._num_stopped}\n" + self._halving.describe()

    @property
    def metric(self) -> str:
        return self._objective.metric

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Tune passes ``TuneConfig``'s metric and mode: they must be the Objective's."""
        o = self._objective
        if (metric or o.metric, mode or o.mode) != (o.metric, o.mode):
            raise ConfigError("experiment.metric/mode", f"{metric}/{mode}",
                              f"differs from the scheduler's {o.metric}/{o.mode}",
                              "build the scheduler and TuneConfig from the same Objective")
        return True

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self._ensure_replayed()
        self._live.add(trial.trial_id)
        self.hold_past_cap(tune_controller, trial)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self._live.discard(trial.trial_id)


class ResumableASHA(_Rungs, FIFOScheduler):
    """ASHA on the trial clock (``max_t`` = the Objective's budget), one bracket as Tune's
    ``ASHAScheduler`` by default, with a replayable decision log. The rungs are
    ``sweeps.search.asha.AsyncHalving`` (Ray's decisions, none of Ray's private state);
    ``grace_period``, ``reduction_factor`` and ``stop_last_trials`` mean what they mean to Ray.

    Deliberate divergences from Ray's ``ASHAScheduler``: metric and mode are the Objective's
    (``set_search_properties`` accepts them again, refuses others); no bracket is drawn (Ray
    draws from numpy's global generator even for one bracket); a metric of None is not judged
    (Ray raises ``TypeError``); a trial never added is judged (Ray raises ``KeyError``).
    """

    def __init__(self, sweep_dir: str | Path, objective: Objective, grace_period: float = 1,
                 reduction_factor: float = 4, stop_last_trials: bool = True) -> None:
        FIFOScheduler.__init__(self)
        self._halving = AsyncHalving(grace_period, objective.budget, reduction_factor,
                                     stop_last_trials)
        self._sign = 1.0 if objective.mode == "max" else -1.0
        self._live: set[str] = set()  # added and not yet completed or removed
        self._num_stopped = 0
        self._init_log(sweep_dir, objective, grace_period)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        self._ensure_replayed()
        if trial.trial_id in self._ended:  # ended before an interruption; only re-reported
            return TrialScheduler.STOP
        result, error = self._screen(trial.trial_id, result)
        if error:
            return self._fail(trial.trial_id, result, error)
        judged = self._judged(result)
        if judged is None:
            return TrialScheduler.CONTINUE
        stop = self._halving.judge(trial.trial_id, judged[0], self._sign * judged[1])
        action = TrialScheduler.STOP if stop else TrialScheduler.CONTINUE
        self._num_stopped += stop
        self._record(trial.trial_id, result, epoch=judged[0], value=judged[1], bracket=0,
                     action=action)
        return action

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        self._ensure_replayed()
        result = result or trial.last_result or {}
        if self._objective.metric in result:
            result, _ = self._screen(trial.trial_id, result)
        fields: dict[str, Any] = {"end": True, **self._complete_unseen(trial.trial_id, result)}
        judged = self._judged(result)
        if trial.trial_id in self._live and judged is not None:  # as Ray: recorded, not judged
            self._live.discard(trial.trial_id)
            self._halving.on_result(trial.trial_id, judged[0], self._sign * judged[1])
            fields.update(epoch=judged[0], value=judged[1], bracket=0)
        self._record(trial.trial_id, result, **fields)

    def _judged(self, result: dict[str, Any]) -> tuple[float, float] | None:
        """(clock, metric) of a result that has both as numbers, else None."""
        clock, value = result.get(CLOCK_KEY), result.get(self._objective.metric)
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        return None if clock is None or not number else (clock, float(value))

    def _replay(self, record: dict[str, Any]) -> None:
        # Every log so far has one bracket, so a record's "bracket" (always 0) is not read.
        o = self._objective
        self._num_stopped += bool(replay_record(self._halving, record,
                                                logged_point(record, {o.metric: o.mode})))


class ResumableFIFO(_Logged, FIFOScheduler):
    """``FIFOScheduler`` (every trial trains until the budget or until its loop returns) with
    the same log and screen, for resume."""

    def __init__(self, sweep_dir: str | Path, objective: Objective) -> None:
        FIFOScheduler.__init__(self)
        self._init_log(sweep_dir, objective, 1)

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self.hold_past_cap(tune_controller, trial)

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
