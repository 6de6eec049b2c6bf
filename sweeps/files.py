"""The files of a sweep directory, on a local (or NFS) path or an object store, written durably.

    write_atomic(sweep_dir / "state" / "sweep.json", json.dumps(record))
    write_atomic(path, lambda f: torch.save(payload, f))      # any writer of a binary file
    append_line(run_dir / "reports.jsonl", json.dumps(report))
    read_lines(run_dir / "reports.jsonl"); read_text(path); exists(path); listdir(run_dir)

Every file of a sweep that a crash must not tear goes through these (the sweep's record, the
scheduler's and the tracking journals, Train's repaired run snapshot, the clock, checkpoints
written by ``TrialSession``), and every read of a file another process wrote. On a local path,
``write_atomic`` writes a temporary file next to the target, fsyncs it and renames it over the
target, so a reader sees the old or the new content, never part of it; ``append_line`` fsyncs
each line, and a crash mid-append leaves at most one torn last line, which readers skip and the
next append starts a fresh line after.

On an object store (a path under a URI sweep directory's stand-in, ``sweeps.storage.location``)
the same calls reach the store before they return: a whole object per ``write_atomic`` (a PUT is
atomic) and one object per appended line (``sweeps.storage.objects``), so the same guarantees
hold with no append and no fsync; reads go to the store, never to a local copy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from sweeps.storage import objects
from sweeps.storage.location import filesystem, uri_of

__all__ = ["write_atomic", "append_line", "read_lines", "read_text", "read_bytes", "exists",
           "is_file", "is_dir", "listdir", "remove_file", "open_binary", "make_dirs", "shown",
           "named_in"]


def make_dirs(path: str | Path) -> None:
    """Make the directory ``path`` and its parents (an object store has no directories: nothing)."""
    if filesystem(path) is None:
        Path(path).mkdir(parents=True, exist_ok=True)


def named_in(directory: str | Path, ray_path: str) -> Path:
    """The sweep's name of what Ray names ``ray_path`` in ``directory``: the path itself on a
    local path; on an object store, where Ray names it by the bucket's object path, the
    stand-in ``directory / <its name>``, as every other file of the sweep is named."""
    name = PurePosixPath(ray_path).name
    return Path(ray_path) if filesystem(directory) is None else Path(directory) / name


def shown(path: str | Path) -> Path | str:
    """``path`` as a user is handed it: a local ``Path``, or an object store's URI (a ``str``)."""
    return Path(path) if filesystem(path) is None else uri_of(path)


def write_atomic(path: str | Path, data: str | bytes | Callable[[BinaryIO], object]) -> Path:
    """Replace ``path`` with ``data`` (text, bytes, or a function writing to a binary file).

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "a.json"
        >>> write_atomic(target, '{"n": 1}').read_text()
        '{"n": 1}'
    """
    remote = filesystem(path)
    path = Path(path)
    if remote is not None:
        objects.put(*remote, objects.to_bytes(data))
        return path
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:  # a write or flush refused (a full disk) names no file: this one
        with contextlib.suppress(OSError):
            tmp.unlink()
        if exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


def append_line(path: str | Path, line: str) -> None:
    """Append ``line`` and a newline to ``path``, fsync'ed; a torn last line left by a crash
    is closed first, so the new line starts fresh.

    Example:
        >>> import tempfile
        >>> log = Path(tempfile.mkdtemp()) / "log.jsonl"
        >>> _ = log.write_text('{"n": 1}\\n{"n": 2')       # a crash tore the last line
        >>> append_line(log, '{"n": 3}')
        >>> log.read_text().splitlines()
        ['{"n": 1}', '{"n": 2', '{"n": 3}']
    """
    remote = filesystem(path)
    if remote is not None:
        objects.append_record(*remote, line)
        return
    with open(path, "a+b") as f:  # writes append wherever a read left the position
        if f.tell() > 0 and f.seek(-1, os.SEEK_END) >= 0 and f.read(1) != b"\n":
            f.write(b"\n")  # a torn last line
        f.write(line.encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())


def read_lines(path: str | Path) -> list[str]:
    """Every line ``append_line`` wrote to ``path``, in order ([] when there is none; a torn
    last line is returned as it is, for the reader to skip)."""
    remote = filesystem(path)
    if remote is not None:
        return objects.read_records(*remote)
    try:
        return Path(path).read_bytes().decode(errors="replace").splitlines()
    except (FileNotFoundError, IsADirectoryError):
        return []


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes; ``FileNotFoundError`` when it is missing."""
    remote = filesystem(path)
    return objects.get(*remote) if remote is not None else Path(path).read_bytes()


def read_text(path: str | Path, errors: str = "strict") -> str:
    """The file's text; ``FileNotFoundError`` when it is missing."""
    return read_bytes(path).decode(errors=errors)


def exists(path: str | Path) -> bool:
    remote = filesystem(path)
    return objects.exists(*remote) if remote is not None else Path(path).exists()


def is_file(path: str | Path) -> bool:
    remote = filesystem(path)
    return objects.is_file(*remote) if remote is not None else Path(path).is_file()


def is_dir(path: str | Path) -> bool:
    remote = filesystem(path)
    return objects.is_dir(*remote) if remote is not None else Path(path).is_dir()


def listdir(path: str | Path) -> list[str]:
    """Names of the entries directly in ``path``, sorted ([] when it is missing)."""
    remote = filesystem(path)
    if remote is not None:
        return objects.listdir(*remote)
    return sorted(p.name for p in Path(path).iterdir()) if Path(path).is_dir() else []


def remove_file(path: str | Path) -> None:
    """Delete a file (nothing when it is missing)."""
    remote = filesystem(path)
    if remote is not None:
        objects.delete_file(*remote)
    else:
        Path(path).unlink(missing_ok=True)


def open_binary(path: str | Path) -> Any:
    """A seekable binary file of ``path`` (on an object store, only the ranges read are
    fetched: a zip's directory without the whole archive)."""
    remote = filesystem(path)
    return objects.open_input(*remote) if remote is not None else open(path, "rb")

