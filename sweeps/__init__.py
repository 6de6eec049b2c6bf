"""sweeps: Hydra configs -> Ray Tune (Optuna TPE or random + ASHA) -> multi-worker Ray Train.

    python -m sweeps +experiment=digits

Library use:

    from sweeps import compose, run_sweep, load_model
    result = run_sweep(compose("digits", ["search.num_samples=4"]))
    model = load_model(result.best["checkpoint"])
"""

from __future__ import annotations

from sweeps.checkpoint import load_checkpoint, load_model
from sweeps.compose import compose
from sweeps.config import SweepConfig, validate
from sweeps.errors import ClusterFitError, ConfigError, SearchSpaceError, SweepError
from sweeps.runner import SweepResult, prepare, run_sweep

__all__ = [
    "ClusterFitError",
    "ConfigError",
    "SearchSpaceError",
    "SweepConfig",
    "SweepError",
    "SweepResult",
    "compose",
    "load_checkpoint",
    "load_model",
    "prepare",
    "run_sweep",
    "validate",
]
