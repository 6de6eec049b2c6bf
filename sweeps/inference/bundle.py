"""What a model source is, decided before anything loads, and the one way each kind loads.

    source = resolve_source("outputs/digits")     # a sweep, a checkpoint dir, models:/ or runs:/
    model = source.load()                          # nn.Module, or Pretrained(model, processor)

``sweeps.load_best`` is ``resolve_source(...).load()``; ``sweeps.predict`` resolves in the driver
(so a bad source fails in one line before Ray starts anything) and each of its actors calls
``load()`` once. The forms are those of ``sweeps.loop.checkpoint.model_form`` plus the two
MLflow flavors the sweep logs (``mlflow.pytorch``, ``mlflow.transformers``).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.errors import SweepError
from sweeps.inference.hf import (
    Pretrained,
    architecture,
    load_pretrained,
    offline,
    processor_kind,
    quiet_transformers,
    task_of,
)
from sweeps.layout import SweepLayout
from sweeps.loop.checkpoint import (
    CHECKPOINT_FILE,
    build_model,
    hf_checkpoint_dir,
    load_model,
    model_form,
)
from sweeps.report.best import FIX, best_record, no_sweep_error
from sweeps.storage import trees
from sweeps.storage.location import display, sweep_root
from sweeps.tracking.setup import absolute_uri, local_store, using_tracking_uri

__all__ = ["ModelSource", "load_best", "resolve_source"]

URI_SCHEMES = ("models:/", "runs:/")


@dataclass(frozen=True)
class ModelSource:
    """A model to load, and how: ``form`` is ``sweeps`` / ``loader`` / ``transformers`` (a local
    checkpoint directory in ``location``) or ``mlflow.pytorch`` / ``mlflow.transformers`` (a
    model URI in ``location``, read from ``tracking_uri``). ``processor`` is ``tokenizer``,
    ``image_processor`` or None (no processor, or a torch module); ``task`` the pipeline task
    of a Transformers model's head (``sweeps.inference.hf.TASKS``). Plain data: it travels to
    Ray actors as it is.

    Example:
        >>> ModelSource("sweeps", "/ckpt").transformers, ModelSource("mlflow.transformers",
        ...     "models:/m/1", processor="tokenizer").transformers
        (False, True)
    """

    form: str
    location: str
    loader: str | None = None
    processor: str | None = None
    tracking_uri: str | None = None
    task: str | None = None  # Transformers: the pipeline task of its head (None: another head)

    @property
    def transformers(self) -> bool:
        return self.form in ("transformers", "mlflow.transformers")

    def load(self) -> Any:
        """The model: an ``nn.Module`` in eval mode, or ``Pretrained`` for Transformers."""
        if self.form == "sweeps":
            return load_model(self.location)
        if self.form == "loader":
            return build_model(self.location, self.loader)[0].eval()
        if self.form == "transformers":
            return load_pretrained(self.location)
        if self.form == "mlflow.pytorch":
            import mlflow.pytorch

            with _quiet_mlflow(), using_tracking_uri(self.tracking_uri):
                return mlflow.pytorch.load_model(self.location).eval()
        import mlflow.transformers

        with (offline(), _quiet_mlflow(), using_tracking_uri(self.tracking_uri),
              quiet_transformers()):
            parts = mlflow.transformers.load_model(self.location, return_type="components")
        return Pretrained(parts["model"].eval(),
                          parts.get("tokenizer") or parts.get("image_processor"))


def resolve_source(source: str | Path, who: str = "load_best", model_loader: str | None = None,
                   tracking_uri: str | None = None) -> ModelSource:
    """What ``source`` is and how its model loads, without loading it; ``SweepError`` (one line
    starting with ``who``) for a source that is none of: a finished sweep's directory (its best
    checkpoint), a checkpoint directory, a ``models:/``/``runs:/`` URI. ``model_loader``
    (``module:function``) rebuilds a loop's own checkpoint format, as
    ``experiment.model_loader`` does during a sweep.

    Example:
        >>> resolve_source("/nowhere")
        Traceback (most recent call last):
        ...
        sweeps.errors.SweepError: load_best: /nowhere is not a directory; pass the directory ...
    """
    text = str(source)
    if text.startswith(URI_SCHEMES):
        return _resolve_uri(text, who, model_loader, tracking_uri)
    root = sweep_root(text)
    try:
        return _resolve_dir(root, who, model_loader, display(text))
    except OSError as exc:
        if isinstance(files.shown(root), Path):  # a local path's error is its own
            raise
        raise SweepError(f"{who}: {display(text)} could not be read "  # the store refused
                         f"({str(exc).splitlines()[0][:200]}); check AWS_ENDPOINT_URL and the "
                         "credentials") from exc


def _resolve_dir(path: Path, who: str, loader: str | None, shown: str) -> ModelSource:
    """A sweep directory (its best checkpoint) or a checkpoint directory, local or on an
    object store (downloaded to a temporary directory, which stays for the model's readers:
    ``sweeps.predict``'s actors load it there)."""
    if path.name == CHECKPOINT_FILE and files.is_file(path):
        path = path.parent
    if files.is_file(SweepLayout(path).best):  # a sweep: its best checkpoint, its loader
        checkpoint, best = best_record(path, who, shown)
        return _checkpoint_source(_here(checkpoint), loader or best.get("model_loader"), who, shown)
    if files.is_file(path / CHECKPOINT_FILE) or hf_checkpoint_dir(path):
        return _checkpoint_source(_here(path), loader, who, shown)
    sweep = SweepLayout(path.resolve().parent.parent.parent)  # of <sweep>/train/<trial>/<ckpt>
    if path.resolve().parent.parent == sweep.train and files.is_file(sweep.best) \
            and files.is_dir(path):  # a checkpoint of a finished sweep's loop, in its own format
        best = json.loads(files.read_text(sweep.best)) or {}
        return _checkpoint_source(_here(path), loader or best.get("model_loader"), who, shown)
    if loader and files.is_dir(path):
        return _checkpoint_source(_here(path), loader, who, shown)
    raise no_sweep_error(path, who, shown)


def _here(checkpoint: Path) -> Path:
    """``checkpoint`` on this machine: itself, or a download of it from its object store."""
    return trees.kept_local(checkpoint, prefix="sweeps-best-")


def _checkpoint_source(checkpoint: Path, loader: str | None, who: str, shown: str) -> ModelSource:
    form = model_form(checkpoint, loader)
    if form == "files":
        raise SweepError(
            f"{who}: the checkpoint {checkpoint} is in the training loop's own format, which "
            "sweeps cannot rebuild into a model; pass model_loader='mypkg.models:load' "
            "(sweeps predict --model-loader), a module-level function from a checkpoint "
            "directory to an nn.Module, or set experiment.model_loader to it in the experiment "
            "so the next sweep registers the best checkpoint as a model "
            f"(sweeps.best_checkpoint('{shown}') gives the directory)")
    if form == "transformers":  # model_form said so: hf_checkpoint_dir finds it
        hf = hf_checkpoint_dir(checkpoint)
        return ModelSource("transformers", str(hf), processor=processor_kind(hf),
                           task=task_of(architecture(hf)))
    return ModelSource(form, str(checkpoint), loader=loader if form == "loader" else None)


def _resolve_uri(uri: str, who: str, loader: str | None, tracking_uri: str | None) -> ModelSource:
    import mlflow
    from mlflow.models import get_model_info

    tracking = absolute_uri(tracking_uri or mlflow.get_tracking_uri())
    local = local_store(tracking)
    if local is not None and not local.exists():
        raise SweepError(f"{who}: {uri} needs an MLflow store, and there is none at {tracking}; "
                         "run it where the sweep's mlflow.db is, or pass tracking_uri= "
                         "(--tracking-uri)")
    try:
        with _quiet_mlflow(), using_tracking_uri(tracking):
            flavors = get_model_info(uri).flavors
    except Exception as exc:  # no MLmodel there: maybe a logged checkpoint's files
        try:
            with _quiet_mlflow(), using_tracking_uri(tracking):
                local = mlflow.artifacts.download_artifacts(uri)
        except Exception:
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else repr(exc)
            raise SweepError(f"{who}: {uri} is not a model in the MLflow store {tracking} "
                             f"({first}); {FIX}") from exc
        return _resolve_dir(Path(local), who, loader, uri)
    if "transformers" in flavors:
        flavor = flavors["transformers"]
        parts = flavor.get("components") or []
        processor = next((p for p in ("tokenizer", "image_processor") if p in parts), None)
        return ModelSource("mlflow.transformers", uri, processor=processor,
                           tracking_uri=tracking, task=flavor.get("task"))
    if "pytorch" in flavors:
        return ModelSource("mlflow.pytorch", uri, tracking_uri=tracking)
    raise SweepError(f"{who}: {uri} is an MLflow model of flavor(s) {', '.join(sorted(flavors))}"
                     "; sweeps loads its pytorch and transformers models (load others with "
                     "mlflow.pyfunc.load_model)")


@contextlib.contextmanager
def _quiet_mlflow() -> Iterator[None]:
    """MLflow's INFO notes while reading a model ("Creating initial MLflow database tables",
    "'models:/x/1' resolved as ...") are not the caller's business; warnings still show."""
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def load_best(source: str | Path, model_loader: str | None = None) -> Any:
    """The best model of a sweep directory, or the model of a checkpoint directory or an
    MLflow model URI (``models:/NAME/VERSION``, ``runs:/RUN_ID/model``), in eval mode.

    A ``torch.nn.Module``, or ``Pretrained(model, processor)`` for a Hugging Face checkpoint
    (docs/running.md#the-best-model-in-one-call-load_best). A loop's own checkpoint format needs
    ``model_loader`` (``module:function``) unless ``experiment.model_loader`` was set.

    Example:
        >>> load_best("/nowhere")
        Traceback (most recent call last):
        ...
        sweeps.errors.SweepError: load_best: /nowhere is not a directory; pass the directory ...
    """
    return resolve_source(source, "load_best", model_loader).load()
