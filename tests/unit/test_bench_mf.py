"""Ray-free: ``python -m bench.mf``'s arithmetic and experiments, its replay's budget rule, and the
whole benchmark on one task, two seeds and a budget of 2 evaluations' worth.

The last one (slow layer) runs the command as a user does: it runs itself in ``bench/.venv-mf``
(mf-prior-bench and dehb require numpy<2), which the first run makes from PyPI (about 20 s,
once); then about 10 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import optuna
import pytest

from bench.mf import CONTENDERS, format_markdown, gaps, incumbent_regret, seed_range, summarize
from bench.mf_contenders import CONF
from bench.mf_loop import regret
from bench.search_sim import replay
from tests.conftest import ROOT


@pytest.mark.parametrize(("value", "best", "expected"), [
    (-4.0, -4.0, 0.0),          # the optimum
    (-3.0, -4.0, 0.25),
    (-1.0, -4.0, 0.75),
    (0.0, -4.0, 1.0),           # the Hartmann functions' upper bound
    (0.3, -4.0, 1.0),           # above it (bias and noise below full fidelity): clipped
    (-4.0000001, -4.0, 0.0),    # past the 6-digit optimum: clipped
])
def test_regret(value, best, expected) -> None:
    assert regret(value, best) == pytest.approx(expected)


EVALUATIONS = [(1, -1.0), (3, -3.0), (4, -2.0), (7, -3.5)]


@pytest.mark.parametrize(("spent", "expected"), [
    (0, 1.0),                   # nothing seen yet
    (1, 0.75),
    (2, 0.75),                  # between two evaluations: the earlier one's
    (3, 0.25),
    (4, 0.25),                  # a worse value does not replace the incumbent
    (100, 0.125),
])
def test_incumbent_regret(spent, expected) -> None:
    assert incumbent_regret(EVALUATIONS, spent, -4.0) == pytest.approx(expected)


@pytest.mark.parametrize(("text", "seeds"), [("0-2", [0, 1, 2]), ("5", [5]), ("3-3", [3])])
def test_seed_range(text, seeds) -> None:
    assert seed_range(text) == seeds


def test_summary_quartiles_curve_and_table() -> None:
    runs = {"mfh3_good": {
        "a": {0: [(5, -4.0)], 1: [(5, -2.0)], 2: [(10, -3.0)]},
        "b": {0: [(10, -1.0)], 1: [(10, -1.0)], 2: [(10, -1.0)]}}}
    result = summarize(runs, {"mfh3_good": -4.0}, budget_epochs=10)
    assert result["checkpoints"] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    a = result["tasks"]["mfh3_good"]["contenders"]["a"]
    assert (a["q25"], a["median_regret"], a["q75"]) == pytest.approx((0.125, 0.25, 0.375))
    assert a["curve"] == pytest.approx([1.0] * 4 + [0.5] * 5 + [0.25])
    assert a["spent_max"] == 10
    table = format_markdown(result)
    assert "| `mfh3_good` | **0.250** (0.125-0.375) | 0.750 (0.750-0.750) |" in table
    assert gaps(result, ours="b")["mfh3_good"] == {"best_peer": "a", "behind_by": 0.5}


class _Study:
    """What ``replay`` asks of a study, recording what it is told."""

    def __init__(self) -> None:
        self.study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
        self.told: dict[int, float] = {}

    def ask(self) -> optuna.Trial:
        return self.study.ask()

    def tell(self, trial: optuna.Trial, value: float) -> None:
        self.told[trial.number] = value
        self.study.tell(trial, value)


@pytest.mark.parametrize(("budget", "reports", "told"), [
    (None, 15, {0: 5.0, 1: 5.0, 2: 5.0}),   # every trial to max_t
    (10, 10, {0: 5.0, 1: 5.0}),             # the budget holds two whole trials
    (7, 7, {0: 5.0, 1: 2.0}),               # trial 1 stopped before its 3rd epoch: told epoch 2
    (5, 5, {0: 5.0}),                       # trial 1 never starts
])
def test_replay_spends_no_more_than_the_budget(budget, reports, told) -> None:
    study = _Study()
    out = replay(study, lambda trial: {}, {}, lambda values, n: iter(range(1, 100)), max_t=5,
                 halving=None, slots=1, samples=3, budget=budget)
    assert len(out) == reports
    assert study.told == told


@pytest.mark.parametrize(("name", "dims"), [("mfh3", 3), ("mfh6", 6)])
def test_experiments_compose_as_a_sweep_composes_them(name, dims) -> None:
    from sweeps import compose, validate
    from sweeps.search.defaults import first_point, settle_defaults
    from sweeps.search.space import parse_space

    cfg = compose(name, [f"experiment.params.task={name}_bad"], config_dir=CONF)
    validate(cfg)
    cfg = settle_defaults(cfg)
    params = parse_space(dict(cfg.experiment.search_space))[0]
    assert [p.path for p in params] == [f"X_{i}" for i in range(dims)]
    assert (cfg.search.algorithm, cfg.search.n_startup_trials, cfg.search.params_first) == (
        "tpe", 4, True)
    assert (cfg.scheduler.name, cfg.scheduler.grace_period, cfg.scheduler.reduction_factor,
            cfg.scheduler.max_t) == ("asha", 1, 3, 100)
    assert first_point(cfg, params) == {f"X_{i}": 0.5 for i in range(dims)}


@pytest.mark.slow  # it makes bench/.venv-mf from PyPI on its first run
def test_the_benchmark_runs_every_contender_within_the_budget(tmp_path) -> None:
    out = tmp_path / "mf.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.mf", "--seeds", "0-1", "--tasks", "mfh3_good",
         "--budget", "2", "--jobs", "2", "--out", str(out)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["command"] == ("python -m bench.mf --seeds 0-1 --tasks mfh3_good --budget 2 "
                                 f"--jobs 2 --out {out}")
    assert (result["seeds"], result["budget"], result["budget_epochs"]) == ([0, 1], 2, 200)
    assert result["checkpoints"] == list(range(20, 201, 20))
    task = result["tasks"]["mfh3_good"]
    assert task["optimum"] == pytest.approx(-3.86278, abs=1e-5)
    assert list(task["contenders"]) == list(CONTENDERS)
    for name, row in task["contenders"].items():
        assert 100 < row["spent_max"] <= 200, name  # DEHB may leave one evaluation unspent
        assert 0.0 <= row["q25"] <= row["median_regret"] <= row["q75"] <= 1.0, name
        assert len(row["curve"]) == 10 and row["curve"][-1] == row["median_regret"], name
        assert all(0.0 <= a <= 1.0 for a in row["curve"]), name
        assert sorted(row["regret_per_seed"]) == ["0", "1"], name
    assert "| `mfh3_good` |" in proc.stdout
