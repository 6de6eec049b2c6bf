"""Ray's GCS key-value store, as the placement-group ledger and reaper use it.

    put("pg/<sweep>/<trial>", pg_hex); get(key); keys("pg/<sweep>/"); delete_prefix("ctl/<sweep>/")

Private: ``ray.experimental.internal_kv._internal_kv_*`` (Ray 2.60). Ray has no public key-value API
(ray#13453 asks for one); the public route is a named detached actor holding a dict, which costs an
actor per sweep and needs its own cleanup. Every key lives in the ``sweeps`` namespace.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NAMESPACE", "put", "get", "keys", "delete", "delete_prefix"]

NAMESPACE = "sweeps"


def _kv() -> Any:
    from ray.experimental import internal_kv

    return internal_kv


def put(key: str, value: str | bytes) -> None:
    """Set ``key`` (overwriting)."""
    _kv()._internal_kv_put(key, value, overwrite=True, namespace=NAMESPACE)


def get(key: str) -> str | None:
    """The value of ``key`` as text, or None."""
    value = _kv()._internal_kv_get(key, namespace=NAMESPACE)
    return value.decode() if isinstance(value, bytes) else value


def keys(prefix: str) -> list[str]:
    """Every key that starts with ``prefix``."""
    return [k.decode() if isinstance(k, bytes) else k
            for k in _kv()._internal_kv_list(prefix, namespace=NAMESPACE)]


def delete(key: str) -> None:
    """Delete ``key``."""
    _kv()._internal_kv_del(key, namespace=NAMESPACE)


def delete_prefix(prefix: str) -> None:
    """Delete every key that starts with ``prefix``."""
    _kv()._internal_kv_del(prefix, del_by_prefix=True, namespace=NAMESPACE)
