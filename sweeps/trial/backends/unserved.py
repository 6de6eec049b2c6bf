"""Calls of Ray Train's per-worker API that the inline backend does not serve, found in the
loop's source before any trial runs.

    unserved_calls("mypkg.train:train_func")    # ['ray.train.get_context().get_storage()']

``trial.executor=auto`` runs such a loop's trials as Ray Train runs (``sweeps.driver.
prepare`` says so in the plan); ``trial.executor=inline`` is refused before Ray starts. The
scan reads the source of the module that defines the loop (where Ray's guides put every call),
not the modules it imports: a call made there still fails at once inline, in one line naming
``trial.executor=train`` (``sweeps._ray.train_fn``).
"""

from __future__ import annotations

import importlib
import inspect
import re

__all__ = ["UNSERVED", "unserved_calls"]

# What the inline backend does not serve, and how a loop's source spells the call.
UNSERVED = {"ray.train.get_context().get_storage()": re.compile(r"\.get_storage\s*\(")}


def unserved_calls(trainable: str) -> list[str]:
    """The unserved calls the module of ``trainable`` ("module:function") makes; [] when its
    source cannot be read (a compiled or zipped module: nothing is routed).

    Example:
        >>> unserved_calls("trainables.digits:train_mlp")
        []
    """
    try:
        source = inspect.getsource(importlib.import_module(trainable.partition(":")[0]))
    except (ImportError, OSError, TypeError):
        return []
    return [call for call, pattern in UNSERVED.items() if pattern.search(source)]
