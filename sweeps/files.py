"""Durable file writes: the one atomic replace and the one append that survive a crash.

    write_atomic(sweep_dir / "state" / "sweep.json", json.dumps(record))
    write_atomic(path, lambda f: torch.save(payload, f))      # any writer of a binary file
    append_line(run_dir / "reports.jsonl", json.dumps(report))

Every file of a sweep that a crash must not tear goes through these (the sweep's record, the
scheduler's and the tracking journals, Train's repaired run snapshot, the clock, checkpoints
written by ``TrialSession``). ``write_atomic`` writes a temporary file next to the target,
fsyncs it and renames it over the target, so a reader sees the old or the new content, never
part of it. ``append_line`` fsyncs each line; a crash mid-append leaves at most one torn last
line, which readers skip and the next append starts a fresh line after.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["write_atomic", "append_line"]


def write_atomic(path: str | Path, data: str | bytes | Callable[[BinaryIO], object]) -> Path:
    """Replace ``path`` with ``data`` (text, bytes, or a function writing to a binary file).

    Example:
        >>> import tempfile
        >>> target = Path(tempfile.mkdtemp()) / "a.json"
        >>> write_atomic(target, '{"n": 1}').read_text()
        '{"n": 1}'
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data.encode() if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
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
    with open(path, "ab") as f:
        if f.tell() > 0 and not _ends_with_newline(path):
            f.write(b"\n")
        f.write(line.encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())


def _ends_with_newline(path: str | Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"
