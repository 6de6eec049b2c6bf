"""A durable, append-only journal of tracking operations, applied in order.

    journal = Journal(sweep_dir / "tracking")
    journal.append({"op": "metrics", "trial": "ab12", "step": 3, "ts": 1732250000000, ...})
    for index, record in journal.pending(): ...; journal.mark_applied(index + 1)

Every tracking event is appended here (fsync'ed) before anything is sent to MLflow; what that
guarantees: docs/running.md#tracking-in-detail. Records carry their own timestamps, so
re-applying one whose reply was lost does not duplicate it. A crash mid-append leaves at most
one torn last line, skipped on read; the applied count is written atomically (renamed).

Reads are incremental, as a full re-read made each trial's end slower than the last
(``bench.scale``): ``pending()`` (after every append) reads complete lines from the first unapplied
record's offset; ``records()`` of a local journal only what was appended since this process last
read it (a per-process cache by path). On an object store (``sweeps.files``) each record is its own
object: ``records()`` reads them all (what another process wrote); ``pending()``, only in the
process that appends, reads the store once, then keeps its appends in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.storage.location import filesystem

__all__ = ["Journal"]


class Journal:
    """``<name>.jsonl`` (the records) + ``<name>.applied`` (how many were applied)."""

    def __init__(self, directory: str | Path, name: str = "journal") -> None:
        self.directory = Path(directory)
        self.remote = filesystem(self.directory) is not None
        self._made = False  # the directory is made by the first write (a reader makes nothing)
        self.path = self.directory / f"{name}.jsonl"
        self.applied_path = self.directory / f"{name}.applied"
        self._base = (0, 0)  # (byte offset, records before it): where pending() starts reading
        self._ends: dict[int, int] = {}  # record count -> byte offset just after that record
        self._cache: list[dict[str, Any]] | None = None  # object store: read once, then appended
        self._applied: int | None = None  # object store: the count this process last wrote
        self._lock = threading.Lock()

    def append(self, record: dict[str, Any]) -> None:
        """Add ``record`` durably (fsync, or one object) at the end of the journal."""
        line = json.dumps(record, default=str, separators=(",", ":"))
        with self._lock:
            self._make()
            files.append_line(self.path, line)
            if self._cache is not None:
                self._cache.append(json.loads(line))

    def _make(self) -> None:
        if not self._made:
            files.make_dirs(self.directory)
            self._made = True

    def records(self) -> list[dict[str, Any]]:
        """All complete records, in order (a torn line is skipped)."""
        if not self.remote:
            return _read_local(self.path)
        out = []
        for line in files.read_lines(self.path):
            with contextlib.suppress(ValueError):  # a torn line from a crash
                out.append(json.loads(line))
        return out

    def applied(self) -> int:
        """How many records have been applied."""
        if self._applied is not None:
            return self._applied
        try:
            return int(files.read_text(self.applied_path).strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    def pending(self) -> list[tuple[int, dict[str, Any]]]:
        """(index, record) of every complete record not yet applied."""
        done = self.applied()
        if self.remote:
            with self._lock:
                if self._cache is None:
                    self._cache = self.records()
                return list(enumerate(self._cache[done:], done))
        if done < self._base[1]:  # the applied count went back (edited by hand): rescan
            self._base = (0, 0)
        if not self.path.exists():
            return []
        offset, index = self._base
        with self.path.open("rb") as f:
            f.seek(offset)
            lines = f.read().split(b"\n")[:-1]  # the last piece is an unfinished line or b""
        out, self._ends = [], {}
        for line in lines:
            offset += len(line) + 1
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a torn line from a crash
            if index >= done:
                out.append((index, record))
            index += 1
            self._ends[index] = offset
        return out

    def waiting(self, known: bool) -> int:
        """How many records wait to be applied: a local journal is read from its applied
        offset; one on an object store, record by record, only when ``known`` says some wait
        (where a sweep's end left records; a killed sweep's go at its next start), else 0."""
        return len(self.pending()) if known or not self.remote else 0

    def mark_applied(self, count: int) -> None:
        """Record that the first ``count`` records are applied (atomic)."""
        self._make()
        files.write_atomic(self.applied_path, str(count))
        if self.remote:
            self._applied = count
        if count in self._ends:
            self._base = (self._ends[count], count)


# path -> ((device, inode), byte offset read up to, the last complete line before it, the
# records before it): records() of local journals
_READ: dict[str, tuple[tuple[int, int], int, bytes, list[dict[str, Any]]]] = {}
_READ_LOCK = threading.Lock()


def _read_local(path: Path) -> list[dict[str, Any]]:
    """The complete records of the local journal file ``path``, reading only the bytes past
    this process's last read of it. From the start when it is another file than last time:
    another (device, inode), shorter than what was read, or a different last line there (a
    file removed and made again can get the old inode back). The records are shared between
    calls: callers read them, never change them."""
    key = str(path)
    with _READ_LOCK:
        try:
            with path.open("rb") as f:
                stat = os.fstat(f.fileno())
                ident = (stat.st_dev, stat.st_ino)
                seen, offset, last, done = _READ.get(key, (ident, 0, b"", []))
                if last:  # the line read last time, which must still end at offset
                    f.seek(offset - len(last))
                still = f.read(len(last)) == last if last else offset == 0
                if seen != ident or stat.st_size < offset or not still:
                    offset, last, done = 0, b"", []
                f.seek(offset)
                tail = f.read()
        except (FileNotFoundError, IsADirectoryError):
            _READ.pop(key, None)
            return []
        complete = tail.rfind(b"\n") + 1  # what follows is a line still being written
        lines = tail[:complete].split(b"\n")[:-1]
        done = list(done)
        for line in lines:
            with contextlib.suppress(ValueError):  # a torn line from a crash
                done.append(json.loads(line))
        if lines:
            last = lines[-1] + b"\n"
        _READ[key] = (ident, offset + complete, last, done)
        return list(done)
