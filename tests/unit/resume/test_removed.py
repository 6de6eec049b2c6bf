"""A sweep saved by an earlier version names a class since removed (a Tune callback pickled in
``tuner.pkl``): it still loads, as a placeholder, while the restore runs, and only then."""

from __future__ import annotations

import importlib
import pickle
import sys
import types

import pytest

from sweeps.resume.removed import removed_classes_load

GONE = "sweeps.trial.backends.a_removed_callbacks_module"


def _pickled_from_a_module_that_is_then_removed() -> bytes:
    module = types.ModuleType(GONE)
    exec("class PrestartGate:\n    def __init__(self):\n        self.sweep_id = 's1'\n",
         module.__dict__)
    module.PrestartGate.__module__ = GONE
    sys.modules[GONE] = module
    try:
        return pickle.dumps({"callbacks": [module.PrestartGate()], "kept": [1, 2]})
    finally:
        del sys.modules[GONE]


def test_a_removed_class_loads_as_a_placeholder_during_the_restore_only() -> None:
    data = _pickled_from_a_module_that_is_then_removed()
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(data)
    with removed_classes_load():
        state = pickle.loads(data)
    assert state["kept"] == [1, 2]
    (callback,) = state["callbacks"]
    assert type(callback).__name__ == "PrestartGate"
    assert callback.__dict__ == {"_state": {"sweep_id": "s1"}}
    with pytest.raises(ModuleNotFoundError):  # after the block, imports fail as usual
        importlib.import_module(GONE)
    with pytest.raises(ImportError):
        exec(f"from {GONE.rpartition('.')[0]} import {GONE.rpartition('.')[2]}", {})
    with removed_classes_load():  # a module of this version is its real self
        assert importlib.import_module("sweeps.trial.clock").TrialClock.__name__ == "TrialClock"
