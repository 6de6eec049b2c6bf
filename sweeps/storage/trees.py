"""Directory trees of a sweep directory, local or on an object store: copied, moved, mirrored.

    trees.put_tree(local_checkpoint, run_dir / name)     # a checkpoint, replacing one there
    trees.copy_tree(donor_checkpoint, frozen)            # hard links locally, a copy on a store
    with trees.local_copy(checkpoint) as here: ...       # itself, or a temporary download
    trees.publish(plots_dir)                             # what a library wrote under a stand-in

The single files of a sweep (written atomically, appended, read) go through ``sweeps.files``;
these are the operations on whole directories, each one call for either kind of storage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sweeps import files
from sweeps.storage import objects
from sweeps.storage.location import display, filesystem

__all__ = ["move", "remove_tree", "put_tree", "add_tree", "copy_tree", "download", "local_copy",
           "kept_local", "refresh_local", "publish", "first_missing", "remove_empty"]


def move(src: str | Path, dst: str | Path) -> None:
    """Rename a file or directory (on an object store: copy, then delete the source)."""
    remote = filesystem(src)
    if remote is None:
        Path(src).rename(dst)
        return
    fs, source = remote
    target = filesystem(dst)[1]  # type: ignore[index]
    if objects.is_dir(fs, source):
        objects.copy_tree(fs, source, target)
        objects.delete_dir(fs, source)
    else:
        fs.move(source, target)


def remove_tree(path: str | Path) -> None:
    """Delete a directory and everything in it (nothing when it is missing)."""
    remote = filesystem(path)
    if remote is not None:
        objects.delete_dir(*remote)
    else:
        shutil.rmtree(path, ignore_errors=True)


def put_tree(source: str | Path, target: str | Path) -> None:
    """Make ``target`` a copy of the local directory ``source``, replacing what was there:
    locally through a staging directory renamed into place; on an object store by uploading
    (a reader could see a partial copy meanwhile, as Ray Train's own uploads can)."""
    remote = filesystem(target)
    if remote is not None:
        objects.delete_dir(*remote)
        objects.upload_tree(str(source), *remote)
        return
    target = Path(target)
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


def add_tree(source: str | Path, target: str | Path) -> None:
    """Copy the local directory ``source``'s files into ``target``, keeping the files already
    there (the files of another rank's part of the same checkpoint, as Ray Train merges them)."""
    remote = filesystem(target)
    if remote is not None:
        objects.upload_tree(str(source), *remote)
        return
    shutil.copytree(source, target, dirs_exist_ok=True)


def copy_tree(source: str | Path, target: str | Path) -> None:
    """Make ``target`` a copy of the directory ``source`` on the same storage: hard links on a
    local path (a copy across file systems), a copy within the store on an object store."""
    remote = filesystem(source)
    if remote is not None:
        objects.copy_tree(remote[0], remote[1], filesystem(target)[1])  # type: ignore[index]
        return
    shutil.copytree(source, target, copy_function=_link)


def _link(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def download(path: str | Path, local: str | Path) -> Path:
    """Copy the file or directory ``path`` (on the object store, or local) to ``local``."""
    remote = filesystem(path)
    local = Path(local)
    if remote is None:
        if Path(path).is_dir():
            shutil.copytree(path, local, dirs_exist_ok=True)
        else:
            shutil.copy2(path, local)
        return local
    fs, source = remote
    if objects.is_dir(fs, source):
        local.mkdir(parents=True, exist_ok=True)
    objects.download_tree(fs, source, str(local))
    return local


@contextlib.contextmanager
def local_copy(path: str | Path) -> Iterator[Path]:
    """``path`` as a local file or directory: itself, or a temporary download removed after.

    Example:
        >>> with local_copy("/etc") as here:
        ...     here == Path("/etc")
        True
    """
    if filesystem(path) is None:
        yield Path(path)
        return
    with tempfile.TemporaryDirectory(prefix="sweeps-download-") as tmp:
        yield _download_into(path, tmp)


def kept_local(path: str | Path, prefix: str) -> Path:
    """``path`` on this machine: itself, or a download of it from its object store into a
    new temporary directory (``prefix``), which stays for its readers."""
    if filesystem(path) is None:
        return Path(path)
    return _download_into(path, tempfile.mkdtemp(prefix=prefix))


def _download_into(path: str | Path, directory: str) -> Path:
    """A download of ``path`` into ``directory``, under its own name (no URI options)."""
    return download(path, Path(directory) / Path(display(path)).name)


def refresh_local(path: str | Path) -> bool:
    """Make the local stand-in of an object-store directory a fresh copy of what the store
    holds there (a killed process's stale local files go); False, untouched, for a local path,
    True for a stand-in (write there, then ``publish``)."""
    if filesystem(path) is None:
        return False
    shutil.rmtree(path, ignore_errors=True)
    if files.is_dir(path):
        download(path, path)
    return True


def publish(path: str | Path) -> None:
    """Copy what a library wrote to the local file or directory ``path`` (plots, a parquet
    file, Ray's log) to the object store its stand-in names; nothing for a local path."""
    remote = filesystem(path)
    if remote is not None and Path(path).exists():
        objects.upload_tree(str(path), *remote)


def first_missing(path: str | Path) -> Path | None:
    """The outermost directory of ``path`` that does not exist yet, None when it exists (on an
    object store, ``path`` itself: it has no parents to make)."""
    if files.exists(path):
        return None
    missing = Path(path)
    while filesystem(path) is None and not missing.parent.exists():
        missing = missing.parent
    return missing


def remove_empty(path: str | Path, up_to: Path) -> None:
    """Remove the empty directories from ``path`` up to and including ``up_to``, stopping at
    the first that is not empty (nothing on an object store, which has no directories)."""
    if filesystem(path) is not None:
        return
    here = Path(path)
    while here.is_relative_to(up_to):
        try:
            here.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return
        here = here.parent
