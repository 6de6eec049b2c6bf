"""How Ray packages a runtime env, as the sweep re-measures it before Ray starts.

    spec = path_spec(["outputs/", "*.ckpt"]); spec.match_file("outputs/a.pt")
    upload_limit()          # bytes at which Ray refuses a package
    submitted_job_env()     # the runtime env ``ray job submit`` gave this driver

Private: ``ray._private.thirdparty.pathspec`` (the gitwildmatch matcher Ray's packaging uses,
vendored; public route: the ``pathspec`` package, the same code, one more dependency);
``GCS_STORAGE_MAX_SIZE``/``GRPC_CPP_MAX_MESSAGE_SIZE`` (``ray/_private/runtime_env/
packaging.py`` and ``ray_constants.py``: 512 MiB unless ``RAY_max_grpc_message_size`` says
otherwise); ``RAY_JOB_CONFIG_JSON_ENV_VAR`` (``ray/_private/runtime_env/constants.py``, set by
the job supervisor for a submitted job's driver). No public API exposes either number or the
submitted job's env (ray#39327 asks for runtime-env validation before upload).
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["path_spec", "upload_limit", "submitted_job_env", "GRPC_MAX_MESSAGE_SIZE",
           "JOB_CONFIG_ENV"]

GRPC_MAX_MESSAGE_SIZE = 512 * 1024 * 1024  # ray._private.ray_constants.GRPC_CPP_MAX_MESSAGE_SIZE
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def path_spec(patterns: list[str]) -> Any:
    """Ray's own gitwildmatch matcher for ``patterns`` (``.match_file(relative_path)``)."""
    from ray._private.thirdparty.pathspec import PathSpec

    return PathSpec.from_lines("gitwildmatch", patterns)


def upload_limit() -> int:
    """Bytes at which Ray refuses a package (``RAY_max_grpc_message_size`` or 512 MiB).

    Example:
        >>> upload_limit() // 2**20
        512
    """
    return int(os.environ.get("RAY_max_grpc_message_size", GRPC_MAX_MESSAGE_SIZE))


def submitted_job_env() -> dict[str, Any]:
    """The runtime env ``ray job submit`` gave this driver ({} when not a submitted job)."""
    raw = os.environ.get(JOB_CONFIG_ENV)
    if not raw:
        return {}
    try:
        return dict(json.loads(raw).get("runtime_env") or {})
    except (ValueError, AttributeError, TypeError):
        return {}
