"""Resume a sweep whose saved Tune state names a sweeps class this version no longer has.

    with removed_classes_load():        # around tune.Tuner.restore (sweeps.driver.tuner)
        tuner = tune.Tuner.restore(...)

Tune pickles the sweep's callbacks and scheduler into ``tuner.pkl`` by module path. A sweep
started by an earlier version may name a class since removed (the Train backend's
``PrestartGate`` callback, say): unpickling it would fail with ``ModuleNotFoundError`` although
every trial's state is on disk. Those objects are replaced by this run's right after the
restore (``sweeps._ray.tune.replace_restored_config``), so a placeholder that only loads is
enough: while the block runs, a ``sweeps.*`` module that cannot be imported loads as an empty
module whose every name is a placeholder class.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["removed_classes_load"]


class _Removed:
    """What a pickled object of a removed class loads as: its state, kept unread."""

    def __setstate__(self, state: Any) -> None:
        self.__dict__["_state"] = state


class _RemovedModule(types.ModuleType):
    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (_Removed,), {"__module__": self.__name__})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: reached only by ``sweeps.*`` names nothing else found."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if not name.startswith("sweeps."):
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)  # for its children

    def create_module(self, spec: Any) -> types.ModuleType:
        return _RemovedModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


@contextlib.contextmanager
def removed_classes_load() -> Iterator[None]:
    """While the block runs, removed ``sweeps.*`` modules load as placeholders; after it,
    the placeholder modules are forgotten (a later import fails as usual).

    Example:
        >>> with removed_classes_load():
        ...     import sweeps.a_module_that_never_was as gone
        >>> type(gone.Callback()).__mro__[1].__name__
        '_Removed'
    """
    finder = _Finder()
    sys.meta_path.append(finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n, m in list(sys.modules.items()) if isinstance(m, _RemovedModule)]:
            module = sys.modules.pop(name)
            parent, _, child = name.rpartition(".")  # the import set it on its package too
            if getattr(sys.modules.get(parent), child, None) is module:
                delattr(sys.modules[parent], child)
