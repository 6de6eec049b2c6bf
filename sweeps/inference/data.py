"""The input of ``sweeps.predict``: which files, read how, and which column the model takes.

    fmt, files = input_files("data/*.parquet")        # ('parquet', [...]), checked before Ray
    ds = read_input("data/*.parquet")                 # a ray.data.Dataset
    column = choose_column(ds.columns(), "tokenizer", None)   # 'text'

Paths are checked here, before Ray starts, so a missing file or an unknown type is one line
and nothing runs. Column rule: docs/running.md#batch-inference-with-the-best-model-sweeps-predict
"""

from __future__ import annotations

import glob
import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sweeps.config.datasets import READERS
from sweeps.errors import SweepError

__all__ = ["FORMATS", "choose_column", "input_files", "read_input"]

# File suffix -> format, the same files experiment.datasets reads (ray.data.read_<format>).
FORMATS = {suffix: reader.removeprefix("read_") for suffix, reader in READERS.items()}
DEFAULT_COLUMNS = {"tokenizer": ("text",), "image_processor": ("image",), None: ("x", "features")}
TAKES = {"tokenizer": "texts", "image_processor": "images (HxW or HxWxC arrays)",
         None: "feature arrays"}


def input_files(spec: str | Path | Sequence[str | Path]) -> tuple[str, list[str]]:
    """(format, files) of a path, a glob, a directory (its files) or a list of those; every
    file of one type (``FORMATS``). ``SweepError`` names what does not exist or is unknown.

    Example:
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.csv").write_text("text\\nhi\\n")
        >>> input_files(d / "*.csv")[0], input_files(d / "b.csv")
        Traceback (most recent call last):
        ...
        sweeps.errors.SweepError: predict: input .../b.csv does not exist
    """
    specs = [spec] if isinstance(spec, str | Path) else list(spec)
    if not specs:
        raise SweepError("predict: no input given; pass a file, a directory or a glob")
    files: list[Path] = []
    for item in map(str, specs):
        if glob.has_magic(item):
            found = sorted(Path(p) for p in glob.glob(item, recursive=True) if Path(p).is_file())
            if not found:
                raise SweepError(f"predict: input {item} matches no file")
        elif Path(item).is_dir():
            found = sorted(p for p in Path(item).rglob("*")
                           if p.is_file() and not p.name.startswith((".", "_")))
            if not found:
                raise SweepError(f"predict: input directory {item} holds no file")
        elif Path(item).is_file():
            found = [Path(item)]
        else:
            raise SweepError(f"predict: input {item} does not exist")
        files += found
    unknown = next((p for p in files if p.suffix.lower() not in FORMATS), None)
    if unknown is not None:
        raise SweepError(f"predict: input {unknown} is of an unknown file type "
                         f"('{unknown.suffix or 'no suffix'}'); use {', '.join(FORMATS)} files, "
                         "or pass a ray.data.Dataset")
    kinds = {FORMATS[p.suffix.lower()] for p in files}
    if len(kinds) > 1:
        raise SweepError(f"predict: the input mixes file types ({', '.join(sorted(kinds))}); "
                         "pass files of one type")
    return kinds.pop(), [str(p) for p in files]


def read_input(data: Any, read_cpus: float | None = None) -> Any:
    """A ``ray.data.Dataset`` of ``data``: a Dataset as it is, a pandas DataFrame, or files
    (``input_files``) read with Ray Data's reader for their type, each read task reserving
    ``read_cpus`` (None: Ray Data's 1); ``.npy`` files are loaded here, as column ``data``."""
    import pandas as pd
    import ray.data

    if isinstance(data, ray.data.Dataset):
        return data
    if isinstance(data, pd.DataFrame):
        return ray.data.from_pandas(data)
    fmt, files = input_files(data)
    if fmt == "numpy":  # read here: Ray's read_numpy takes no CPU setting (read_cpus)
        import numpy as np

        return ray.data.from_numpy(np.concatenate([np.load(f) for f in files]))
    reader = getattr(ray.data, f"read_{fmt}")
    if not read_cpus:
        return reader(files)
    if "num_cpus" in inspect.signature(reader).parameters:
        return reader(files, num_cpus=read_cpus)
    return reader(files, ray_remote_args={"num_cpus": read_cpus})  # Ray before named args


def choose_column(columns: Sequence[str], processor: str | None, column: str | None) -> str:
    """The column the model reads (``processor``: ``tokenizer``, ``image_processor`` or None
    for a torch module); ``SweepError`` listing the data's columns when it is missing.

    Example:
        >>> choose_column(["id", "text"], "tokenizer", None), choose_column(["px"], None, None)
        ('text', 'px')
        >>> choose_column(["id", "body"], "tokenizer", None)
        Traceback (most recent call last):
        ...
        sweeps.errors.SweepError: predict: ... no column 'text' ...; its columns: id, body; ...
    """
    names = list(columns)
    listed = ", ".join(names) or "(none)"
    if column is not None:
        if column not in names:
            raise SweepError(f"predict: the data has no column {column!r}; its columns: {listed}")
        return column
    if processor is None and len(names) == 1:
        return names[0]
    defaults = DEFAULT_COLUMNS.get(processor, ("x", "features"))
    for name in defaults:
        if name in names:
            return name
    wanted = " or ".join(repr(n) for n in defaults)
    raise SweepError(f"predict: the data has no column {wanted} (the model takes "
                     f"{TAKES.get(processor, 'feature arrays')}); its columns: {listed}; pass "
                     "column=NAME (--column NAME)")
