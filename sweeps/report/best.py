"""The best model of a sweep, ready to predict, in one call.

    from sweeps import load_best
    model = load_best("outputs/digits")          # from the sweep directory
    model = load_best("models:/digits/1")        # or from the MLflow registry
    model(torch.from_numpy(x[:5])).argmax(dim=1)

The sweep directory's ``best.json`` names the best trial's best checkpoint. If the directory was
moved since, the checkpoint is looked up at the same place relative to it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sweeps.errors import SweepError
from sweeps.execution.checkpoint import load_model
from sweeps.layout import SweepLayout

__all__ = ["load_best", "best_checkpoint"]


def best_checkpoint(sweep_dir: str | Path) -> Path:
    """Directory of the best checkpoint of the finished sweep in ``sweep_dir``."""
    root = Path(sweep_dir)
    fix = "pass the directory a sweep ran in (outputs/<sweep name>) or a models:/NAME/VERSION URI"
    if not root.is_dir():
        raise SweepError(f"load_best: {root} is not a directory; {fix}")
    layout = SweepLayout(root)
    best_file = layout.best
    if not best_file.exists():
        what = ("a sweep that has not finished" if list(root.glob("experiment_state-*.json"))
                else "not a sweep directory")
        raise SweepError(f"load_best: {root} has no best.json ({what}); {fix}")
    best = json.loads(best_file.read_text())
    if not best or not best.get("checkpoint"):
        raise SweepError(f"load_best: no trial of the sweep in {root} saved a checkpoint "
                         "(see summary.csv and each trial's error.txt)")
    checkpoint = Path(best["checkpoint"])
    if not checkpoint.is_dir():  # the sweep directory was moved or copied
        moved = layout.run_dir(best["trial_id"]) / checkpoint.name
        if not moved.is_dir():
            raise SweepError(f"load_best: the best checkpoint {checkpoint} is gone (also not at "
                             f"{moved}); it was deleted after the sweep")
        checkpoint = moved
    return checkpoint


def load_best(source: str | Path) -> Any:
    """The best model (``torch.nn.Module`` in eval mode) of a sweep directory or model URI.

    A checkpoint in a loop's own format is rebuilt by the experiment's ``model_loader``; without
    one, ``SweepError`` says where the checkpoint's files are (``best_checkpoint`` returns it).
    """
    text = str(source)
    if text.startswith(("models:/", "runs:/")):
        import mlflow.pytorch

        return mlflow.pytorch.load_model(text).eval()
    from sweeps.execution.checkpoint import build_model, model_form

    checkpoint = best_checkpoint(source)
    best = json.loads(SweepLayout(Path(source)).best.read_text())
    loader = best.get("model_loader")
    if model_form(checkpoint, loader) == "files":
        raise SweepError(f"load_best: the best checkpoint {checkpoint} is in the training "
                         "loop's own format; load it with your own code (sweeps.best_checkpoint"
                         f"('{source}') gives its directory), or set experiment.model_loader "
                         "to a function that turns a checkpoint directory into a model")
    if loader is None:
        return load_model(checkpoint)
    return build_model(checkpoint, loader)[0].eval()
