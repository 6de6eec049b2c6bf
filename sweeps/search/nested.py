"""Dotted keys <-> nested mappings, as a search space, a trial's config and MLflow params use them.

    flat = flatten(trial.config)          # {"model.hidden": 64, "lr": 0.1}
    config = unflatten(flat)              # {"model": {"hidden": 64}, "lr": 0.1}
    same_value(True, 1)                   # False: YAML's true is not the choice 1

``same_value`` lives here, below ``space`` and ``conditions``, so neither imports the other.

Re-exported by ``sweeps.search.space``, where most callers import them from.
"""

from __future__ import annotations

from typing import Any

__all__ = ["flatten", "unflatten", "deep_merge", "same_value"]


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mapping -> dotted keys. ``{"a": {"b": 1}}`` -> ``{"a.b": 1}``.

    Example:
        >>> flatten({"model": {"hidden": 64}, "lr": 0.1})
        {'model.hidden': 64, 'lr': 0.1}
    """
    out: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def unflatten(flat: dict[str, Any], sep: str = ".") -> dict[str, Any]:
    """Dotted keys -> nested mapping (inverse of ``flatten``).

    Example:
        >>> unflatten({"model.hidden": 64})
        {'model': {'hidden': 64}}
    """
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        *parents, leaf = path.split(sep)
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Return ``base`` with ``override`` merged in recursively (override wins).

    Example:
        >>> deep_merge({"m": {"a": 1, "b": 2}}, {"m": {"b": 3}})
        {'m': {'a': 1, 'b': 3}}
    """
    out = dict(base)
    for key, value in override.items():
        nested = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = deep_merge(out[key], value) if nested else value
    return out


def same_value(a: Any, b: Any) -> bool:
    """``a == b`` without Python's ``True == 1`` (YAML's ``true`` is not the choice ``1``).

    Example:
        >>> same_value(1, 1.0), same_value(True, 1), same_value(False, 0)
        (True, False, False)
    """
    return isinstance(a, bool) == isinstance(b, bool) and a == b
