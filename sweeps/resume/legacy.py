"""Resume a sweep started before sweeps' modules moved into packages.

    alias_old_modules()          # before Tune unpickles tuner.pkl (sweeps.driver.tuner)

Tune pickles the scheduler and the callbacks with the experiment (``tuner.pkl``), by module
path. Sweeps older than the package layout kept them in flat modules (``sweeps.schedulers``,
``sweeps.release``, ...), and sweeps older than the driver/trial/loop split in
``sweeps.execution``; without these aliases, ``Tuner.restore`` of such a sweep would fail with
``ModuleNotFoundError`` although every trial's state is on disk. The restored objects are
replaced by this run's right after (``sweeps._ray.tune.replace_restored_config``); they only
need to load.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["OLD_MODULES", "alias_old_modules"]

# Modules whose objects Tune pickled (scheduler, callbacks, the trial function and its plan).
# ``sweeps.tracking`` is a package now; its ``__getattr__`` serves the old callback names, and
# ``sweeps.trial`` (a flat module once, a package now) serves ``run_trial`` and ``TrialPlan``.
OLD_MODULES = {
    "sweeps.schedulers": "sweeps.search.schedulers",
    "sweeps.outcome": "sweeps.search.outcome",
    "sweeps.release": "sweeps.placement.reaper",
    "sweeps.progress": "sweeps.report.progress",
    "sweeps.unread": "sweeps.driver.unread",
    "sweeps.context": "sweeps.loop.context",
    "sweeps.journal": "sweeps.storage.journal",
    "sweeps.mlflow_sink": "sweeps.tracking.mlflow_sink",
    # sweeps.execution (one package for the driver, the trial and the loop) until it was split
    # by the process each part runs in:
    **{f"sweeps.execution.{old}": f"sweeps.{new}" for old, new in (
        ("trial_driver", "trial.driver"), ("context", "loop.context"),
        ("unread", "driver.unread"), ("cluster_watch", "driver.cluster_watch"),
        ("storage_watch", "driver.storage_watch"), ("clock", "trial.clock"),
        ("report_bridge", "trial.backends.report_bridge"))},
    "sweeps.tracking.journal": "sweeps.storage.journal",  # the MLflow callback holds a Journal
}


def alias_old_modules() -> None:
    """Make each old module path import its new module (no-op for paths already imported)."""
    for old, new in OLD_MODULES.items():
        if old not in sys.modules:
            sys.modules[old] = importlib.import_module(new)
