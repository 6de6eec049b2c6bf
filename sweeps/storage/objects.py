"""Object-store operations behind ``sweeps.files``, on a pyarrow filesystem.

    put(fs, "bucket/sweep/state/sweep.json", b"{...}")     # one whole object, atomic
    append_record(fs, "bucket/sweep/state/scheduler.jsonl", '{"trial": ...}')
    read_records(fs, "bucket/sweep/state/scheduler.jsonl")  # every record, in order

Why one object per record (no append, no fsync; a PUT is atomic) and what a read costs:
docs/clusters.md#storage-every-node-reaches. A log ``<name>`` is kept as
``<name>.records/<seq>-<writer>``: ``seq`` one past the highest the writer found when it first
appended (listed once per process and log), ``writer`` a random id, so two writers never
overwrite each other and records read back in append order.
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["RECORDS", "put", "get", "info", "exists", "is_file", "is_dir", "listdir",
           "delete_dir", "delete_file", "copy_tree", "upload_tree", "upload_file", "download_tree",
           "append_record", "read_records", "open_input", "to_bytes"]

RECORDS = ".records"  # suffix of the prefix that holds an appended log's records
_WRITER = uuid.uuid4().hex[:8]
_next_seq: dict[tuple[int, str], int] = {}
_seq_lock = threading.Lock()
_fetched: dict[tuple[int, str], str] = {}  # (filesystem, record object) -> its line


def _file_type() -> Any:
    from pyarrow.fs import FileType

    return FileType


def put(fs: Any, path: str, data: bytes) -> None:
    """Replace the object ``path`` with ``data`` (atomic: readers see old or new)."""
    with fs.open_output_stream(path) as out:
        out.write(data)


def get(fs: Any, path: str) -> bytes:
    """The object's bytes; ``FileNotFoundError`` when there is none."""
    if not is_file(fs, path):
        raise FileNotFoundError(path)
    with fs.open_input_stream(path) as f:
        return f.read()


def open_input(fs: Any, path: str) -> Any:
    """A seekable binary file of the object (reads only the ranges asked for)."""
    return fs.open_input_file(path)


def info(fs: Any, path: str) -> Any:
    return fs.get_file_info(path)


def exists(fs: Any, path: str) -> bool:
    return info(fs, path).type != _file_type().NotFound


def is_file(fs: Any, path: str) -> bool:
    return info(fs, path).type == _file_type().File


def is_dir(fs: Any, path: str) -> bool:
    return info(fs, path).type == _file_type().Directory


def listdir(fs: Any, path: str) -> list[str]:
    """Names directly under ``path``, sorted ([] when there is nothing)."""
    from pyarrow.fs import FileSelector

    return sorted(i.base_name for i in fs.get_file_info(FileSelector(path, allow_not_found=True)))


def delete_dir(fs: Any, path: str) -> None:
    if is_dir(fs, path):
        fs.delete_dir(path)


def delete_file(fs: Any, path: str) -> None:
    if is_file(fs, path):
        fs.delete_file(path)


def copy_tree(fs: Any, src: str, dst: str) -> None:
    """Copy a file or a directory tree within the store."""
    import pyarrow.fs

    pyarrow.fs.copy_files(src, dst, source_filesystem=fs, destination_filesystem=fs)


def upload_tree(local: str, fs: Any, path: str) -> None:
    """Copy a local file or directory tree (symlinks followed, as ``copy_files`` does) to
    ``path``, file by file (``upload_file``), up to 8 at a time; ``FileNotFoundError`` when
    ``local`` does not exist."""
    if os.path.isfile(local):
        upload_file(fs, local, path)
        return
    if not os.path.isdir(local):
        raise FileNotFoundError(local)
    uploads = [(os.path.join(root, name),
                f"{path}/{Path(os.path.relpath(root, local), name).as_posix()}")
               for root, _, names in os.walk(local, followlinks=True) for name in names]
    if len(uploads) < 2:
        for source, target in uploads:
            upload_file(fs, source, target)
        return
    with ThreadPoolExecutor(max_workers=min(8, len(uploads))) as pool:
        for done in [pool.submit(upload_file, fs, source, target)
                     for source, target in sorted(uploads)]:
            done.result()  # the first failure raises, after the others have ended


def upload_file(fs: Any, local: str, path: str) -> None:
    """Write the local file ``local`` to ``path``, raising when the store refuses it. Its upload
    happens when the stream is closed, and that close is made here: ``pyarrow.fs.copy_files``
    returns normally when an upload fails (pyarrow 25: Arrow's ``CopyFiles`` waits for each close
    without reading its status). A failure while writing removes what the stream would otherwise
    publish when it is destroyed (Arrow completes an unclosed upload then: a truncated object)."""
    out = fs.open_output_stream(path, compression=None)
    try:
        with open(local, "rb") as source:
            while chunk := source.read(UPLOAD_CHUNK):
                out.write(chunk)
    except BaseException:
        with contextlib.suppress(Exception):
            out.close()
        with contextlib.suppress(Exception):
            fs.delete_file(path)
        raise
    out.close()


UPLOAD_CHUNK = 8 << 20


def download_tree(fs: Any, path: str, local: str) -> None:
    """Copy the object ``path`` (or every object under it) to the local ``local``."""
    import pyarrow.fs

    pyarrow.fs.copy_files(path, local, source_filesystem=fs)


def _seq(name: str) -> int:
    try:
        return int(name.partition("-")[0])
    except ValueError:
        return -1


def append_record(fs: Any, path: str, line: str) -> None:
    """Add ``line`` to the appended log ``path`` as its own object."""
    prefix = f"{path}{RECORDS}"
    key = (id(fs), prefix)
    with _seq_lock:
        if key not in _next_seq:
            _next_seq[key] = max((_seq(n) for n in listdir(fs, prefix)), default=-1) + 1
        seq = _next_seq[key]
        _next_seq[key] = seq + 1
    name = f"{prefix}/{seq:010d}-{_WRITER}"
    put(fs, name, line.encode())
    _fetched[(id(fs), name)] = line


def read_records(fs: Any, path: str) -> list[str]:
    """Every record of the appended log ``path``, in order ([] when it has none)."""
    prefix = f"{path}{RECORDS}"
    names = sorted(listdir(fs, prefix), key=lambda n: (_seq(n), n))
    return _fetch_all(fs, [f"{prefix}/{n}" for n in names])


def _fetch_all(fs: Any, paths: list[str]) -> list[str]:
    def fetch(p: str) -> str:
        with fs.open_input_stream(p) as f:
            return f.read().decode()

    missing = [p for p in paths if (id(fs), p) not in _fetched]
    if len(missing) < 4:
        got = [fetch(p) for p in missing]
    else:
        with ThreadPoolExecutor(max_workers=min(16, len(missing))) as pool:
            got = list(pool.map(fetch, missing))
    _fetched.update(((id(fs), p), text) for p, text in zip(missing, got, strict=True))
    return [_fetched[(id(fs), p)] for p in paths]


def to_bytes(data: Any) -> bytes:
    """``write_atomic``'s data (text, bytes, or a function writing a binary file) as bytes."""
    if callable(data):
        buffer = io.BytesIO()
        data(buffer)
        return buffer.getvalue()
    return data.encode() if isinstance(data, str) else bytes(data)
