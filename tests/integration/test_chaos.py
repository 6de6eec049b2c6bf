"""A sweep killed with kill -9 at seeded moments, from its MLflow store's creation to its
end-of-sweep model registration, then run to its end, holds every invariant (issue 50).

The short version of ``python -m bench.chaos`` (whose recorded runs are
``bench/results/chaos.json``): one seed, 20 trials of 3 epochs, four kills (while MLflow creates
its store, mid-trial, right after a trial ends, in the sweep's end), the same code and checks.
Its epochs last 0.15 s at least (the digits MLP, slowed: ``tests.integration.observed``): the
plain digits epochs take a few milliseconds, and a fast enough sweep ended before the moment of
its third kill came.
"""

from __future__ import annotations

import json

import pytest

from bench.chaos import run_seed
from tests.integration.test_resume import TRAINABLE

pytestmark = pytest.mark.slow


@pytest.mark.timeout(900)
def test_a_sweep_killed_at_seeded_moments_ends_whole(tmp_path) -> None:
    result = run_seed(20261128, tmp_path, trials=20, max_t=3, kills=4,
                      phases=["store", "trial", "trial_end", "end"],
                      extra=(TRAINABLE, f"+experiment.params.log_dir={tmp_path / 'logs'}",
                             "+experiment.params.epoch_sleep=0.15"))
    console = result.pop("last_console")
    print(json.dumps(result, indent=2))  # the moments, for a failure's report
    assert [k["phase"] for k in result["kills"] if k["killed"]] == [
        "store", "trial", "trial_end", "end"], result["kills"]
    assert result["invariants"] == dict.fromkeys(
        ["exit_0", "each_trial_once", "one_run_per_trial", "no_step_twice",
         "model_from_best_trial", "decision_log_replays"], True), console[-3000:]
    assert "best model: logged to MLflow in the best trial's run and registered as 'digits'" \
        in console
