"""A local SQLite MLflow store created whole or not at all; one found half-created set aside.

    client, fresh = open_client("sqlite:////work/mlflow.db")   # MLflowSink, in the writer

Why and how (the temporary name, the lock, the ``.broken-<time>-<pid>`` file, when
``StoreUnusable`` leaves a store alone): docs/running.md#tracking-in-detail. ``fresh``: this call
made the store. MLflow's migrations take seconds of CPU (6 s on 2 cores), so the first store made
with an MLflow version is kept as a template (``~/.cache/sweeps/mlflow-<version>.db``, without its
Default experiment, which MLflow makes again with this store's artifact root on opening a copy)
and later ones are copies.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sweeps.tracking.masking import mask_text
from sweeps.tracking.setup import local_store

__all__ = ["open_client", "StoreUnusable", "contents"]

log = logging.getLogger(__name__)
STALE_S = 300  # a temporary store file this old is a killed creation's (one takes seconds)
HALF_MADE = re.compile(r"duplicate column|already exists|no such (table|column)|_alembic_tmp")


class StoreUnusable(RuntimeError):
    """A store MLflow cannot open and sweeps must not touch: ``why``; the records go "once
    <fix>". The writer stops retrying."""

    def __init__(self, why: str, fix: str) -> None:
        super().__init__(f"{why}; {fix}")
        self.why, self.fix = why, fix


def open_client(uri: str) -> tuple[Any, bool]:
    """``(MlflowClient(uri), fresh)``, its SQLite file created whole first when missing."""
    from mlflow import MlflowClient

    path, _, query = uri.partition("?")
    db = local_store(path) if path.startswith("sqlite:///") else None
    if db is None:
        return MlflowClient(uri), False
    db = db.expanduser()
    db.parent.mkdir(parents=True, exist_ok=True)
    with _locked(db):  # one creation or repair at a time, then a look
        fresh = not db.exists()
        if fresh:
            _close_engine(uri)  # connections MLflow pooled to a file of that name, now gone
            _create_whole(db, query)
        try:
            return MlflowClient(uri), fresh
        except Exception as exc:
            said = mask_text(str(exc).strip().splitlines()[0][:200] or type(exc).__name__)
            old = "out-of-date database schema" in said  # older, or newer, than this MLflow
            if fresh or not (old or HALF_MADE.search(said)):
                raise  # locked, an I/O error, ...: the writer tries again
            held = contents(db)
            if held is None:
                raise
            if held or old:
                fix = (f"it is upgraded (back it up, then `mlflow db upgrade sqlite:///{db}`) "
                       "or opened with the MLflow version that made it" if old else
                       f"it is moved aside (mv {db} {db}.broken) or tracking.uri names another "
                       "store")
                raise StoreUnusable(f"MLflow cannot open {db} ({said}); it holds {held} "
                                    "record(s) of its own, so sweeps leaves it as it is",
                                    fix) from exc
            _close_engine(uri)  # MLflow keeps the failed open's connections to the file
            aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}-"
                                 f"{os.getpid()}")
            for part in ("-journal", "-wal", "-shm", ""):  # the database last: a hot journal
                if Path(f"{db}{part}").exists():  # never stays beside the new store
                    os.replace(f"{db}{part}", f"{aside}{part}")
            log.warning("MLflow store %s was left half-created by a killed start (%s) and "
                        "holds nothing: moved to %s and created again; this sweep's runs go "
                        "to it from its journal", db, said, aside.name)
            _create_whole(db, query)
            return MlflowClient(uri), True


@contextlib.contextmanager
def _locked(db: Path) -> Iterator[None]:
    """``.<name>.lock`` beside ``db`` held, read-only; none where none can be had."""
    try:
        fd = os.open(db.with_name(f".{db.name}.lock"), os.O_RDONLY | os.O_CREAT, 0o666)
    except OSError:
        fd = None
    try:
        with contextlib.suppress(OSError, TypeError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)


def contents(db: Path) -> int | None:
    """Runs, experiments but the default and registered models in ``db``; None: unreadable."""
    try:
        with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5) as conn:
            tables = {row[0] for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'")}
            return sum(conn.execute(f"SELECT COUNT(*) FROM {table}{where}").fetchone()[0]
                       for table, where in (("runs", ""), ("registered_models", ""),
                                            ("experiments", " WHERE experiment_id != 0"))
                       if table in tables)
    except sqlite3.Error:
        return None


def _create_whole(db: Path, query: str) -> None:
    """MLflow's tables made in ``.<name>.creating-<id>``, then linked in as ``db`` (never over
    a store another process linked first). A killed creation's file, minutes old, goes."""
    from mlflow import MlflowClient
    from mlflow.version import VERSION

    for stale in db.parent.glob(f".{db.name}.creating-*"):
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_S:
                stale.unlink()
    # one name per creation: MLflow keeps a store object per URI for the process's life
    tmp = db.with_name(f".{db.name}.creating-{uuid.uuid4().hex}")
    tmp_uri = f"sqlite:///{tmp}" + (f"?{query}" if query else "")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    template = Path(cache, "sweeps", f"mlflow-{VERSION}.db")
    if not _copied(template, tmp, tmp_uri):
        MlflowClient(tmp_uri)  # MLflow's migrations
        _close_engine(tmp_uri)  # every connection closed: no -journal left beside it
        _keep_template(tmp, template)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    try:
        os.link(tmp, db)
    except FileExistsError:
        pass  # another process created it meanwhile: its store is used
    except OSError:  # a file system without hard links
        if not db.exists():
            os.replace(tmp, db)
    finally:
        tmp.unlink(missing_ok=True)


def _copied(template: Path, tmp: Path, tmp_uri: str) -> bool:
    """Whether ``tmp`` is now a copy of ``template`` that MLflow opens (and has given its
    Default experiment); a template that cannot be read or opened goes, and False."""
    from mlflow import MlflowClient

    if not template.is_file():
        return False
    try:
        shutil.copyfile(template, tmp)
        MlflowClient(tmp_uri)
        return True
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with it, MLflow makes the store
        log.warning("MLflow store template %s not used (%s); made anew", template, exc)
        for path in (template, tmp):
            with contextlib.suppress(OSError):
                path.unlink()
        return False
    finally:
        _close_engine(tmp_uri)  # every connection closed: no -journal left beside it


def _keep_template(store: Path, template: Path) -> None:
    """A copy of the new ``store`` as ``template``, its Default experiment taken out (a cache:
    when it cannot be kept, the next new store takes its seconds again). A killed keeper's
    staging copy, minutes old, goes."""
    staging = template.with_name(f".{template.name}.{uuid.uuid4().hex}")
    try:
        for stale in template.parent.glob(f".{template.name}.*"):
            if time.time() - stale.stat().st_mtime > STALE_S:
                stale.unlink()
        template.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store, staging)
        with contextlib.closing(sqlite3.connect(staging)) as db, db:
            db.execute("DELETE FROM experiment_tags WHERE experiment_id = 0")
            db.execute("DELETE FROM experiments WHERE experiment_id = 0")
        os.replace(staging, template)
    except (OSError, sqlite3.Error) as exc:
        log.debug("MLflow store template not kept: %s", exc)
    finally:
        with contextlib.suppress(OSError):
            staging.unlink()


def _close_engine(uri: str) -> None:
    """Close the connections MLflow's tracking and registry stores pooled for ``uri``."""
    from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore as Registry
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    for store in (SqlAlchemyStore, Registry):
        engine = getattr(store, "_engine_map", {}).pop(uri, None)
        if engine is not None:
            engine.dispose()
