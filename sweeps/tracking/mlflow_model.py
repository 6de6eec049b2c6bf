"""Log the best checkpoint to MLflow as a PyTorch model that loads back in one call.

    model_uri = log_pytorch_model(uri, run_id, best, model_loader, model_name)
    mlflow.pytorch.load_model(model_uri)         # the nn.Module that was trained

Used by ``sweeps.tracking.mlflow_sink`` at the sweep's end, for a ``TrialSession`` checkpoint
or one an ``experiment.model_loader`` rebuilds (``sweeps.loop.checkpoint.build_model``).
The model's code travels with it (``code_paths``: the package that holds the model's factory,
without venvs, hidden folders and caches, ``model_code``), its requirements are pinned to what
is installed, and MLflow's notes meant for people calling it by hand stay quiet.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import logging
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

# Up a layer on purpose: the model's code is packaged by the rules the driver ships code
# to a cluster by, so what the model needs is what the trials had.
from sweeps.driver.code_shipping import DEFAULT_EXCLUDES, package_size
from sweeps.loop.checkpoint import build_model
from sweeps.tracking.setup import using_tracking_uri

__all__ = ["log_pytorch_model", "model_code", "model_in_runs_experiment", "quiet_model_logging",
           "pinned", "frameworks", "FRAMEWORKS", "LARGE_CODE_MB", "NOT_MODEL_CODE"]

log = logging.getLogger(__name__)


def log_pytorch_model(uri: str, run_id: str, best: dict[str, Any], model_loader: str | None,
                      model_name: str | None) -> str:
    """Log ``best["checkpoint"]`` as the model of run ``run_id`` (registered as
    ``model_name`` when set); return its model URI."""
    flavor = pytorch_flavor()
    model, ref, metadata = build_model(best["checkpoint"], model_loader)
    extra: dict[str, Any] = {}
    if "serialization_format" in inspect.signature(flavor.log_model).parameters:
        # MLflow 3.17 defaults to "pt2", which needs an input example and loads back as an
        # exported program; "pickle" loads back as the nn.Module that was trained.
        extra["serialization_format"] = "pickle"
    with using_tracking_uri(uri), quiet_model_logging(), model_code(ref) as code:
        info = flavor.log_model(
            model, name="model", run_id=run_id, registered_model_name=model_name,
            model_id=model_in_runs_experiment(uri, run_id), code_paths=[code],
            pip_requirements=pinned(("torch", "mlflow", "cloudpickle", "numpy",
                                     *frameworks(model))),
            metadata={**metadata, "checkpoint": best.get("checkpoint_uri", best["checkpoint"])},
            **extra,
        )
    return info.model_uri


def pytorch_flavor() -> Any:
    """``mlflow.pytorch``, imported without its Lightning autologging module where it is not
    loaded yet: MLflow imports that whenever Lightning is installed, and with it Lightning,
    torchmetrics and torch's compiler (4.5 s of CPU on 2 cores, beside the first trial), for a
    callback the driver never uses. MLflow skips the module when it cannot be imported (its
    ``mlflow/pytorch/__init__.py``); ``autolog`` imports it later as usual, but this process's
    ``mlflow.pytorch`` has no ``MlflowModelCheckpointCallback``. A second caller waits for the
    first's import (Python's import lock), never gets it half made."""
    autolog = "mlflow.pytorch._lightning_autolog"
    blocked = "mlflow.pytorch" not in sys.modules and autolog not in sys.modules
    if blocked:
        sys.modules[autolog] = None  # its import raises ImportError
    try:
        return importlib.import_module("mlflow.pytorch")
    finally:
        if blocked and autolog in sys.modules and sys.modules[autolog] is None:
            del sys.modules[autolog]


@contextlib.contextmanager
def model_code(ref: str) -> Iterator[str]:
    """The path ``log_model(code_paths=[...])`` gets for the model whose factory is ``ref``
    (``pkg.module:fn``): a top-level module's file as it is, or a temporary copy of the
    top-level package named as it is imported, holding what code shipping would send a cluster
    (``sweeps.driver.code_shipping``) less ``NOT_MODEL_CODE`` and virtual environments.
    Everything else is kept (data files a module reads at import, compiled extensions): MLflow
    puts ``code/`` first on ``sys.path`` when it loads the model, so a package missing a file
    there breaks the load even where the package is installed. MLflow copies a code path's whole
    tree twice per logged model, so a venv inside the package cost seconds at every sweep's end
    (a 37 MB one inside ``bench/``: 5,106 files, 4.7 s) and filled the artifact store; a package
    over ``LARGE_CODE_MB`` is logged with a warning that names it.

    Example:
        >>> with model_code("trainables.digits_data:build_model") as code:
        ...     print(Path(code).name, sorted(p.name for p in Path(code).iterdir())[:3])
        trainables ['__init__.py', 'contract.py', 'digits.py']
    """
    module_name = ref.split(":", 1)[0]
    package_name = module_name.split(".", 1)[0]
    package = importlib.import_module(package_name)
    if getattr(package, "__file__", None) and Path(package.__file__).name != "__init__.py":
        yield str(Path(package.__file__).resolve())
        return
    module = importlib.import_module(module_name)
    if getattr(package, "__file__", None):
        origin = Path(package.__file__).parent
    else:  # a namespace package (several folders): the portion the module is in
        portions = [Path(p) for p in package.__path__]
        where = Path(getattr(module, "__file__", None) or "").resolve()
        origin = next((p for p in portions if where.is_relative_to(p.resolve())), portions[0])
    kept = package_size(origin, [*DEFAULT_EXCLUDES, *NOT_MODEL_CODE], gitignore=False,
                        skip=lambda path: (path / "pyvenv.cfg").is_file())
    size = sum(kept.files.values())
    if size > LARGE_CODE_MB * 2**20:
        log.warning("the best model's code, package %s (%s), is %.0f MB, logged with the model: "
                    "keep data and checkpoints outside the package", package_name, origin,
                    size / 2**20)
    with tempfile.TemporaryDirectory(prefix="sweeps-model-code-") as tmp:
        dest = Path(tmp) / package_name  # imported by this name, whatever the folder's is
        dest.mkdir()
        for rel in kept.files:
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(origin / rel, dest / rel)
        yield str(dest)


LARGE_CODE_MB = 50
# Left out of a model's code besides what code shipping leaves out (gitwildmatch patterns).
NOT_MODEL_CODE = (".*", "site-packages/", "node_modules/", "*.pyc")


def model_in_runs_experiment(uri: str, run_id: str, name: str = "model") -> str:
    """The id of a new LoggedModel ``name`` of run ``run_id``, in the run's experiment, for
    ``log_model(model_id=...)``. Left to itself, ``log_model(run_id=...)`` (MLflow 3.17) files
    the model under the process's active experiment, ``Default`` when none was set:
    ``runs:/<run>/model`` then finds nothing (it looks in the run's experiment) and the UI lists
    the model elsewhere. Creating it here changes no global MLflow state (``set_experiment``
    would, and would export ``MLFLOW_EXPERIMENT_ID`` to every subprocess)."""
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    run = client.get_run(run_id)
    return client.create_logged_model(
        run.info.experiment_id, name=name, source_run_id=run_id,
        params={k: str(v) for k, v in run.data.params.items()}).model_id


# Packages a model's base class can come from besides torch: unpickling the model imports its
# class, so the logged model must require them (a LightningModule needs lightning).
FRAMEWORKS = {"lightning": "lightning", "pytorch_lightning": "pytorch-lightning"}


def frameworks(model: Any) -> list[str]:
    """The distributions ``model``'s class hierarchy needs besides torch (``FRAMEWORKS``).

    Example:
        >>> import torch
        >>> frameworks(torch.nn.Linear(2, 2))
        []
    """
    tops = {cls.__module__.split(".")[0] for cls in type(model).__mro__}
    return sorted(FRAMEWORKS[top] for top in tops if top in FRAMEWORKS)


def pinned(names: Iterable[str]) -> list[str]:
    """A logged model's pip requirements: ``names`` pinned to what is installed, without local
    version labels (``torch==2.13.0+cpu`` is not installable from PyPI; MLflow warns and strips
    it); a package that is not installed is left out."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in names:
        try:
            out.append(f"{name}=={version(name).split('+', 1)[0]}")
        except PackageNotFoundError:
            continue
    return out


@contextlib.contextmanager
def quiet_model_logging() -> Iterator[None]:
    """MLflow's notes while logging the best model are for people calling it by hand (the
    pickle-format caution, "Successfully registered model", "Created version"): the sweep
    says where the model went in its own summary."""
    loggers = [logging.getLogger(n) for n in ("mlflow", "mlflow.pytorch", "mlflow.transformers",
                                              "mlflow.models",
                                              "mlflow.tracking._model_registry.fluent",
                                              "mlflow.store.model_registry")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)
