"""Resume a sweep started before sweeps' modules moved into packages.

    alias_old_modules()          # before Tune unpickles tuner.pkl (sweeps.driver.tuner)

Tune pickles the scheduler and the callbacks with the experiment (``tuner.pkl``), by module
path, and the objects they hold with them (the cluster watch holds the sweep's
``ResourcePlan``). Sweeps older than the package layout kept them in flat modules
(``sweeps.schedulers``, ``sweeps.release``, ...), and sweeps older than the driver/trial/loop
split in ``sweeps.execution``; without these aliases, ``Tuner.restore`` of such a sweep would
fail with ``ModuleNotFoundError`` although every trial's state is on disk. The restored
objects are replaced by this run's right after (``sweeps._ray.tune.replace_restored_config``);
they only need to load (a field an old object has and this version lacks, like the plan's
``inline``, is carried along unread).

Every module of ``sweeps.execution`` is aliased, not only those known to be pickled: an old
path then resolves each name its module defined, wherever the split put it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["EXECUTION_MODULES", "OLD_MODULES", "alias_old_modules"]

# Flat modules before the package layout (``sweeps.tracking`` is a package now; its
# ``__getattr__`` serves the old callback names, and ``sweeps.trial``, a flat module once,
# serves ``run_trial`` and ``TrialPlan``).
OLD_MODULES = {
    "sweeps.schedulers": "sweeps.search.schedulers",
    "sweeps.outcome": "sweeps.search.outcome",
    "sweeps.release": "sweeps.placement.reaper",
    "sweeps.progress": "sweeps.report.progress",
    "sweeps.unread": "sweeps.driver.unread",
    "sweeps.context": "sweeps.loop.context",
    "sweeps.journal": "sweeps.storage.journal",
    "sweeps.mlflow_sink": "sweeps.tracking.mlflow_sink",
    "sweeps.tracking.journal": "sweeps.storage.journal",  # the MLflow callback holds a Journal
}

# sweeps.execution (one package for the driver, the trial and the loop) until it was split by
# the process each part runs in: each of its modules -> the modules its names live in now.
EXECUTION_MODULES: dict[str, tuple[str, ...]] = {
    "checkpoint": ("loop.checkpoint",),
    "clock": ("trial.clock",),
    "cluster_address": ("driver.cluster_address",),
    "cluster_watch": ("driver.cluster_watch",),
    "code_shipping": ("driver.code_shipping",),
    "context": ("loop.context",),
    "datasets": ("driver.datasets", "config.datasets"),
    "exploit": ("trial.exploit",),
    "fit": ("driver.fit",),
    "gpu_memory": ("loop.gpu_memory",),
    "inline": ("trial.backends.inline", "trial.backends.inline_run"),
    "interrupt": ("driver.interrupt",),
    "peers": ("trial.backends.peers", "trial.backends.peer", "trial.backends.inline_run"),
    "prepare": ("driver.prepare",),
    "rank_error": ("trial.backends.rank_error",),
    "ray_session": ("driver.ray_session",),
    "rendezvous": ("trial.backends.rendezvous",),
    "report_bridge": ("trial.backends.report_bridge",),
    "report_log": ("trial.report_log",),
    "resources": ("driver.resources",),
    "result": ("report.result",),
    "runner": ("driver.runner",),
    "session": ("loop.session",),
    "storage_watch": ("driver.storage_watch",),
    "trial_driver": ("trial.driver", "trial.plan", "trial.backends.train"),
    "tuner": ("driver.tuner",),
    "unread": ("driver.unread",),
    "unserved": ("trial.backends.unserved",),
    "worker": ("loop.worker", "config.usercode"),
}


class _Moved(types.ModuleType):
    """An old module path whose names now live in ``targets``: an attribute is looked up in
    each, in order (what ``pickle`` and ``from old import name`` ask for)."""

    def __init__(self, name: str, targets: tuple[str, ...]) -> None:
        super().__init__(name, f"sweeps moved this module to {', '.join(targets)}")
        self._targets = targets

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        for target in self._targets:
            try:
                module = importlib.import_module(target)
            except ImportError:  # a probe of sys.modules (pickle.whichmodule) must not raise
                continue
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(f"module {self.__name__!r} (moved to {', '.join(self._targets)}) "
                             f"has no attribute {attr!r}")


def alias_old_modules() -> None:
    """Make each old module path import its new module (no-op for paths already imported).

    Example:
        >>> alias_old_modules()
        >>> from sweeps.execution.resources import ResourcePlan
        >>> ResourcePlan.__module__
        'sweeps.driver.resources'
    """
    for old, new in OLD_MODULES.items():
        if old not in sys.modules:
            sys.modules[old] = importlib.import_module(new)
    if "sweeps.execution" not in sys.modules:
        sys.modules["sweeps.execution"] = _Moved("sweeps.execution", ("sweeps.driver",))
    for old, news in EXECUTION_MODULES.items():
        name = f"sweeps.execution.{old}"
        if name not in sys.modules:
            sys.modules[name] = _Moved(name, tuple(f"sweeps.{n}" for n in news))

