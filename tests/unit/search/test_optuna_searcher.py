"""Reports without the metric do not crash an Optuna search (Ray's OptunaSearch raised
KeyError and ended the sweep), and a trial whose last report lacks it is told to Optuna with
the last value it reported. No Ray cluster: the searcher is plain Python."""

from __future__ import annotations

import optuna
import pytest

from sweeps import compose
from sweeps.search.searchers import make_search_alg
from sweeps.search.space import parse_space

PARAMS = parse_space(compose("digits").experiment.search_space)[0]


@pytest.mark.parametrize(("results", "told"), [
    ([{"loss": 0.5}, {"val_acc": 0.7, "training_iteration": 2}, {"loss": 0.1}], 0.7),
    ([{"val_acc": 0.6, "training_iteration": 1}, {"val_acc": 0.8, "training_iteration": 2}],
     0.8),
    ([{"loss": 0.5}], None),  # never reported the metric: pruned, as Ray does
])
def test_results_without_the_metric(results, told) -> None:
    searcher = make_search_alg(compose("digits", ["search=tpe"]), 0, PARAMS)
    assert searcher.suggest("t1")
    for result in results:
        searcher.on_trial_result("t1", result)
    searcher.on_trial_complete("t1", results[-1])
    trial = searcher._ot_study.trials[0]
    if told is None:
        assert trial.state == optuna.trial.TrialState.PRUNED
    else:
        assert trial.state == optuna.trial.TrialState.COMPLETE and trial.value == told


def test_a_text_metric_is_passed_over_not_raised_into_the_sweep() -> None:
    """``tune.report({"val_acc": "high"})``: Optuna would raise TypeError in Tune's driver and
    end the sweep; the scheduler fails that trial instead (test_schedulers)."""
    searcher = make_search_alg(compose("digits", ["search=tpe"]), 0, PARAMS)
    assert searcher.suggest("t1")
    searcher.on_trial_result("t1", {"val_acc": "high", "training_iteration": 1})
    searcher.on_trial_complete("t1", {"val_acc": "high"}, error=True)
    assert searcher._ot_study.trials[0].state == optuna.trial.TrialState.FAIL
