"""Where a sweep directory given as a URI lives: its stand-in local path, and back.

    python -m sweeps +experiment=digits sweep.dir=s3://bucket/sweeps/digits

Every module of sweeps names the files of a sweep directory by path (``SweepLayout``, run
directories, checkpoint paths in results). For a sweep directory on an object store (any URI
``pyarrow.fs.FileSystem.from_uri`` knows: ``s3://``, ``gs://``, ``abfs://``, ...), that path is
a *stand-in*: ``<tmp>/sweeps-storage/<token>/<relative path>``, where the token encodes the URI
itself, so any process on any node turns it back into (filesystem, object path) with no
registry or environment to ship. ``sweeps.files`` reads and writes through it; what is written
under it: docs/clusters.md#storage-every-node-reaches.

Deliberate divergence from Ray: Tune and Train take the URI itself (``storage_path``); sweeps
hands them ``uri_of(stand-in)``, so both agree on every object's name.
"""

from __future__ import annotations

import base64
import functools
import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

__all__ = ["MARKER", "is_uri", "is_object_store", "sweep_root", "stand_in", "remote_of",
           "uri_of", "filesystem", "display", "storage_of", "store_env", "ray_name"]

MARKER = "sweeps-storage"  # the path component a stand-in root sits under


def is_uri(raw: str) -> bool:
    """Whether ``raw`` is ``scheme://...`` (a drive letter or a plain path is not).

    Example:
        >>> is_uri("s3://b/x"), is_uri("file:///tmp/x"), is_uri("outputs/x"), is_uri("c:/x")
        (True, True, False, False)
    """
    scheme, sep, _ = raw.partition("://")
    return bool(sep) and len(scheme) > 1 and all(c.isalnum() or c in "+.-" for c in scheme)


def is_object_store(raw: str) -> bool:
    """Whether a ``sweep.dir`` (or a path given to ``load_best``, ``sweeps.sync``) names an
    object store: a URI other than ``file://``, or a stand-in path of one.

    Example:
        >>> [is_object_store(x) for x in ("s3://b/x", "file:///tmp/x", "outputs/x")]
        [True, False, False]
    """
    raw = os.fspath(raw)
    return (is_uri(raw) and not raw.startswith("file:")) or remote_of(raw) is not None


def sweep_root(raw: str | os.PathLike[str]) -> Path:
    """The path sweeps names a sweep directory by: the stand-in of an object-store URI (a
    stand-in given as itself), else the absolute local path (``file:///abs`` is ``/abs``).

    Example:
        >>> sweep_root("file:///runs/d"), sweep_root("/runs/d")
        (PosixPath('/runs/d'), PosixPath('/runs/d'))
        >>> uri_of(sweep_root("s3://bucket/sweeps/d/"))
        's3://bucket/sweeps/d'
    """
    raw = os.fspath(raw)
    if is_uri(raw):
        scheme, _, rest = raw.partition("://")
        if scheme.lower() != "file":
            return stand_in(raw)
        raw = rest if rest.startswith("/") else "/" + rest.partition("/")[2]
    return Path(raw).expanduser().absolute()


def stand_in(uri: str, base: str | None = None) -> Path:
    """The local stand-in path of the sweep directory ``uri`` (no trailing slash kept).

    Example:
        >>> p = stand_in("s3://bucket/sweeps/digits/", base="/tmp")
        >>> p.parent.as_posix(), uri_of(p / "state" / "sweep.json")
        ('/tmp/sweeps-storage', 's3://bucket/sweeps/digits/state/sweep.json')
    """
    root = Path(base or os.environ.get("SWEEPS_STORAGE_TMP") or tempfile.gettempdir())
    return root / MARKER / base64.urlsafe_b64encode(uri.rstrip("/").encode()).decode().rstrip("=")


def remote_of(path: str | os.PathLike[str]) -> tuple[str, PurePosixPath] | None:
    """(root URI, path relative to it) of a stand-in path; None for a local path.

    Example:
        >>> remote_of(stand_in("s3://b/x", base="/tmp") / "train" / "t1")
        ('s3://b/x', PurePosixPath('train/t1'))
        >>> remote_of("/home/me/outputs/x") is None
        True
    """
    parts = PurePosixPath(os.fspath(path)).parts
    for i in range(len(parts) - 1):
        if parts[i] == MARKER:
            token = parts[i + 1]
            try:
                root = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
            except (ValueError, UnicodeDecodeError):
                return None
            if is_uri(root):
                return root, PurePosixPath(*parts[i + 2:]) if parts[i + 2:] else PurePosixPath()
    return None


