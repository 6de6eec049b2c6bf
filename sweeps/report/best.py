"""The best model of a sweep, ready to predict, in one call.

    from sweeps import load_best
    model = load_best("outputs/digits")          # from the sweep directory
    model = load_best("models:/digits/1")        # or from the MLflow registry
    model(torch.from_numpy(x[:5])).argmax(dim=1)
    model, tokenizer = load_best("outputs/hf_text")   # a Transformers sweep: Pretrained

The sweep directory's ``best.json`` names the best trial's best checkpoint. If the directory was
moved since, the checkpoint is looked up at the same place relative to it. What a source is and
how each kind loads lives in ``sweeps.inference.bundle`` (``sweeps.predict`` uses the same).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.errors import SweepError
from sweeps.layout import SweepLayout
from sweeps.storage.location import is_object_store, sweep_root, uri_of

__all__ = ["best_checkpoint", "best_record", "no_sweep_error"]

FIX = ("pass the directory a sweep ran in (outputs/<sweep name>), a checkpoint directory, or a "
       "models:/NAME/VERSION or runs:/RUN_ID/model URI")


def best_checkpoint(sweep_dir: str | Path, who: str = "load_best") -> Path | str:
    """Directory of the best checkpoint of the finished sweep in ``sweep_dir``; ``SweepError``
    (one line starting with ``who``) for a directory that is not one. For a sweep on an object
    store (``s3://bucket/prefix``, or its ``result.sweep_dir``), the checkpoint's URI (a
    ``str``): download it with ``pyarrow.fs.copy_files`` or read it with ``sweeps.load_best``."""
    if is_object_store(str(sweep_dir)):
        root = sweep_root(sweep_dir)
        try:
            best = json.loads(files.read_text(SweepLayout(root).best)) or {}
        except FileNotFoundError:
            raise SweepError(f"{who}: {uri_of(root)} has no best.json (not a finished sweep); "
                             f"{FIX}") from None
        if not best.get("checkpoint"):
            raise SweepError(f"{who}: no trial of the sweep in {uri_of(root)} saved a "
                             "checkpoint (see summary.csv and each trial's error.txt)")
        return uri_of(best["checkpoint"])
    return best_record(sweep_dir, who)[0]


def no_sweep_error(root: Path, who: str) -> SweepError:
    """The error for a directory that is neither a finished sweep nor a checkpoint."""
    if not root.is_dir():
        return SweepError(f"{who}: {root} is not a directory; {FIX}")
    what = ("a sweep that has not finished" if list(root.glob("experiment_state-*.json"))
            else "not a sweep directory")
    return SweepError(f"{who}: {root} has no best.json ({what}) and holds no checkpoint "
                      f"(checkpoint.pt or a Transformers config.json); {FIX}")


def best_record(sweep_dir: str | Path, who: str = "load_best") -> tuple[Path, dict[str, Any]]:
    """(the best checkpoint's directory, ``best.json`` as written) of the finished sweep in
    ``sweep_dir``; ``SweepError`` as ``best_checkpoint``."""
    root = Path(sweep_dir)
    layout = SweepLayout(root)
    if not layout.best.is_file():
        raise no_sweep_error(root, who)
    best = json.loads(layout.best.read_text()) or {}
    if not best.get("checkpoint"):
        raise SweepError(f"{who}: no trial of the sweep in {root} saved a checkpoint "
                         "(see summary.csv and each trial's error.txt)")
    checkpoint = Path(best["checkpoint"])
    if not checkpoint.is_dir():  # the sweep directory was moved or copied
        moved = layout.run_dir(best["trial_id"]) / checkpoint.name
        if not moved.is_dir():
            raise SweepError(f"{who}: the best checkpoint {checkpoint} is gone (also not at "
                             f"{moved}); it was deleted after the sweep")
        checkpoint = moved
    return checkpoint, best
