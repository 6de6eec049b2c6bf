"""The small sweep most integration tests start from, so each test states only what it varies.

    cfg = small_config("scheduler.max_t=4", "trial.max_failures=1")     # digits, 2 x 2 epochs
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sweeps import SweepConfig, compose

# Two trials of two epochs on 2 DDP workers: the smallest sweep that still has a search, a
# scheduler decision and a multi-worker trial, and finishes in well under a minute on 2 cores.
SMALL = ("search.num_samples=2", "scheduler.max_t=2", "scaling.num_workers=2", "sweep.seed=0")


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def merged(base: tuple[str, ...] | list[str], overrides: tuple[str, ...]) -> list[str]:
    """``base`` with each key that ``overrides`` sets replaced by its value there."""
    given = {_key(o) for o in overrides}
    return [o for o in base if _key(o) not in given] + list(overrides)


@pytest.fixture
def small_config(tmp_path: Path) -> Callable[..., SweepConfig]:
    """``small_config(*overrides, experiment="digits")``: the small sweep in ``tmp_path/sweep``,
    tracked in ``tmp_path/mlflow.db``, with ``overrides`` applied over it."""

    def make(*overrides: str, experiment: str = "digits") -> SweepConfig:
        base = [*SMALL, f"sweep.dir={tmp_path / 'sweep'}",
                f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"]
        return compose(experiment, merged(base, overrides))

    return make