def _join(root: str, rel: PurePosixPath) -> str:
    base, sep, query = root.partition("?")
    return (base if str(rel) == "." else f"{base.rstrip('/')}/{rel.as_posix()}") + sep + query


def uri_of(path: str | os.PathLike[str]) -> str:
    """The URI a stand-in path names (a local path comes back as a plain path string).

    Example:
        >>> uri_of(stand_in("s3://b/x?endpoint_override=h:9", base="/t") / "train")
        's3://b/x/train?endpoint_override=h:9'
        >>> uri_of("/data/x")
        '/data/x'
    """
    found = remote_of(path)
    return os.fspath(path) if found is None else _join(*found)


def storage_of(path: str | os.PathLike[str]) -> tuple[str, str]:
    """(``storage_path``, ``name``) that Tune's ``RunConfig`` takes for the directory ``path``.

    Example:
        >>> storage_of(stand_in("s3://b/sweeps/d?scheme=http", base="/t"))
        ('s3://b/sweeps?scheme=http', 'd')
        >>> storage_of("/runs/d")
        ('/runs', 'd')
    """
    base, sep, query = uri_of(path).partition("?")
    parent, _, name = base.rstrip("/").rpartition("/")
    return parent + sep + query, name


def display(path: str | os.PathLike[str]) -> str:
    """What a person is shown for a path: the URI without its query (endpoint options)."""
    return uri_of(path).partition("?")[0]


def ray_name(path: str | os.PathLike[str]) -> tuple[str, Any]:
    """(path, filesystem) as Ray names ``path`` (``ray.train.Checkpoint(path, filesystem)``):
    the local path and None, or the object path in its store and the store's filesystem.

    Example:
        >>> ray_name("/data/x")
        ('/data/x', None)
    """
    found = filesystem(path)
    return (os.fspath(path), None) if found is None else (found[1], found[0])


# Where an object store is (not who may read it): sent to a joined cluster's workers.
# Credentials are not: each node takes its own from the standard chain (an instance role, its
# own ~/.aws), so no key travels in Ray's job config.
STORE_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION")


def store_env(raw: str) -> dict[str, str]:
    """The endpoint and region variables set here for the object-store sweep directory
    ``raw`` (none for a local one), for the workers of a joined cluster."""
    return {k: os.environ[k] for k in STORE_ENV if os.environ.get(k)} \
        if is_object_store(raw) else {}


@functools.lru_cache(maxsize=32)
def _filesystem(root: str, env: tuple[str | None, ...] = ()) -> tuple[Any, str]:
    """pyarrow's filesystem for ``root``; ``env`` (the endpoint and key id it was made with)
    is part of the cache key, so a changed ``AWS_ENDPOINT_URL`` gets a new one."""
    import pyarrow.fs

    return pyarrow.fs.FileSystem.from_uri(root)


def filesystem(path: str | os.PathLike[str]) -> tuple[Any, str] | None:
    """(pyarrow filesystem, object path) of a stand-in path or a URI; None for a local path
    (or ``file://``). One filesystem per scheme, host and options, per process.

    Example:
        >>> filesystem("/data/x") is None
        True
    """
    raw = os.fspath(path)
    if not is_uri(raw):
        found = remote_of(raw)
        if found is None:
            return None
        raw = _join(*found)
    if raw.startswith("file://"):
        return None
    parts = urlsplit(raw)
    env = tuple(os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
                                            "AWS_ACCESS_KEY_ID", "AWS_PROFILE"))
    query = f"?{parts.query}" if parts.query else ""
    fs, base = _filesystem(f"{parts.scheme}://{parts.netloc}/{query}", env)
    return fs, (base.rstrip("/") + "/" + parts.path.strip("/")).strip("/") \
        if base.rstrip("/") else "/" + parts.path.strip("/")
