"""Grid, multi-objective, a named Optuna sampler, a conditional space and a warm start, each in
a real sweep (real Ray, Train workers, MLflow on SQLite), two sweeps in all.

1. ``search=grid`` over ``hidden: choice(32, 64)`` with two objectives (``val_acc`` max,
   ``n_params`` min): both grid points run once; the summary and MLflow mark the Pareto front.
2. ``search=optuna`` with ``CmaEsSampler``, warm-started from sweep 1's directory, over a space
   where ``momentum`` exists only when ``optimizer=sgd``: the two earlier trials are in the
   searcher's study (not run again), and every trial's MLflow params have ``momentum`` exactly
   when its optimizer is sgd.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from sweeps import compose, run_sweep
from sweeps.driver.prepare import prepare

pytestmark = pytest.mark.slow

COMMON = """\
  trainable: trainables.digits:train_mlp
  params: {lr: 0.05, batch_size: 64, hidden: 64, depth: 1, dropout: 0.0, optimizer: sgd,
           momentum: 0.9, weight_decay: 0.0}
"""
GRID = """\
# @package _global_
experiment:
  name: grid_mo
""" + COMMON + """\
  metrics: {val_acc: max, n_params: min}
  search_space:
    hidden: choice(32, 64)
    optimizer: choice(adam)
    lr: choice(0.01)
search: {algorithm: grid}
scheduler: {name: none, max_t: 1}
"""
CONDITIONAL = """\
# @package _global_
experiment:
  name: warm_cond
""" + COMMON + """\
  metric: val_acc
  mode: max
  search_space:
    hidden: choice(32, 64)
    lr: tag(log, interval(0.001, 0.3))
    optimizer: choice(sgd, adam)
    momentum:
      when: {optimizer: sgd}
      sample: interval(0.5, 0.99)
search:
  algorithm: optuna
  num_samples: 4
  sampler: {_target_: optuna.samplers.CmaEsSampler, n_startup_trials: 1}
scheduler: {name: none, max_t: 1}
"""


def _trial_runs(uri: str, experiment: str) -> tuple[object, list]:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    assert len(parents) == 1
    return parents[0], [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]


@pytest.fixture(scope="module")
def sweeps_root(tmp_path_factory, ray_cluster) -> Path:
    root = tmp_path_factory.mktemp("breadth")
    (root / "conf" / "experiment").mkdir(parents=True)
    (root / "conf" / "experiment" / "grid_mo.yaml").write_text(textwrap.dedent(GRID))
    (root / "conf" / "experiment" / "warm_cond.yaml").write_text(textwrap.dedent(CONDITIONAL))
    return root


def _config(root: Path, name: str, *overrides: str):
    return compose(name, ["scaling.num_workers=1", "sweep.seed=0", f"sweep.dir={root / name}",
                          f"tracking.uri=sqlite:///{root / 'mlflow.db'}", *overrides],
                   config_dir=root / "conf")


@pytest.fixture(scope="module")
def grid_sweep(sweeps_root: Path):
    return run_sweep(_config(sweeps_root, "grid_mo"))


def test_grid_runs_each_point_once_and_marks_the_pareto_front(grid_sweep, sweeps_root) -> None:
    table = grid_sweep.summary.table
    assert sorted(table["hidden"]) == [32, 64]  # the whole grid, each point once
    assert (table["status"] == "completed").all()
    parent, trials = _trial_runs(f"sqlite:///{sweeps_root / 'mlflow.db'}", "grid_mo")
    assert len(trials) == 2
    by_size = sorted(trials, key=lambda r: r.data.metrics["n_params"])
    assert by_size[0].data.metrics["n_params"] < by_size[1].data.metrics["n_params"]
    # The smallest model is never dominated; the larger is on the front iff it is more accurate.
    small, large = by_size
    assert small.data.tags["sweeps.pareto"] == "true"
    expected = "true" if large.data.metrics["val_acc"] > small.data.metrics["val_acc"] else "false"
    assert large.data.tags["sweeps.pareto"] == expected
    front = table[table["pareto"]]
    assert len(front) == 1 + (expected == "true")
    plots = list((sweeps_root / "grid_mo" / "plots").glob("*pareto*.png"))
    assert plots and plots[0].stat().st_size > 0


def test_cmaes_warm_started_over_a_conditional_space(grid_sweep, sweeps_root) -> None:
    from ray.tune.search.optuna import OptunaSearch

    cfg = _config(sweeps_root, "warm_cond", f"search.warm_start={sweeps_root / 'grid_mo'}")
    prep = prepare(cfg)
    assert prep.warm_start is not None and len(prep.warm_start.trials) == 2
    result = run_sweep(cfg, prep)
    assert len(result.summary.table) == 4  # the earlier trials seeded the study, not re-run

    searcher = OptunaSearch()
    searcher.restore_from_dir(str(sweeps_root / "warm_cond"))
    study_trials = searcher._ot_study.trials
    warm = [t for t in study_trials if "warm_start" in t.user_attrs]
    assert len(warm) == 2 and {t.params["hidden"] for t in warm} == {32, 64}
    assert all("momentum" not in t.params for t in warm)  # they were adam trials
    assert len(study_trials) == 6

    parent, trials = _trial_runs(f"sqlite:///{sweeps_root / 'mlflow.db'}", "warm_cond")
    assert parent.data.tags["sweeps.warm_start.trials"] == "2"
    assert len(trials) == 4
    for run in trials:
        params = run.data.params
        assert ("momentum" in params) == (params["optimizer"] == "sgd"), params
        assert 0.001 <= float(params["lr"]) <= 0.3
