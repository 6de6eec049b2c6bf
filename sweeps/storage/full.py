"""Whether an error is the sweep directory refusing writes: full, over quota, read-only.

    found = storage_refusal(exc)      # StorageRefusal(errno=28, name='ENOSPC', path=...) or None
    raise StorageFull(found.line(sweep_dir)) from exc

Such an error is not the trial's fault and not worth a retry: every trial writing to the same
directory would fail the same way, and each failure would be recorded against a good
configuration. The sweep stops instead (``sweeps.driver.storage_watch``), keeping what it
wrote before, and the same command resumes once the directory takes writes again. Found in the
error itself or anywhere in its chain (``__cause__``, ``__context__``, a Ray task error's
``cause``), as an ``OSError`` with one of ``REFUSALS``' errnos, or pyarrow's wording of one
("[errno 28] No space left on device", which it raises with no ``errno`` set).
"""

from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from sweeps.storage.location import is_object_store

__all__ = ["REFUSALS", "StorageRefusal", "storage_refusal"]

REFUSALS = {errno.ENOSPC: "ENOSPC", errno.EDQUOT: "EDQUOT", errno.EROFS: "EROFS",
            errno.EACCES: "EACCES"}
NEEDS_PATH = {errno.EACCES}  # too common elsewhere to count without naming a sweep file
_PYARROW = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)


@dataclass(frozen=True)
class StorageRefusal:
    """The refused write: errno, its name, and the path when the error names one."""

    errno: int
    name: str
    path: str | None

    def line(self, sweep_dir: str) -> str:
        """The one line a person is shown (``StorageFull``'s message).

        Example:
            >>> StorageRefusal(28, "ENOSPC", "/d/train/t1/x.pt").line("/d")[:71]
            'could not write /d/train/t1/x.pt: No space left on device (errno 28, EN'
        """
        where = self.path or sweep_dir
        return (f"could not write {where}: {os.strerror(self.errno)} (errno {self.errno}, "
                f"{self.name}); the sweep stopped, keeping its state and every checkpoint "
                f"written before; make room in {sweep_dir} (or make it writable) and run the "
                "same command again to resume it")


def storage_refusal(exc: BaseException | None,
                    within: str | os.PathLike[str] | None = None) -> StorageRefusal | None:
    """The storage refusal in ``exc`` or its chain, or None. With ``within`` (the sweep directory),
    a refusal naming a path elsewhere (the loop's own files on ``/tmp``, a read-only dataset mount)
    is not one: the trial fails as any error fails it. ``EACCES`` counts only when it names a path
    within (never for a sweep on an object store, whose files are no local paths).

    Example:
        >>> storage_refusal(OSError(28, "No space left on device", "/d/x")).path
        '/d/x'
        >>> storage_refusal(RuntimeError("x")) is None
        True
        >>> storage_refusal(OSError(28, "No space left on device", "/tmp/x"), within="/d") is None
        True
        >>> storage_refusal(OSError("[Errno 28] Error writing bytes to file. Detail: "
        ...                         "[errno 28] No space left on device")).name
        'ENOSPC'
    """
    if within is not None and is_object_store(os.fspath(within)):
        within = None
    found: list[StorageRefusal] = []
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError):
            found_code = _PYARROW.search(str(e))
            code = e.errno if e.errno in REFUSALS or not found_code else int(found_code.group(1))
            if code in REFUSALS:
                paths = [p for p in (e.filename, e.filename2) if isinstance(p, str)]
                path = next((p for p in paths if _counts(code, p, within)), None)
                if path is not None or (not paths and _counts(code, None, within)):
                    found.append(StorageRefusal(code, REFUSALS[code], path))
        todo.extend([e.__cause__, e.__context__, getattr(e, "cause", None)])
    # The deepest one that names a path: a chain's first error sits deepest ("during handling
    # of the above exception, another occurred"); a wrapper naming the path, above its cause
    with_path = [r for r in found if r.path]
    return with_path[-1] if with_path else (found[0] if found else None)


def _counts(code: int, path: str | None, within: str | os.PathLike[str] | None) -> bool:
    """Whether a refusal of ``path`` is the sweep directory's (``within``; None: an object
    store's sweep, whose local paths are never its own, so EACCES does not count there)."""
    if path is None or within is None:
        return code not in NEEDS_PATH
    roots = {os.path.abspath(os.fspath(within)), os.path.realpath(os.fspath(within))}
    paths = {os.path.abspath(path), os.path.realpath(path)}
    return any(p.startswith(r.rstrip("/") + "/") for p in paths for r in roots) or \
        any(path.lstrip("/").startswith(r.lstrip("/").rstrip("/") + "/")  # pyarrow: no "/"
            for r in roots)
