"""Check the tracking target before Ray starts, open and close the sweep's parent run.

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
from typing import TYPE_CHECKING

from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError
from sweeps.storage.location import display
from sweeps.tracking.target import URI_ENV, TrackingTarget, absolute_uri

if TYPE_CHECKING:  # Ray (via the callback), pandas (via the summary) stay off the --help path
    from sweeps.execution.prepare import Prepared
    from sweeps.report.summary import Summary
    from sweeps.tracking.callback import MLflowTracking

log = logging.getLogger(__name__)

__all__ = ["check_tracking", "quiet_http_retries", "start_tracking",
           "finish_tracking", "abort_tracking", "absolute_uri", "local_store",
           "using_tracking_uri", "TRACKING_URI_ENV"]

TRACKING_URI_ENV = URI_ENV


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


@contextlib.contextmanager
def using_tracking_uri(uri: str | None) -> Iterator[None]:
    """MLflow's global tracking URI set to ``uri`` for the block, then put back as it was,
    ``MLFLOW_TRACKING_URI`` included: registry calls (``models:/``, ``registered_model_name``)
    and ``log_model(run_id=...)`` read only the global URI (MLflow 3.17), and neither
    ``load_best`` nor the sweep may repoint the caller's MLflow. MLflow's own private
    ``_use_tracking_uri`` restores its setting but unsets an env-var URI; the env is restored
    here."""
    import mlflow

    if not uri:
        yield
        return
    env = os.environ.get(TRACKING_URI_ENV)
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
            os.environ.pop(TRACKING_URI_ENV, None)
        else:
            os.environ[TRACKING_URI_ENV] = env


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


def start_tracking(prep: Prepared, sweep_id: str, start: int = 1) -> MLflowTracking:
    """The MLflow callback, with the sweep's parent run journaled (``start`` > 1: a resumed
    sweep, which continues the same parent run)."""
    import json

    from omegaconf import OmegaConf

    from sweeps.files import is_remote, write_atomic
    from sweeps.storage.location import uri_of
    from sweeps.tracking.callback import MLflowTracking, TrackingSettings

    cfg, t = prep.cfg, prep.cfg.tracking
    layout = prep.layout
    state_dir = layout.tracking
    if not is_remote(state_dir):
        state_dir.mkdir(exist_ok=True)
    settings = TrackingSettings(
        uri=prep.tracking_uri or "", experiment_name=prep.tracking.experiment,
        model_name=(t.model_name or cfg.experiment.name) if t.register_model else None,
        state_dir=str(state_dir), max_epochs=cfg.scheduler.max_t, scheduler=cfg.scheduler.name,
        flush_timeout_s=t.flush_timeout_s, metric=cfg.experiment.metric,
        mode=cfg.experiment.mode, model_loader=cfg.experiment.model_loader)
    # No credentials on disk: sweeps.sync takes them from MLFLOW_TRACKING_URI or MLflow's
    # credential variables, as the sweep does.
    write_atomic(layout.tracking_meta, json.dumps(settings.stored().__dict__, indent=2))
    tracking = MLflowTracking(settings)
    config = OmegaConf.to_container(OmegaConf.structured(cfg))
    tags = {"sweeps.sweep_name": cfg.sweep.name, "sweeps.sweep_dir": uri_of(prep.sweep_dir)}
    if prep.warm_start is not None:  # where the searcher's earlier trials came from
        tags["sweeps.warm_start.source"] = prep.warm_start.source
        tags["sweeps.warm_start.trials"] = str(len(prep.warm_start.trials))
    commit = _git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    tracking.start_sweep(cfg.sweep.name, sweep_id, config,
                         {p.path: p.describe() for p in prep.params}, tags, start)
    return tracking


def finish_tracking(tracking: MLflowTracking, prep: Prepared, summary: Summary) -> int:
    """Sweep end in MLflow; never lets a tracking failure hide the finished sweep."""
    try:
        outcomes = ({str(k): int(v) for k, v in summary.table["status"].value_counts().items()}
                    if "status" in summary.table else {})
        unsent = tracking.finish(prep.layout.summary_csv, summary.best, pareto=summary.pareto,
                                 outcomes=outcomes)
    except Exception as exc:
        log.error("MLflow: could not record the sweep's end (%s); the journal in %s keeps "
                  "it for `python -m sweeps.sync %s`", exc, display(prep.layout.tracking),
                  display(prep.sweep_dir))
        return -1
    if unsent:
        log.warning("MLflow: %d tracking record(s) not delivered yet (server unreachable); "
                    "they wait in %s. Send them with `python -m sweeps.sync %s`.", unsent,
                    display(prep.layout.tracking_journal), display(prep.sweep_dir))
    return unsent


def _git_commit() -> str | None:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def abort_tracking(tracking: MLflowTracking, exc: BaseException) -> None:
    """The sweep died: close the parent and every open trial run (KILLED on Ctrl-C/SIGTERM,
    FAILED otherwise) so no run is left RUNNING; wait briefly for delivery."""
    killed = isinstance(exc, KeyboardInterrupt | SystemExit) or getattr(exc, "interrupted", False)
    status = "KILLED" if killed else "FAILED"
    try:
        left = tracking.abort(status, f"{type(exc).__name__}: {exc}"[:500], timeout_s=15)
    except Exception as err:  # never mask the original error
        log.error("MLflow: could not record the sweep's abort (%s)", err)
        return
    if left:
        log.warning("MLflow: %d record(s) of the aborted sweep wait in the journal", left)
