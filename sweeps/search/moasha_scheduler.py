"""MO-ASHA for a multi-objective sweep, with the replayable decision log of the other schedulers.

    scheduler = ResumableMOASHA(sweep_dir, objective, {"val_acc": "max", "n_params": "min"})

Built by ``sweeps.driver.tuner.make_scheduler`` for ``scheduler=asha`` when
``experiment.metrics`` names two or more objectives. The rungs are
``sweeps.search.moasha.MOHalving`` (Syne Tune's promotion rule by non-dominated sort, stated
there); the log, its replay, the ended-trial short cut and the screen are ``_Logged``'s
(``sweeps.search.scheduler_log``), as for ``ResumableASHA`` (``sweeps.search.schedulers``).

Each judged result is logged with every objective's value (``values``: metric -> the value
judged, ``value``: the primary's, which ``sweeps.search.outcome`` and the summary read), so a
restored scheduler replays the rungs exactly and decides later results as the uninterrupted one.

The screen per objective (NaN/inf in any: worst on all, logged once per trial; a missing one:
its last reported value): docs/experiments.md#early-stopping-with-several-objectives-mo-asha.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from sweeps.errors import ConfigError
from sweeps.protocol import CLOCK_KEY
from sweeps.search.asha import logged_point, replay_record
from sweeps.search.moasha import MOHalving
from sweeps.search.outcome import WORST, Objective
from sweeps.search.scheduler_log import _close_key, _reported
from sweeps.search.schedulers import _Rungs

__all__ = ["ResumableMOASHA"]

log = logging.getLogger(__name__)


class ResumableMOASHA(_Rungs, FIFOScheduler):
    """MO-ASHA on the trial clock (``max_t`` = the Objective's budget), one bracket.

    Args:
        sweep_dir: the sweep directory (the log is ``state/scheduler.jsonl`` in it).
        objective: the primary metric, its mode and the budget (``experiment.metric``).
        objectives: every objective and its direction (``experiment.metrics``); the primary
            must be one of them, and is ranked first (it seeds each front's epsilon-net).
        grace_period, reduction_factor, stop_last_trials: as ``ResumableASHA``.
    """

    _label = "MO-ASHA"

    def __init__(self, sweep_dir: str | Path, objective: Objective, objectives: dict[str, str],
                 grace_period: float = 1, reduction_factor: float = 4,
                 stop_last_trials: bool = True) -> None:
        if objectives.get(objective.metric) != objective.mode:
            raise ConfigError("experiment.metrics", dict(objectives),
                              f"does not hold the primary {objective.metric}: {objective.mode}",
                              "build the scheduler from experiment.metric and experiment.metrics")
        FIFOScheduler.__init__(self)
        self._halving = MOHalving(grace_period, objective.budget, reduction_factor,
                                  stop_last_trials)
        names = [objective.metric] + [m for m in objectives if m != objective.metric]
        self._modes = {m: objectives[m] for m in names}  # primary first
        self._live: set[str] = set()
        self._num_stopped = 0
        # trial -> each objective's last reported value: a result missing one (a loop that
        # reports n_params once) is judged with the last value it reported
        self._last_each: dict[str, dict[str, Any]] = {}
        self._warned_point: set[str] = set()
        self._init_log(sweep_dir, objective, grace_period)

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_last_each": {}}

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        self._ensure_replayed()
        trial_id = trial.trial_id
        if trial_id in self._ended:  # ended before an interruption; only re-reported
            return TrialScheduler.STOP
        _, error = self._screen(trial_id, result)  # the original result is judged: a NaN
        error = error or self._screen_others(trial_id, result)  # primary spoils every objective
        if error:
            return self._fail(trial_id, result, error)
        reported = {m: result[m] for m in self._modes if result.get(m) is not None}
        judged = self._judged(trial_id, result)
        if judged is None:
            if reported:  # a value a later judgement carries: logged, so a resume has it too
                self._record(trial_id, result, reported=reported)
            return TrialScheduler.CONTINUE
        clock, values = judged
        stop = self._halving.judge(trial_id, clock, self._signed(values))
        action = TrialScheduler.STOP if stop else TrialScheduler.CONTINUE
        self._num_stopped += stop
        self._record(trial_id, result, epoch=clock, value=values[self._objective.metric],
                     values=values, reported=reported, bracket=0, action=action)
        return action

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        self._ensure_replayed()
        result = result or trial.last_result or {}
        fields: dict[str, Any] = {"end": True, **self._complete_unseen(trial.trial_id, result)}
        judged = self._judged(trial.trial_id, result)
        if trial.trial_id in self._live and judged is not None:  # as Ray: recorded, not judged
            self._live.discard(trial.trial_id)
            clock, values = judged
            self._halving.on_result(trial.trial_id, clock, self._signed(values))
            fields.update(epoch=clock, value=values[self._objective.metric], values=values,
                          bracket=0, reported={m: result[m] for m in self._modes
                                               if result.get(m) is not None})
        self._record(trial.trial_id, result, **fields)

    def _screen_others(self, trial_id: str, result: dict[str, Any]) -> str | None:
        """The error that fails a trial which never reported one of the objectives by the
        grace period (``_Logged._screen`` checks the primary), else None."""
        seen = self._last_each.setdefault(trial_id, {})
        seen.update({m: result[m] for m in self._modes if result.get(m) is not None})
        clock = result.get(CLOCK_KEY, 0)
        missing = [m for m in self._modes if m not in seen]
        if not missing or clock < self._first_judgement:
            return None
        keys = sorted(k for k in result if _reported(k))
        metric = missing[0]
        hint = _close_key(metric, keys).replace("experiment.metric=", "")
        return (f"never reported {metric} (one of experiment.metrics) by epoch {clock:g}; it "
                f"reported: {', '.join(keys) or 'nothing'}. {hint}Report it with "
                f"ray.train.report({{'{metric}': ...}}), or name reported keys in "
                "experiment.metrics")

    def _judged(self, trial_id: str, result: dict[str, Any]
                ) -> tuple[float, dict[str, float]] | None:
        """(clock, metric -> value judged) of a result holding the clock and the primary
        metric, each other objective it lacks taken from the trial's last report of it; a
        non-finite value anywhere makes every objective its worst. None otherwise (no clock,
        no primary, or an objective never reported yet)."""
        clock = result.get(CLOCK_KEY)
        last = self._last_each.get(trial_id, {})
        raw = {m: result[m] if result.get(m) is not None else last.get(m) for m in self._modes}
        if clock is None or result.get(self._objective.metric) is None or any(
                v is None for v in raw.values()):
            return None
        finite = all(isinstance(v, int | float) and not isinstance(v, bool)
                     and math.isfinite(v) for v in raw.values())
        if finite:
            return clock, {m: float(v) for m, v in raw.items()}
        if trial_id not in self._warned_point:
            self._warned_point.add(trial_id)
            log.warning("trial %s reported %s at epoch %s; judged as the worst on every "
                        "objective", trial_id, raw, clock)
        return clock, {m: (-WORST if d == "max" else WORST) for m, d in self._modes.items()}

    def _signed(self, values: dict[str, float]) -> tuple[float, ...]:
        """The point ``MOHalving`` ranks: higher is better on every objective, primary first."""
        return tuple(values[m] * (1.0 if d == "max" else -1.0) for m, d in self._modes.items())

    def _replay(self, record: dict[str, Any]) -> None:
        if "trial" in record:  # the values as reported (a NaN too), as _screen_others keeps them
            reported = record.get("reported", record.get("values") if "epoch" in record else None)
            self._last_each.setdefault(record["trial"], {}).update(reported or {})
        self._num_stopped += bool(replay_record(self._halving, record,
                                                logged_point(record, self._modes)))
