"""The dry-run plan: exact rungs and epoch budgets, and a CLI run that starts nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps import compose, prepare
from sweeps.driver.dry_run import asha_rungs, epoch_budget, expected_epochs, format_plan

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("max_t", "grace", "rf", "rungs"),
    [(9, 1, 3, [1, 3]), (12, 1, 3, [1, 3, 9]), (27, 1, 3, [1, 3, 9]), (10, 2, 2, [2, 4, 8]),
     (4, 4, 2, []), (100, 1, 4, [1, 4, 16, 64]), (1, 1, 3, [])],
)
def test_rungs_follow_rays_asha(max_t: int, grace: int, rf: int, rungs: list[int]) -> None:
    assert asha_rungs(max_t, grace, rf) == rungs


def test_rungs_match_rays_own_bracket() -> None:
    from ray.tune.schedulers.async_hyperband import _Bracket

    for max_t, grace, rf in [(9, 1, 3), (12, 1, 3), (10, 2, 2), (100, 1, 4)]:
        bracket = _Bracket(min_t=grace, max_t=max_t, reduction_factor=rf, s=0)
        ray_rungs = sorted(m for m, _ in bracket._rungs if m < max_t)
        assert asha_rungs(max_t, grace, rf) == ray_rungs


@pytest.mark.parametrize(
    ("max_t", "rungs", "rf", "expected"),
    [(9, [1, 3], 3, 1 + 2 / 3 + 6 / 9), (9, [], 3, 9.0), (10, [2, 4, 8], 2, 2 + 1 + 1 + 0.25)],
)
def test_expected_epochs_per_trial(max_t, rungs, rf, expected) -> None:
    assert expected_epochs(max_t, rungs, rf) == pytest.approx(expected)


def test_budget_of_the_showcase_is_exact() -> None:
    budget = epoch_budget(compose("digits"))
    assert (budget.rungs, budget.worst) == ([1, 3], 72)
    assert budget.expected == pytest.approx(8 * (1 + 2 / 3 + 6 / 9))  # 18.67
    flat = epoch_budget(compose("digits", ["scheduler=none", "search.num_samples=5"]))
    assert (flat.rungs, flat.worst, flat.expected) == ([], 45, 45.0)


def test_plan_text_names_every_parameter_and_number() -> None:
    text = format_plan(prepare(compose("digits", ["ray.num_cpus=2", "ray.num_gpus=0"])))
    for fragment in ["lr          float log-uniform [0.0001, 0.5]",
                     "depth       int uniform [1, 3] step 1", "rungs at epoch 1, 3",
                     "up to 1 trial(s) at once on 2 CPU", "worst case 72 (8 x 9)",
                     "ASHA expected ~18.7"]:
        assert fragment in text, text


@pytest.mark.parametrize(("overrides", "line"), [
    ([], "trial process: reused by the next trial (trial.reuse_process=false: a new one"),
    (["trial.reuse_process=false"], "trial process: a new one per trial "
                                    "(trial.reuse_process=false)"),
    (["scheduler=pbt", "search=random", "trial.executor=train"],
     "trial process: a new one per trial (scheduler=pbt"),
    (["scheduler=pbt", "search=random"], "trial process: reused by the next trial"),  # inline
    (["scheduler=pbt", "search=random", "scaling.num_workers=1"],
     "trial process: reused by the next trial"),  # inline: no Train run to outlive a pause
])
def test_plan_says_whether_a_trial_process_serves_the_next_trial(overrides, line) -> None:
    text = format_plan(prepare(compose("digits", ["ray.num_cpus=2", "ray.num_gpus=0",
                                                  *overrides])))
    assert line in text, text


def test_cli_dry_run_prints_the_plan_and_writes_nothing(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", "+experiment=digits",
                           "sweep.dry_run=true", "ray.num_cpus=2"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "dry run: Ray not started" in proc.stdout and "worst case 72" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_cli_dry_run_with_a_broken_config_fails_like_a_real_run(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", "+experiment=digits",
                           "sweep.dry_run=true", "scheduler.max_t=0"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "scheduler.max_t: 0 must be >= 1" in proc.stderr


USER_DIGITS = """# @package _global_
# python -m sweeps --config-dir conf +experiment=digits
experiment:
  name: my_digits
  trainable: trainables.digits:train_mlp
  metric: val_acc
  mode: max
  params: {lr: 0.05}
  search_space:
    lr: interval(0.01, 0.1)
"""


@pytest.mark.parametrize(
    ("config_dir", "overrides", "where"),
    [(None, [], "{conf}/experiment/digits.yaml (built-in)"),
     ("user", [], "{t}/user/experiment/digits.yaml (--config-dir)"),
     (None, ["hydra.searchpath=[file://user]"], "{t}/user/experiment/digits.yaml "
                                                "(hydra.searchpath)")],
)
def test_plan_names_the_file_the_experiment_came_from(tmp_path, config_dir, overrides,
                                                      where) -> None:
    from sweeps.config.paths import CONF_DIR

    (tmp_path / "user" / "experiment").mkdir(parents=True)
    (tmp_path / "user" / "experiment" / "digits.yaml").write_text(USER_DIGITS)
    cfg = compose("digits", [*overrides, "ray.num_cpus=2", "ray.num_gpus=0"],
                  config_dir=config_dir)
    lines = format_plan(prepare(cfg)).splitlines()
    assert lines[1] == "  experiment digits from " + where.format(t=tmp_path, conf=CONF_DIR)


def test_cli_dry_run_with_a_config_dir_elsewhere(tmp_path) -> None:
    conf = tmp_path / "project" / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "experiment" / "digits.yaml").write_text(USER_DIGITS)
    (tmp_path / "run").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", "--config-dir", "../project/conf",
                           "+experiment=digits", "sweep.dry_run=true", "ray.num_cpus=2"],
                          cwd=tmp_path / "run", env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "plan for sweep my_digits" in proc.stdout
    assert (f"  experiment digits from {conf}/experiment/digits.yaml (--config-dir)"
            in proc.stdout.splitlines())
    assert list((tmp_path / "run").iterdir()) == []
