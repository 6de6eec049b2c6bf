"""The budget's scheduler on its own: the decision it adds after the sweep's scheduler, the
trials it ends before they start, and a resume that has room again (no Ray started; the Tune
controller is a stand-in with the calls a scheduler may make)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sweeps.protocol import CLOCK_KEY
from sweeps.search.budget import BudgetLedger
from sweeps.search.budget_scheduler import BudgetScheduler
from sweeps.search.decisions import decision_log, verdicts
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import ResumableASHA, ResumableFIFO


class Search:
    def __init__(self, finished: bool = False) -> None:
        self._finished = finished

    def is_finished(self) -> bool:
        return self._finished

    def set_finished(self) -> None:
        self._finished = True


class Controller:
    """What Tune's ``TrialRunnerWrapper`` lets a scheduler call that the budget uses."""

    def __init__(self, trials: list, search: Search) -> None:
        self.trials, self.search_alg, self.stopped = trials, search, []

    def get_trials(self) -> list:
        return self.trials

    def stop_trial(self, trial) -> None:
        self.stopped.append(trial.trial_id)
        trial.status = "TERMINATED"


def trial(trial_id: str, status: str = "RUNNING") -> SimpleNamespace:
    return SimpleNamespace(trial_id=trial_id, status=status, last_result={},
                           relative_logdir=trial_id, init_local_path=lambda: None)


def result(epoch: int, acc: float) -> dict:
    return {CLOCK_KEY: epoch, "acc": acc, "time_this_iter_s": 1.0}


@pytest.mark.parametrize("inner", ["fifo", "asha"])
def test_a_trial_stops_at_the_report_after_which_its_next_epoch_would_not_fit(
        tmp_path, inner) -> None:
    objective = Objective("acc", "max", 9)
    scheduler = (ResumableFIFO(tmp_path, objective) if inner == "fifo"
                 else ResumableASHA(tmp_path, objective, 1, 3))
    budget = BudgetScheduler(scheduler, BudgetLedger.load(tmp_path, {"epochs": 3}, 1, 1))
    ctrl, a = Controller([], Search()), trial("a")
    budget.on_trial_add(ctrl, a)
    assert [budget.on_trial_result(ctrl, a, result(e, 0.1 * e)) for e in (1, 2, 3)] == [
        "CONTINUE", "CONTINUE", "STOP"]
    assert verdicts(tmp_path)["a"].budget == "epochs"
    assert verdicts(tmp_path)["a"].stopped_at == 3
    last = decision_log(tmp_path).records()[-1]
    assert last["budget"] == "epochs" and "value" not in last  # no rung replays it


def test_the_sweeps_own_stop_is_kept_as_its_own(tmp_path) -> None:
    """ASHA stopping a trial is ASHA's verdict, even with the budget spent too."""
    scheduler = ResumableASHA(tmp_path, Objective("acc", "max", 9), 1, 3)
    budget = BudgetScheduler(scheduler, BudgetLedger.load(tmp_path, {"epochs": 2}, 1, 1))
    ctrl, a, b = Controller([], Search()), trial("a"), trial("b")
    budget.on_trial_add(ctrl, a)
    budget.on_trial_add(ctrl, b)
    assert budget.on_trial_result(ctrl, a, result(1, 0.9)) == "CONTINUE"
    assert budget.on_trial_result(ctrl, b, result(1, 0.1)) == "STOP"  # below the rung
    assert verdicts(tmp_path)["b"].budget is None


def test_no_trial_starts_once_a_first_epoch_would_not_fit(tmp_path) -> None:
    scheduler = ResumableFIFO(tmp_path, Objective("acc", "max", 9))
    budget = BudgetScheduler(scheduler, BudgetLedger.load(tmp_path, {"epochs": 2}, 1, 1))
    running, pending, paused = trial("a"), trial("p", "PENDING"), trial("q", "PAUSED")
    ctrl = Controller([running, pending, paused], Search())
    budget.on_trial_result(ctrl, running, result(2, 0.5))
    assert budget.choose_trial_to_run(ctrl) is None
    assert ctrl.stopped == ["p", "q"] and ctrl.search_alg.is_finished()
    assert {t: (v.stopped_at, v.budget) for t, v in verdicts(tmp_path).items()} == {
        "a": (2, "epochs"), "p": (0, "epochs"), "q": (0, "epochs")}


def test_a_resume_with_a_larger_budget_reopens_the_search(tmp_path) -> None:
    objective = Objective("acc", "max", 9)
    first = BudgetScheduler(ResumableFIFO(tmp_path, objective),
                            BudgetLedger.load(tmp_path, {"epochs": 1}, 1, 1))
    ctrl = Controller([trial("a"), trial("p", "PENDING")], Search())
    first.on_trial_result(ctrl, ctrl.trials[0], result(1, 0.5))
    assert first.choose_trial_to_run(ctrl) is None and ctrl.search_alg.is_finished()

    same = BudgetScheduler(ResumableFIFO(tmp_path, objective),
                           BudgetLedger.load(tmp_path, {"epochs": 1}, 1, 2))
    assert same.choose_trial_to_run(Controller([], Search(finished=True))) is None
    raised = BudgetScheduler(ResumableFIFO(tmp_path, objective),
                             BudgetLedger.load(tmp_path, {"epochs": 5}, 1, 3))
    search = Search(finished=True)
    raised.choose_trial_to_run(Controller([], search))
    assert not search.is_finished()
    # A restore adds its ended trials before Tune's loop asks for one to run (and with
    # nothing left to run it never asks): the search reopens there too.
    search = Search(finished=True)
    again = BudgetScheduler(ResumableFIFO(tmp_path, objective),
                            BudgetLedger.load(tmp_path, {"epochs": 5}, 1, 4))
    again.on_trial_add(Controller([], search), trial("a", "TERMINATED"))
    assert not search.is_finished()
