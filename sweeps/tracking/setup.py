"""Check the tracking target before Ray starts; where MLflow's client stores and retries.

    target = tracking_target(cfg)    # sweeps.tracking.target: config, MLflow's env, default
    check_tracking(cfg, target)      # ConfigError if a required server does not answer

MLflow's HTTP client retries a failed request 7 times with a backoff factor of 2 (minutes per call).
The sweep retries on its own schedule (``sweeps.tracking.callback``), so unless the user set them,
the client's retries are cut to 2 and its timeout to 10 s.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError
from sweeps.tracking.target import URI_ENV, TrackingTarget, absolute_uri

log = logging.getLogger(__name__)

__all__ = ["check_tracking", "quiet_http_retries", "absolute_uri", "local_store",
           "artifacts_beside", "using_tracking_uri"]


def quiet_http_retries() -> None:
    """Bound MLflow's own HTTP retries and console chatter unless the user configured them."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    # One warning from the sweep says the server is unreachable; not one per HTTP retry.
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    # "Creating initial MLflow database tables..." on a new SQLite store is MLflow's business.
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Not a "View run at http://..." line per ended run; the sweep prints where MLflow is.
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")


def local_store(uri: str) -> Path | None:
    """The file or directory of a local store (SQLite, ``file:``), which MLflow would create;
    None for a server.

    Example:
        >>> local_store("sqlite:////w/mlflow.db"), local_store("file:///w/mlruns")
        (PosixPath('/w/mlflow.db'), PosixPath('/w/mlruns'))
    """
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///"):])
    return Path(uri[len("file:"):].removeprefix("//")) if uri.startswith("file:") else None


def artifacts_beside(uri: str) -> str | None:
    """A SQLite store's artifacts in ``mlruns/`` beside its file (MLflow's default is the
    current directory's ``mlruns/``, so a sweep resumed from another directory, or with
    ``tracking.uri`` elsewhere, would scatter them); None: the server's or store's own default.

    Example:
        >>> artifacts_beside("sqlite:////w/mlflow.db"), artifacts_beside("http://h:5000")
        ('file:///w/mlruns', None)
    """
    store = local_store(uri) if uri.startswith("sqlite:") else None
    return (store.absolute().parent / "mlruns").as_uri() if store is not None else None


@contextlib.contextmanager
def using_tracking_uri(uri: str | None) -> Iterator[None]:
    """MLflow's global tracking URI set to ``uri`` for the block, then put back as it was,
    ``MLFLOW_TRACKING_URI`` included: registry calls (``models:/``, ``registered_model_name``) and
    ``log_model(run_id=...)`` read only the global URI (MLflow 3.17), and neither ``load_best`` nor
    the sweep may repoint the caller's MLflow. MLflow's own private ``_use_tracking_uri`` restores
    its setting but unsets an env-var URI; the env is restored here."""
    import mlflow

    if not uri:
        yield
        return
    env = os.environ.get(URI_ENV)
    try:
        try:
            from mlflow.tracking._tracking_service.utils import _use_tracking_uri
        except ImportError:  # pragma: no cover - another MLflow layout
            previous = mlflow.get_tracking_uri()
            mlflow.set_tracking_uri(uri)
            try:
                yield
            finally:
                mlflow.set_tracking_uri(previous)
        else:
            with _use_tracking_uri(uri):
                yield
    finally:
        if env is None:
            os.environ.pop(URI_ENV, None)
        else:
            os.environ[URI_ENV] = env


def check_tracking(cfg: SweepConfig, target: TrackingTarget) -> None:
    """Fail (or, with tracking.required=false, let pass) a tracking target that cannot work;
    the error names what set it (``tracking.uri`` or ``MLFLOW_TRACKING_URI``)."""
    if not cfg.tracking.enabled or not cfg.tracking.required:
        return
    uri, key = target.uri, target.uri_key
    fix = (f"start the server or fix {key}; tracking.required=false sweeps now and sends "
           "the tracking data once it answers; tracking.enabled=false turns tracking off")
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        parent = db.parent
        while not parent.exists():
            parent = parent.parent
        if not os.access(parent, os.W_OK) or (db.exists() and not os.access(db, os.W_OK)):
            raise ConfigError(key, target.shown, "is not writable", fix)
        return
    if uri.lower().startswith(("http://", "https://")):
        import requests

        try:
            requests.get(uri.rstrip("/") + "/health", timeout=5).raise_for_status()
        except requests.RequestException as exc:
            reason = type(exc).__name__
            raise ConfigError(key, target.shown, f"does not answer ({reason})", fix) from exc
