"""``experiment.datasets`` read and checked without Ray: sources, readers, functions.

    experiment:
      datasets:
        train: {function: trainables.digits_data:digits, split: train}   # fn(**kwargs)
        val: mypkg.data:val_set                                          # fn()
        test: /data/digits/test.parquet                                  # read with ray.data

``check_datasets`` (at validation) imports each function and binds its arguments, and checks
that a local path exists and has a type ray.data reads; the driver builds them once per sweep
(``sweeps.driver.datasets``).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps.config.usercode import import_function
from sweeps.errors import ConfigError

__all__ = ["DatasetSource", "parse_datasets", "check_datasets", "reader_of", "READERS"]

# File suffix -> the ray.data reader of such files.
READERS = {".parquet": "read_parquet", ".csv": "read_csv", ".json": "read_json",
           ".jsonl": "read_json", ".npy": "read_numpy"}
EXAMPLE = "{function: mypkg.data:load, split: train}, mypkg.data:train_set or data/train.parquet"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_URI = re.compile(r"^[a-z][a-z0-9+.-]*://")


@dataclass(frozen=True)
class DatasetSource:
    """One entry of ``experiment.datasets``: a function and its keyword arguments, or a path.

    Example:
        >>> parse_datasets({"val": "data/val.parquet"})["val"].describe()
        'data/val.parquet (read_parquet)'
    """

    name: str
    function: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    @property
    def key(self) -> str:
        return f"experiment.datasets.{self.name}"

    def describe(self) -> str:
        if self.function:
            args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
            return f"{self.function}({args})"
        return f"{self.path} ({reader_of(self.path or '')})"


def parse_datasets(entries: dict[str, Any]) -> dict[str, DatasetSource]:
    """``experiment.datasets`` as sources, or ``ConfigError`` naming the entry.

    Example:
        >>> src = parse_datasets({"train": {"function": "m:f", "split": "train"}})["train"]
        >>> src.function, src.kwargs
        ('m:f', {'split': 'train'})
    """
    out = {}
    for name, value in entries.items():
        key = f"experiment.datasets.{name}"
        if not _NAME.match(str(name)):
            raise ConfigError(key, value, "is not a dataset name a worker can ask for",
                              "name it like a Python identifier (train, val), the name your "
                              "loop passes to ray.train.get_dataset_shard")
        if isinstance(value, dict):
            kwargs = dict(value)
            function = kwargs.pop("function", None)
            if not isinstance(function, str):
                raise ConfigError(key, value, "is a mapping without a 'function' entry",
                                  f"write it as {{function: mypkg.data:load, <its keyword "
                                  f"arguments>}}; forms: {EXAMPLE}")
            out[name] = DatasetSource(name, function=function, kwargs=kwargs)
        elif isinstance(value, str) and value:
            is_path = ":" not in value or _URI.match(value) or Path(value).suffix.lower() in READERS
            out[name] = (DatasetSource(name, path=value) if is_path
                         else DatasetSource(name, function=value))
        else:
            raise ConfigError(key, value, "is neither a function nor a path",
                              f"use one of the forms {EXAMPLE}")
    return out


def reader_of(path: str) -> str:
    """The ``ray.data`` reader for ``path`` (a directory: that of the files in it; a URI's
    suffix decides, else parquet).

    Example:
        >>> reader_of("s3://bucket/train.csv"), reader_of("/nonexistent/dir")
        ('read_csv', 'read_parquet')
    """
    local = Path(path)
    if not _URI.match(path) and local.is_dir():
        suffixes = {p.suffix.lower() for p in local.iterdir() if p.suffix.lower() in READERS}
        if len(suffixes) == 1:
            return READERS[suffixes.pop()]
    return READERS.get(Path(path).suffix.lower(), "read_parquet")


def check_datasets(entries: dict[str, Any]) -> dict[str, tuple[DatasetSource, Any]]:
    """Everything about ``experiment.datasets`` that needs no Ray: functions import and accept
    their arguments, local paths exist and hold files ray.data reads. By name: (source, its
    imported function or None)."""
    checked = {}
    for src in parse_datasets(entries).values():
        fn = import_function(src.function, src.key, "mypkg.data:load") if src.function else None
        checked[src.name] = (src, fn)
        if fn is not None:
            try:
                inspect.signature(fn).bind(**src.kwargs)
            except TypeError as exc:
                params = ", ".join(inspect.signature(fn).parameters) or "none"
                raise ConfigError(src.key, src.describe(), f"cannot be called: {exc}",
                                  f"its parameters are: {params}") from exc
            except ValueError:  # no signature (a builtin): the call will tell
                pass
            continue
        path = src.path or ""
        if _URI.match(path):
            continue  # remote storage: ray.data reads it (and says what is wrong) at build
        if not Path(path).exists():
            raise ConfigError(src.key, path, "does not exist",
                              f"give the path of a file or directory of "
                              f"{'/'.join(READERS)} files (relative to {Path.cwd()})")
        if Path(path).is_file() and Path(path).suffix.lower() not in READERS:
            raise ConfigError(src.key, path, f"is a {Path(path).suffix or 'suffix-less'} file, "
                              "which ray.data is not told how to read",
                              f"convert it to one of {', '.join(READERS)}, or point "
                              f"{src.key} at a function returning a ray.data.Dataset")
    return checked
