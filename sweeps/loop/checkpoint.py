"""The trial checkpoint format: one ``checkpoint.pt`` per Train checkpoint directory.

    from sweeps import load_model
    model = load_model("outputs/digits/train/<trial_id>/checkpoint_epoch_0007")

A checkpoint holds the model's weights, the optimizer's state, the epoch it closes, the metrics
reported with it, and how to rebuild the model (``model_factory`` as ``"module:function"`` plus
its keyword arguments), so it loads without the sweep code guessing the architecture.
Written to a temporary name and renamed, so a crash mid-write never leaves a half file.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.config.usercode import import_trainable
from sweeps.files import write_atomic
from sweeps.storage import trees

__all__ = ["CHECKPOINT_FILE", "HF_SUBDIR", "save_checkpoint", "load_checkpoint", "load_model",
           "factory_ref", "model_form", "hf_checkpoint_dir", "build_model"]

CHECKPOINT_FILE = "checkpoint.pt"
# ray.train.huggingface.transformers.RayTrainReportCallback.CHECKPOINT_NAME: the callback copies
# the Trainer's last checkpoint into this subfolder of each Train checkpoint.
HF_SUBDIR = "checkpoint"
FORMAT_VERSION = 1


def factory_ref(fn: Any) -> str:
    """``"module:qualname"`` of a module-level function, the form ``load_model`` imports."""
    ref = f"{fn.__module__}:{fn.__qualname__}"
    if "<" in ref or fn.__module__ == "__main__":
        raise ValueError(f"model factory {ref} must be a module-level function in an importable "
                         "module so the checkpoint can rebuild the model")
    return ref


def save_checkpoint(directory: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus the format version) to ``directory/checkpoint.pt`` atomically."""
    import torch

    path = Path(directory) / CHECKPOINT_FILE
    return write_atomic(path, lambda f: torch.save({**payload, "format_version": FORMAT_VERSION},
                                                   f))


def load_checkpoint(directory: str | Path) -> dict[str, Any]:
    """Read the payload of a checkpoint directory (or of the ``checkpoint.pt`` file itself).

    Example:
        >>> from trainables.digits_data import build_model
        >>> ckpt_dir = tempfile.mkdtemp()
        >>> _ = save_checkpoint(ckpt_dir, {
        ...     "epoch": 7, "model_factory": "trainables.digits_data:build_model",
        ...     "model_kwargs": {"hidden": 32}, "model_state": build_model(32).state_dict()})
        >>> load_checkpoint(ckpt_dir)["epoch"]
        7
    """
    import torch

    with trees.local_copy(directory) as path:  # downloaded from an object store
        if path.is_dir():
            path = path / CHECKPOINT_FILE
        if not path.is_file():
            raise FileNotFoundError(f"no {CHECKPOINT_FILE} at {path}: not a sweeps checkpoint")
        return torch.load(path, map_location="cpu", weights_only=False)


def load_model(directory: str | Path) -> Any:
    """Rebuild the model a checkpoint was saved from, load its weights, return it in eval mode.

    Example:
        >>> import torch
        >>> from trainables.digits_data import build_model
        >>> ckpt_dir = tempfile.mkdtemp()
        >>> _ = save_checkpoint(ckpt_dir, {
        ...     "epoch": 7, "model_factory": "trainables.digits_data:build_model",
        ...     "model_kwargs": {"hidden": 32}, "model_state": build_model(32).state_dict()})
        >>> model = load_model(ckpt_dir)
        >>> model(torch.zeros(1, 64)).shape, model.training
        (torch.Size([1, 10]), False)
    """
    payload = load_checkpoint(directory)
    module_name, _, attr = payload["model_factory"].partition(":")
    model = getattr(importlib.import_module(module_name), attr)(**payload.get("model_kwargs", {}))
    model.load_state_dict(payload["model_state"])
    return model.eval()


def hf_checkpoint_dir(path: str | Path | None) -> Path | None:
    """The directory of a Hugging Face Transformers checkpoint at ``path``: ``path`` itself or
    its ``checkpoint/`` subfolder (``RayTrainReportCallback``'s layout), whichever holds a
    ``config.json`` naming ``architectures`` or a ``model_type``; None when neither does.

    The one rule for the ``transformers`` form: ``model_form``, ``sweeps.load_best``,
    ``sweeps.predict`` and the MLflow logging all ask this.

    Example:
        >>> d = Path(tempfile.mkdtemp()); (d / "checkpoint").mkdir()
        >>> _ = (d / "checkpoint" / "config.json").write_text('{"model_type": "bert"}')
        >>> hf_checkpoint_dir(d).name, hf_checkpoint_dir(d / "nowhere")
        ('checkpoint', None)
    """
    if not path:
        return None
    for candidate in (Path(path), Path(path) / HF_SUBDIR):
        try:
            config = json.loads(files.read_text(candidate / "config.json"))
        except (OSError, ValueError):
            continue
        if isinstance(config, dict) and (config.get("architectures") or config.get("model_type")):
            return candidate
    return None


def model_form(checkpoint: str | Path | None, loader: str | None) -> str:
    """How a best checkpoint goes to MLflow: ``sweeps`` (this format: rebuilt and logged as a
    PyTorch model), ``loader`` (``experiment.model_loader`` rebuilds it), ``transformers`` (a
    Hugging Face checkpoint, ``hf_checkpoint_dir``: logged with MLflow's transformers flavor),
    ``files`` (a loop's own format that sweeps cannot rebuild: the directory's files are logged
    as they are), or ``none`` (the loop saved no checkpoint). A ``model_loader`` wins over the
    detected forms: it is the user saying how.

    Example:
        >>> model_form("/nonexistent", None), model_form("/nonexistent", "pkg.mod:load")
        ('files', 'loader')
    """
    if not checkpoint:
        return "none"
    if loader:
        return "loader"
    if files.is_file(Path(checkpoint) / CHECKPOINT_FILE):
        return "sweeps"
    return "transformers" if hf_checkpoint_dir(checkpoint) is not None else "files"


def build_model(checkpoint: str | Path, loader: str | None) -> tuple[Any, str, dict[str, Any]]:
    """(model, "module:function" that built it, metadata) for a ``sweeps`` or ``loader`` form."""
    if loader:
        fn = import_trainable(loader, key="experiment.model_loader", arity=1)
        return fn(str(checkpoint)), loader, {"model_loader": loader}
    payload = load_checkpoint(checkpoint)
    return load_model(checkpoint), payload["model_factory"], {
        "model_factory": payload["model_factory"], "model_kwargs": payload["model_kwargs"],
        "epoch": payload["epoch"]}
