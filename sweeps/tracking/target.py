"""Where a sweep's MLflow runs go, and where that choice came from, MLflow's conventions first.

    target = tracking_target(cfg)      # in prepare(), before Ray starts
    target.uri, target.uri_from        # 'http://mlflow:5000', 'MLFLOW_TRACKING_URI'
    target.describe()                  # the plan's and the summary's line

The order (``tracking.uri``, ``MLFLOW_TRACKING_URI``, ``sqlite:///<cwd>/mlflow.db``; the same for
the experiment) and what a resumed sweep keeps: docs/running.md#tracking-in-detail. Relative
local stores are made absolute at the current directory; credentials in a URI are masked
wherever it is printed (``shown``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError
from sweeps.tracking.masking import mask_value

__all__ = ["TrackingTarget", "tracking_target", "absolute_uri", "URI_ENV", "EXPERIMENT_ENV",
           "DEFAULT_URI"]

URI_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
DEFAULT_URI = "sqlite:///mlflow.db"
RESUMED = "the sweep being resumed"
# What MLflow 3 accepts as a tracking URI: its stores' schemes (a plain path is a file store).
_SCHEMES = {"http", "https", "sqlite", "file", "postgresql", "mysql", "mssql", "databricks",
            "databricks-uc", "uc"}
_DB_DRIVERS = ("postgresql+", "mysql+", "mssql+")


@dataclass(frozen=True)
class TrackingTarget:
    """The tracking URI and experiment, each with the key or variable it came from."""

    uri: str
    uri_from: str  # "tracking.uri" | "MLFLOW_TRACKING_URI" | "default" | RESUMED
    experiment: str
    experiment_from: str  # "tracking.experiment_name" | "MLFLOW_EXPERIMENT_NAME" | ...

    @property
    def shown(self) -> str:
        """The URI as printed: any password in it masked."""
        return mask_value(self.uri)

    @property
    def uri_key(self) -> str:
        """The key or variable an error about the URI names (what the user would change)."""
        return URI_ENV if self.uri_from == URI_ENV else "tracking.uri"

    def runs_page(self, experiment_id: str) -> str:
        """How to open the experiment's runs table: MLflow 3.17's UI shows an experiment as
        GenAI or model training by a per-browser toggle (``workflowType``, GenAI unless
        chosen), so the link names the model-training view; a local store needs ``mlflow ui``.

        Example:
            >>> TrackingTarget("http://h:5000/", "tracking.uri", "d", "x").runs_page("3")
            'open http://h:5000/#/experiments/3?workflowType=machine_learning'
            >>> TrackingTarget("sqlite:////w/mlflow.db", "default", "d", "x").runs_page("1")
            'mlflow ui --backend-store-uri sqlite:////w/mlflow.db, then open http://127.0.0.1:5000/#/experiments/1?workflowType=machine_learning'
        """
        page = f"#/experiments/{experiment_id}?workflowType=machine_learning"
        scheme = urlsplit(self.uri).scheme.lower()
        if scheme in ("http", "https"):
            return f"open {self.shown.rstrip('/')}/{page}"
        if scheme in ("sqlite", "file", ""):
            return (f"mlflow ui --backend-store-uri {self.shown}, then open "
                    f"http://127.0.0.1:5000/{page}")
        return f"open {page} in the MLflow UI that serves this store"

    def describe(self) -> str:
        """One line for the plan and the summary.

        Example:
            >>> TrackingTarget("http://u:pw@h:5000", "MLFLOW_TRACKING_URI", "digits",
            ...                "experiment.name").describe()  # doctest: +NORMALIZE_WHITESPACE
            "http://u:***@h:5000 (from MLFLOW_TRACKING_URI), experiment 'digits'
             (from experiment.name)"
        """
        return (f"{self.shown} (from {self.uri_from}), experiment {self.experiment!r} "
                f"(from {self.experiment_from})")


def tracking_target(cfg: SweepConfig, resumed_uri: str | None = None,
                    resumed_experiment: str | None = None,
                    cwd: Path | None = None) -> TrackingTarget:
    """The target for ``cfg``: config keys, then MLflow's variables, then the default
    (``resumed_*``: the store and experiment of the sweep being resumed, which the defaults
    yield to).
    Raises ``ConfigError`` naming the key or variable for a URI MLflow cannot use.

    Example:
        >>> t = tracking_target(compose("digits"), cwd=Path("/w"))
        >>> t.uri if "MLFLOW_TRACKING_URI" not in os.environ else "sqlite:////w/mlflow.db"
        'sqlite:////w/mlflow.db'
    """
    t = cfg.tracking
    uri, source = _first(("tracking.uri", t.uri), (URI_ENV, os.environ.get(URI_ENV)),
                         (RESUMED, resumed_uri), ("default", DEFAULT_URI))
    _check_form(URI_ENV if source == URI_ENV else "tracking.uri", uri)
    name, name_from = _first(("tracking.experiment_name", t.experiment_name),
                             (EXPERIMENT_ENV, os.environ.get(EXPERIMENT_ENV)),
                             (RESUMED, resumed_experiment),
                             ("experiment.name", cfg.experiment.name))
    return TrackingTarget(absolute_uri(uri, cwd), source, name, name_from)


def _first(*sources: tuple[str, str | None]) -> tuple[str, str]:
    """(value, where it came from) of the first source with a non-blank value."""
    return next((value.strip(), where) for where, value in sources if value and value.strip())


def _check_form(key: str, uri: str) -> None:
    """A URI MLflow would reject, or misread as a local path, fails here in one line."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    fix = (f"unset {URI_ENV} or set it to a server (http://host:5000) or a store "
           "(sqlite:///mlflow.db)" if key == URI_ENV else
           "write a server (http://host:5000) or a store (sqlite:///mlflow.db)")
    if not scheme:
        if uri.startswith("/"):  # MLflow reads a plain absolute path as a file store
            return
        raise ConfigError(key, mask_value(uri), "has no scheme (MLflow would read it as a "
                          "local directory)", fix)
    if scheme not in _SCHEMES and not scheme.startswith(_DB_DRIVERS):
        raise ConfigError(key, mask_value(uri), f"has scheme {scheme!r}, which is no MLflow "
                          "tracking store", fix)
    if scheme in ("http", "https") and not parts.hostname:
        raise ConfigError(key, mask_value(uri), "names no host", fix)
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        raise ConfigError(key, mask_value(uri), f"has a bad port ({exc})", fix) from exc


def absolute_uri(uri: str, cwd: Path | None = None) -> str:
    """``uri`` with a relative local store (SQLite, ``file:``) made absolute at ``cwd``
    (default: the current directory); any other URI unchanged.

    Example:
        >>> absolute_uri("sqlite:///mlflow.db", Path("/w")), absolute_uri("http://h:5000")
        ('sqlite:////w/mlflow.db', 'http://h:5000')
    """
    for scheme in ("sqlite:///", "file://", "file:"):
        if uri.startswith(scheme):
            path = uri[len(scheme):]
            return uri if path.startswith("/") else f"{scheme}{(cwd or Path.cwd()) / path}"
    return uri
