"""The dry-run plan's lines for each search: grid points, the Optuna sampler, several objectives
(Pareto), the PBT scheduler, conditional params and the warnings of ``check_search``."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps import compose, prepare
from sweeps.driver.dry_run import format_plan

SMALL_GRID = ["search=grid", "experiment.search_space.lr='choice(0.01, 0.1)'",
              "experiment.search_space.dropout='range(0.0, 0.2, 0.1)'",
              "experiment.search_space.hidden='choice(32)'",
              "experiment.search_space.batch_size=64"]
BIG_GRID = ["search=grid", "experiment.search_space.lr='choice(0.01, 0.1)'",
            "experiment.search_space.dropout='range(0.0, 0.2, 0.1)'"]
CONDITIONAL = ("+experiment.search_space.momentum="
               "{when: {hidden: 32}, sample: 'interval(0.5, 0.9)'}")


@pytest.fixture(autouse=True)
def _no_ray():
    yield
    import sys

    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()

TPE_STORY = "(trial 1: experiment.params; TPE models once 3 trials have finished)"


def _plan(tmp_path: Path, overrides: list[str]) -> str:
    cfg = compose("digits", [f"sweep.dir={tmp_path / 'sweep'}", "tracking.enabled=false",
                             "ray.num_cpus=2", "ray.num_gpus=0", *overrides])
    text = format_plan(prepare(cfg))
    assert not (tmp_path / "sweep").exists()  # a dry run writes nothing
    return text


@pytest.mark.parametrize(
    ("overrides", "present", "absent"),
    [
        (SMALL_GRID,
         ["  search grid, 18 points = 18 trials (each once), seed 0; 4 parameter(s):",
          "    lr       choice of [0.01, 0.1]", "    dropout  float uniform [0, 0.2] step 0.1",
          "  constants: batch_size=64", "worst case 162 (18 x 9)"],
         ["warning:"]),
        (["search=grid", "search.num_samples=50", *SMALL_GRID[1:]],
         ["search grid, 18 points = 18 trials (each once)"], ["50"]),
        (BIG_GRID,
         ["search grid, 216 points = 216 trials (each once)",
          "  warning: search=grid runs 216 trials (2 lr x 4 hidden x 3 depth x 3 dropout x 3 "
          "batch_size); trim the choices or use search=tpe if that is more than you meant"], []),
        (["search=tpe"], [f"  search tpe (TPESampler), 8 trials {TPE_STORY}, "
          "seed 0; 5 parameter(s):",
          "  note: 8 trials: TPE models trials 4-8; in bench/results/search_sim.json"],
         ["warning:", "Pareto", "MO-ASHA"]),
        (["search=optuna", "search.sampler._target_=optuna.samplers.QMCSampler",
          "++search.sampler.scramble=true", "sweep.seed=3", "search.num_samples=6"],
         ["  search optuna (QMCSampler), 6 trials, seed 3; 5 parameter(s):"], ["warning:"]),
        (["search=optuna", "search.sampler._target_=optuna.samplers.CmaEsSampler"],
         ["search optuna (CmaEsSampler), 8 trials",
          "  warning: CmaEsSampler models only some of these params; it samples batch_size, "
          "hidden at random"], []),
        (["search=optuna", "search.sampler._target_=optuna.samplers.NSGAIISampler",
          "+experiment.metrics={val_acc: max, val_loss: min}", "scheduler=none"],
         ["  trainable trainables.digits:train_mlp, maximize val_acc, minimize val_loss "
          "(multi-objective: Pareto front; val_acc ranks checkpoints)",
          "search optuna (NSGAIISampler), 8 trials",
          "  scheduler none: every trial trains 9 epochs"], ["ASHA"]),
        (["+experiment.metrics={val_loss: min, val_acc: max}", "scheduler=none"],
         # objectives in the order written; digits.yaml's own metric stays the primary
         ["minimize val_loss, maximize val_acc (multi-objective: Pareto front; val_acc ranks "
          "checkpoints)"], []),
        (["+experiment.metrics={val_acc: max, val_loss: min}"],
         ["  scheduler asha: rungs at epoch 1, 3; keeps the top 1/3 at each by non-dominated "
          "sort of val_acc, val_loss (MO-ASHA); max 9 epochs"], []),
        (["scheduler=pbt", "search=random"],
         ["  scheduler pbt: every 2 epoch(s) the bottom 25% copy a top trial's checkpoint and "
          "perturb its values (resample p=0.25); every trial trains 9 epochs",
          "worst case 72 (8 x 9)"], ["ASHA", "Pareto"]),
        (["search=tpe", CONDITIONAL],
         ["    momentum    float uniform [0.5, 0.9] only when hidden=32",
          f"search tpe (TPESampler), 8 trials {TPE_STORY}, seed "
          "0; 6 parameter(s):"], []),
        (["search=random"], ["  search random, 8 trials, seed 0; 5 parameter(s):"], []),
    ],
)
def test_plan_lines(tmp_path: Path, overrides: list[str], present: list[str],
                    absent: list[str]) -> None:
    text = _plan(tmp_path, overrides)
    lines = text.splitlines()
    assert lines[0] == "plan for sweep digits (dry run: Ray not started, nothing written)"
    for fragment in present:
        assert fragment in text, text
    for fragment in absent:
        assert fragment not in text, text
    warnings = [ln for ln in lines if ln.startswith("  warning: ")]
    if warnings:
        assert lines[-len(warnings):] == warnings  # the warnings come last
