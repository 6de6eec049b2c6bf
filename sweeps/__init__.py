"""sweeps: Hydra configs -> Ray Tune (Optuna, grid, random; ASHA, PBT) -> each trial's loop,
run inline in the trial's processes or as a Ray Train run (DDP).

    python -m sweeps +experiment=digits

Library use:

    from sweeps import compose, load_best, run_sweep
    result = run_sweep(compose("digits", ["search.num_samples=4"]))
    model = load_best(result.sweep_dir)      # or load_best("models:/digits/1")
    trials = load(result.sweep_dir).trials   # the trials (and .history) as DataFrames
    ds = predict(result.sweep_dir, "data/*.parquet", output="preds/")   # batch, on Ray Data

Inside a training loop (optional: any Ray Train loop runs unchanged):

    from sweeps import TrialSession, trial_context
"""

from __future__ import annotations

from sweeps.config.compose import compose
from sweeps.config.schema import SweepConfig
from sweeps.driver.prepare import check_config as validate  # the keys, and trial.executor
from sweeps.driver.prepare import prepare
from sweeps.driver.runner import SweepResult, run_sweep
from sweeps.errors import (
    ClusterFitError,
    ConfigError,
    RayIncompatible,
    SearchSpaceError,
    StateError,
    SweepError,
    SweepInterrupted,
)
from sweeps.inference.batch import predict
from sweeps.inference.bundle import load_best
from sweeps.inference.hf import Pretrained
from sweeps.loop.checkpoint import load_checkpoint, load_model
from sweeps.loop.context import TrialContext, trial_context
from sweeps.loop.session import TrialSession
from sweeps.report.best import best_checkpoint
from sweeps.report.tables import SweepTables, load

__all__ = ["ClusterFitError", "ConfigError", "Pretrained", "RayIncompatible", "SearchSpaceError",
           "StateError", "SweepConfig", "SweepError", "SweepInterrupted", "SweepResult",
           "SweepTables", "TrialContext", "TrialSession", "best_checkpoint", "compose", "load",
           "load_best", "load_checkpoint", "load_model", "predict", "prepare", "run_sweep",
           "trial_context", "validate"]
