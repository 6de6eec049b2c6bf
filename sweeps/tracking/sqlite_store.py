"""A local SQLite MLflow store created whole or not at all; one found half-created set aside.

    client, fresh = open_client("sqlite:////work/mlflow.db")   # MLflowSink, in the writer

MLflow creates a new SQLite store by running its migrations one by one in the file itself; a
kill in those seconds (measured: between 1.6 and 1.8 s after MLflow's import on this machine)
leaves a store MLflow can never open again ("duplicate column name: step", "table
_alembic_tmp_metrics already exists"). So a store that does not exist yet is created under a
temporary name beside it and linked into place once complete: a kill leaves no store, or a whole
one. A store MLflow cannot open that holds no runs is moved aside (``<name>.broken-<time>``,
never deleted) and created again; the sweep's journal then sends its records to the new one. One
that holds runs is left alone: ``StoreUnusable`` says why and what to do. ``fresh``: this call
made the store, so run ids a sweep recorded for it belong to another one and its whole journal
goes to the new store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

from sweeps.tracking.masking import mask_text

__all__ = ["open_client", "StoreUnusable", "runs_in"]

log = logging.getLogger(__name__)
STALE_S = 300  # a temporary store file this old is a killed creation's (one takes seconds)


class StoreUnusable(RuntimeError):
    """A store MLflow cannot open and sweeps must not touch: ``why`` and ``fix``, one line
    each; the writer stops retrying, the records wait in the journal."""

    def __init__(self, why: str, fix: str) -> None:
        super().__init__(f"{why}; {fix}")
        self.why, self.fix = why, fix


def open_client(uri: str) -> tuple[Any, bool]:
    """``(MlflowClient(uri), fresh)``, its SQLite file created whole first when missing."""
    from mlflow import MlflowClient

    db = _sqlite_file(uri)
    fresh = db is not None and not db.exists()
    if fresh:
        _close_engine(uri)  # connections MLflow pooled to a file of that name, now gone
        _create_whole(db)
    try:
        return MlflowClient(uri), fresh
    except Exception as exc:
        if db is None:
            raise
        said = mask_text(str(exc).strip().splitlines()[0][:200] if str(exc).strip()
                         else type(exc).__name__)
        if "locked" in said or fresh:
            raise  # another process writes it (or made it): the writer tries again
        runs = runs_in(db)
        if runs != 0:
            held = "cannot be read by SQLite" if runs is None else f"holds {runs} run(s)"
            fix = (f"back it up and run `mlflow db upgrade sqlite:///{db}`"
                   if "out-of-date database schema" in said else
                   f"move it aside (mv {db} {db}.broken) or set tracking.uri to another store")
            raise StoreUnusable(f"MLflow cannot open {db} ({said}); it {held}, so sweeps "
                                "leaves it as it is",
                                f"{fix}, then run the same command again") from exc
        _close_engine(uri)  # MLflow keeps the failed open's connections to the file
        aside = db.with_name(f"{db.name}.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        for part in ("", "-journal", "-wal", "-shm"):
            if Path(f"{db}{part}").exists():
                os.replace(f"{db}{part}", f"{aside}{part}")
        log.warning("MLflow store %s was left half-created by a killed start (%s) and holds "
                    "no runs: moved to %s and created again; this sweep's runs go to it from "
                    "its journal", db, said, aside.name)
        _create_whole(db)
        return MlflowClient(uri), True


def runs_in(db: Path) -> int | None:
    """How many runs the SQLite store ``db`` holds (0 when it has no runs table yet); None
    when SQLite cannot read it."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='runs'"
                            ).fetchone() is None:
                return 0
            return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    except sqlite3.Error:
        return None


def _sqlite_file(uri: str) -> Path | None:
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def _create_whole(db: Path) -> None:
    """MLflow's tables made in ``.<name>.creating-<id>``, then linked in as ``db`` (never over
    a store another process linked first). A killed creation's file, minutes old, goes."""
    from mlflow import MlflowClient

    for stale in db.parent.glob(f".{db.name}.creating-*"):
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_S:
                stale.unlink()
    # one name per creation: MLflow keeps a store object per URI for the process's life
    tmp = db.with_name(f".{db.name}.creating-{uuid.uuid4().hex}")
    db.parent.mkdir(parents=True, exist_ok=True)
    MlflowClient(f"sqlite:///{tmp}")
    _close_engine(f"sqlite:///{tmp}")  # every connection closed: no -journal left beside it
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


def _close_engine(uri: str) -> None:
    """Close the connections MLflow pooled for ``uri`` (its store's engine map, MLflow 3)."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    engine = getattr(SqlAlchemyStore, "_engine_map", {}).pop(uri, None)
    if engine is not None:
        engine.dispose()
