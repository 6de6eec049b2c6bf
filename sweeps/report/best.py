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
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

from sweeps import files
from sweeps.errors import SweepError
from sweeps.layout import SweepLayout
from sweeps.storage.location import display, sweep_root
from sweeps.trial.clock import finite_float

__all__ = ["best_checkpoint", "best_kept", "best_record", "no_sweep_error"]

FIX = ("pass the directory a sweep ran in (outputs/<sweep name>), a checkpoint directory, or a "
       "models:/NAME/VERSION or runs:/RUN_ID/model URI")


def best_checkpoint(sweep_dir: str | Path, who: str = "load_best") -> Path | str:
    """Directory of the best checkpoint of the finished sweep in ``sweep_dir``; ``SweepError``
    (one line starting with ``who``) for a directory that is not one. For a sweep on an object
    store (``s3://bucket/prefix``, or its ``result.sweep_dir``), the checkpoint's URI (a
    ``str``): download it with ``pyarrow.fs.copy_files`` or read it with ``sweeps.load_best``."""
    return files.shown(best_record(sweep_root(sweep_dir), who, display(sweep_dir))[0])


def best_kept(reports: Iterable[tuple[Any, Any, Any]], mode: str,
              kept: Callable[[str], bool] = files.exists) -> tuple[Any, str] | None:
    """(key, checkpoint) of the best of a trial's ``reports``, (key, metric value, checkpoint
    path) oldest first, whose checkpoint Train kept (it deletes all but ``checkpoint.keep``): of
    equal values the latest, as Train ranks them; None when none is kept. For the summary's
    ``best.json`` and ``sweeps.load``'s ``checkpoint`` column.

    Example:
        >>> kept = {"/a", "/b"}.__contains__
        >>> best_kept([(1, 0.9, "/gone"), (2, 0.8, "/a"), (3, 0.8, "/b")], "max", kept)
        (3, '/b')
    """
    sign = -1.0 if mode == "max" else 1.0
    ranked = sorted((sign * v, -i, key, str(path)) for i, (key, value, path) in enumerate(reports)
                    if path and (v := finite_float(value)) is not None)
    return next(((key, path) for *_, key, path in ranked if kept(path)), None)


def no_sweep_error(root: Path, who: str, shown: str) -> SweepError:
    """The error for a directory that is neither a finished sweep nor a checkpoint."""
    if not files.is_dir(root):
        return SweepError(f"{who}: {shown} is not a directory; {FIX}")
    started = any(n.startswith("experiment_state-") for n in files.listdir(root))
    what = "a sweep that has not finished" if started else "not a sweep directory"
    return SweepError(f"{who}: {shown} has no best.json ({what}) and holds no checkpoint "
                      f"(checkpoint.pt or a Transformers config.json); {FIX}")


def best_record(root: Path, who: str, shown: str) -> tuple[Path, dict[str, Any]]:
    """(the best checkpoint's directory, ``best.json`` as written) of the finished sweep in
    ``root`` (``sweep_root``'s path of the directory a user named ``shown``); ``SweepError``
    as ``best_checkpoint``."""
    layout = SweepLayout(root)
    if not files.is_file(layout.best):
        raise no_sweep_error(root, who, shown)
    best = json.loads(files.read_text(layout.best)) or {}
    if not best.get("checkpoint"):
        raise SweepError(f"{who}: no trial of the sweep in {shown} saved a checkpoint "
                         "(see summary.csv and each trial's error.txt)")
    checkpoint = sweep_root(best["checkpoint"])  # a path, or an object store's URI
    if not files.is_dir(checkpoint):  # the sweep directory was moved or copied
        moved = layout.run_dir(best["trial_id"]) / PurePosixPath(display(checkpoint)).name
        if not files.is_dir(moved):
            raise SweepError(f"{who}: the best checkpoint {display(checkpoint)} is gone (also "
                             f"not at {display(moved)}); it was deleted after the sweep")
        checkpoint = moved
    return checkpoint, best
