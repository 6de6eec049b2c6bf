"""The probe kinds ``sweeps._ray.compat`` builds its inventory from: each returns a check that
raises ``AssertionError`` naming what changed.

    _attrs("ray.train.torch:TorchTrainer", "_create_default_callbacks")()   # passes or raises
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable


def _symbol(path: str) -> object:
    """The object at ``module:Attr.attr`` (or the module itself)."""
    module, _, dotted = path.partition(":")
    obj: object = importlib.import_module(module)
    for part in dotted.split(".") if dotted else []:
        obj = getattr(obj, part)
    return obj


def _params(path: str, *names: str) -> Callable[[], None]:
    def probe() -> None:
        params = inspect.signature(_symbol(path)).parameters
        missing = [n for n in names if n not in params]
        if missing:
            raise AssertionError(f"{path} takes no {', '.join(missing)}")
    return probe


def _attrs(path: str, *names: str) -> Callable[[], None]:
    def probe() -> None:
        obj = _symbol(path)
        missing = [n for n in names if not hasattr(obj, n)]
        if missing:
            raise AssertionError(f"{path} has no {', '.join(missing)}")
    return probe


def _source_sets(path: str, *attributes: str) -> Callable[[], None]:
    """The class at ``path`` assigns each of ``self.<attribute> =`` in its own methods."""
    def probe() -> None:
        source = inspect.getsource(_symbol(path))
        missing = [a for a in attributes if f"self.{a} =" not in source
                   and f"self.{a}: " not in source]
        if missing:
            raise AssertionError(f"{path} no longer sets self.{', self.'.join(missing)}")
    return probe


def _source_mentions(path: str, text: str) -> Callable[[], None]:
    """The function at ``path`` still contains ``text`` (the rule the adapter works with)."""
    def probe() -> None:
        if text not in inspect.getsource(_symbol(path)):
            raise AssertionError(f"{path} no longer contains {text!r}")
    return probe


def _fields(path: str, *names: str) -> Callable[[], None]:
    """A dataclass or pydantic model at ``path`` has each of the fields ``names``."""
    def probe() -> None:
        cls = _symbol(path)
        known = set(getattr(cls, "model_fields", None) or getattr(cls, "__fields__", None)
                    or getattr(cls, "__dataclass_fields__", None) or {})
        missing = [n for n in names if n not in known]
        if missing:
            raise AssertionError(f"{path} has no field {', '.join(missing)}")
    return probe


def _equals(path: str, expected: object) -> Callable[[], None]:
    """The constant at ``path`` still has the value the adapter copied."""
    def probe() -> None:
        value = _symbol(path)
        if value != expected:
            raise AssertionError(f"{path} is {value!r}, sweeps uses {expected!r}")
    return probe
