"""The compute budget inside Tune: a scheduler around the sweep's own one.

    python -m sweeps +experiment=digits sweep.budget.epochs=30
    scheduler = BudgetScheduler(make_scheduler(cfg, sweep_dir, params), ledger)  # driver/tuner.py

The rule and its records: docs/running.md#a-compute-budget. The sweep's scheduler
(``sweeps.search.schedulers``) judges first; a budget ``STOP`` record has no ``value``, so no
rung replays it (``sweeps.search.outcome.read_verdicts`` reads it as a budget verdict).

New trials: Tune asks ``choose_trial_to_run`` first; once a first epoch would not fit, each
``PENDING`` or PBT-``PAUSED`` trial is ended through ``stop_trial`` (what Ray's HyperBand does
for its pending trials: it runs the scheduler's, searcher's and callbacks' end hooks) and
recorded (epoch 0, or a paused trial's donor epoch), then ``set_finished`` on the search and a
``{"budget_finished": <name>}`` record. A sweep
resumed with a larger budget reopens its search (``sweeps._ray.tune.reopen_search``) and the
trials the budget ended (``sweeps.driver.fit`` reopens them before Tune restores).

Tune's ``Stopper.stop_all`` was not used: Tune then ends running trials at once without
their end hooks (``tune_controller.py:1318-1326``, ``_schedule_trial_stop``), so the last
epochs' records, MLflow runs and the decision log would miss their ends.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import TrialScheduler

from sweeps._ray.tune import ensure_trial_dir, reopen_search
from sweeps.protocol import CLOCK_KEY
from sweeps.search.budget import BudgetLedger, donor_epoch_of
from sweeps.search.budget_reopen import budget_raised

__all__ = ["BudgetScheduler"]

log = logging.getLogger(__name__)


class BudgetScheduler(TrialScheduler):
    """``inner`` (a ``_Logged`` scheduler) with the budget of ``ledger`` applied on top."""

    def __init__(self, inner: Any, ledger: BudgetLedger) -> None:
        super().__init__()
        self.inner, self.ledger = inner, ledger
        self._reopened = self._finished_logged = False

    # Delegated as they are
    @property
    def metric(self) -> Any:
        return self.inner.metric

    @property
    def supports_buffered_results(self) -> bool:
        return self.inner.supports_buffered_results

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        return self.inner.set_search_properties(metric, mode, **spec)

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        # A restore adds its trials after it restored the search (tune_controller.py:460-472):
        # the first moment a resume can reopen it, before Tune sees nothing left to run.
        self._reopen(tune_controller)
        self.inner.on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Any) -> None:
        self.inner.on_trial_error(tune_controller, trial)
        self.ledger.tick(force=True)

    def on_trial_remove(self, tune_controller: Any, trial: Any) -> None:
        self.inner.on_trial_remove(tune_controller, trial)

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict) -> None:
        self.inner.on_trial_complete(tune_controller, trial, result)
        self.ledger.tick(force=True)

    def debug_string(self) -> str:
        return f"{self.inner.debug_string()}\n{self.ledger.describe()}"

    def save(self, checkpoint_path: str) -> None:
        self.inner.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.inner.restore(checkpoint_path)

    # The budget
    def _reopen(self, tune_controller: Any) -> None:
        """Once per start: a sweep the budget ended whose budget has room now (a resume with a
        larger one) draws trials again."""
        if self._reopened:
            return
        self._reopened = True
        if self.ledger.over(None) is None and budget_raised(self.inner.log.records(),
                                                            self.ledger.limits):
            if reopen_search(tune_controller.search_alg):
                log.info("the budget has room again (%s): the search goes on",
                         self.ledger.describe())

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        self.ledger.observe(trial.trial_id, result.get(CLOCK_KEY), result.get("time_this_iter_s"))
        action = self.inner.on_trial_result(tune_controller, trial, result)
        if action == TrialScheduler.PAUSE:  # a PBT exploit: it goes on from the donor's epoch
            last = self.inner.log.records()[-1:]
            donor = donor_epoch_of(last[0]) if last else None
            if donor is not None and last[0].get("trial") == trial.trial_id:
                self.ledger.epochs.exploit(trial.trial_id, donor)
        if action != TrialScheduler.CONTINUE:
            return action
        spent = self.ledger.over(trial.trial_id)
        if spent is None:
            return action
        log.info("trial %s stopped at epoch %s: the next epoch would exceed "
                 "sweep.budget.%s (%s)", trial.trial_id, result.get(CLOCK_KEY), spent,
                 self.ledger.describe())
        self.inner._record(trial.trial_id, result, epoch=result.get(CLOCK_KEY),
                           action=TrialScheduler.STOP, budget=spent,
                           limit=self.ledger.limits[spent])
        return TrialScheduler.STOP

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        self.ledger.tick()
        self._reopen(tune_controller)
        spent = self.ledger.over(None)
        if spent is None:
            return self.inner.choose_trial_to_run(tune_controller)
        search = tune_controller.search_alg
        if not search.is_finished():
            search.set_finished()
            log.info("no new trial: its first epoch would exceed sweep.budget.%s (%s)", spent,
                     self.ledger.describe())
        if not self._finished_logged:  # a resume reopens the search only past this record
            self._finished_logged = True
            self.inner.log.append({"budget_finished": spent, "limit": self.ledger.limits[spent],
                                   "t": round(time.time(), 3)})
        for trial in list(tune_controller.get_trials()):
            if trial.status in (Trial.PENDING, Trial.PAUSED):
                ensure_trial_dir(trial)  # a trial never scheduled has none; Tune's results read it
                # a PAUSED trial (a PBT exploit not yet run on) stands at its donor's epoch
                clock = self.ledger.epochs.furthest(trial.trial_id)
                self.inner._record(trial.trial_id, {}, epoch=clock or 0,
                                   action=TrialScheduler.STOP, budget=spent,
                                   limit=self.ledger.limits[spent])
                tune_controller.stop_trial(trial)
        return None
