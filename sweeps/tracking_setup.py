"""Resolve and check the tracking target before Ray starts.

    uri = tracking_uri(cfg)          # sqlite:////abs/project/mlflow.db by default
    check_tracking(cfg, uri)         # ConfigError if a required server does not answer

MLflow's HTTP client retries a failed request 7 times with a backoff factor of 2 (minutes per
call). The sweep retries on its own schedule (``sweeps.tracking``), so unless the user set them,
the client's retries are cut to 2 and its timeout to 10 s.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sweeps.config import SweepConfig
from sweeps.errors import ConfigError

__all__ = ["tracking_uri", "check_tracking", "quiet_http_retries"]


def quiet_http_retries() -> None:
    """Bound MLflow's own HTTP retries unless the user configured them."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    # One warning from the sweep says the server is unreachable; not one per HTTP retry.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)


def tracking_uri(cfg: SweepConfig) -> str:
    """The tracking URI; relative SQLite paths are made absolute (cwd-independent)."""
    uri = cfg.tracking.uri or "sqlite:///mlflow.db"
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str(Path(uri[len("sqlite:///"):]).absolute())
    return uri


def check_tracking(cfg: SweepConfig, uri: str) -> None:
    """Fail (or, with tracking.required=false, let pass) a tracking target that cannot work."""
    if not cfg.tracking.enabled or not cfg.tracking.required:
        return
    fix = ("start the server or fix tracking.uri; tracking.required=false sweeps now and sends "
           "the tracking data once it answers; tracking.enabled=false turns tracking off")
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        parent = db.parent
        while not parent.exists():
            parent = parent.parent
        if not os.access(parent, os.W_OK) or (db.exists() and not os.access(db, os.W_OK)):
            raise ConfigError("tracking.uri", uri, "is not writable", fix)
        return
    if uri.startswith(("http://", "https://")):
        import requests

        try:
            requests.get(uri.rstrip("/") + "/health", timeout=5).raise_for_status()
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise ConfigError("tracking.uri", uri, f"does not answer ({reason})", fix) from exc
