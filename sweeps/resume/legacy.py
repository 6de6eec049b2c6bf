"""Resume a sweep started before sweeps' modules moved into packages.

    alias_old_modules()          # before Tune unpickles tuner.pkl (sweeps.execution.tuner)

Tune pickles the scheduler and the callbacks with the experiment (``tuner.pkl``), by module
path. Sweeps older than the package layout kept them in flat modules (``sweeps.schedulers``,
``sweeps.release``, ...); without these aliases, ``Tuner.restore`` of such a sweep would fail
with ``ModuleNotFoundError`` although every trial's state is on disk. The restored objects are
replaced by this run's right after (``sweeps._ray.tune.replace_restored_config``); they only
need to load.
"""

from __future__ import annotations

import importlib
import sys

__all__ = ["OLD_MODULES", "alias_old_modules"]

# Modules whose objects Tune pickled (scheduler, callbacks, the trial function and its plan).
# ``sweeps.tracking`` is a package now; its ``__getattr__`` serves the old callback names.
OLD_MODULES = {
    "sweeps.schedulers": "sweeps.search.schedulers",
    "sweeps.outcome": "sweeps.search.outcome",
    "sweeps.release": "sweeps.placement.reaper",
    "sweeps.progress": "sweeps.report.progress",
    "sweeps.unread": "sweeps.execution.unread",
    "sweeps.trial": "sweeps.execution.trial_driver",
    "sweeps.context": "sweeps.execution.context",
    "sweeps.journal": "sweeps.tracking.journal",
    "sweeps.mlflow_sink": "sweeps.tracking.mlflow_sink",
}


def alias_old_modules() -> None:
    """Make each old module path import its new module (no-op for paths already imported)."""
    for old, new in OLD_MODULES.items():
        if old not in sys.modules:
            sys.modules[old] = importlib.import_module(new)
