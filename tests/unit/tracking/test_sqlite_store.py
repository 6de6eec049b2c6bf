"""A SQLite MLflow store is created whole or not at all, and one left half-created by a killed
start is set aside and rebuilt when it holds no runs (real MLflow, real SQLite, no Ray).

The half-created store is made the way a kill makes it (issue 50's first kill): every table
there, MLflow's first migration (``metrics.step``) applied, its revision not recorded. MLflow's
own open then fails on "duplicate column name: step" every time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeps.storage.journal import Journal
from sweeps.tracking.sqlite_store import StoreUnusable, _close_engine, contents, open_client
from sweeps.tracking.writer import TrackingWriter


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> dict[int, bytes]:
    """Stores as a kill mid-migration leaves them, holding 0 or 2 runs: their bytes (made
    once: MLflow takes seconds to make a store)."""
    made: dict[int, bytes] = {}
    for runs in (0, 2):
        db = tmp_path_factory.mktemp("broken") / "mlflow.db"
        client = MlflowClient(f"sqlite:///{db}")
        for i in range(runs):
            client.create_run("0", run_name=f"r{i}")
        client._tracking_client.store.engine.dispose()
        with sqlite3.connect(db) as conn:  # the migrations' revision was never recorded
            conn.execute("DELETE FROM alembic_version")
            conn.execute("DROP TABLE model_versions")  # a later step's table: not all there
        made[runs] = db.read_bytes()
    return made


def half_created(db: Path, template: bytes) -> bytes:
    """``template`` as the store ``db``, which MLflow's own open refuses; its bytes."""
    db.write_bytes(template)
    with pytest.raises(Exception, match="duplicate column name: step"):
        MlflowClient(f"sqlite:///{db}")  # what every later start of MLflow hits
    return template


def _tables(db: Path) -> tuple[list[str], list[tuple]]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return (sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master")),
                conn.execute("SELECT * FROM alembic_version").fetchall())


def test_the_first_store_is_kept_as_a_template_and_its_copies_are_as_mlflow_makes_them(
        tmp_path, monkeypatch) -> None:
    """The first store made with this MLflow (its migrations run) is kept without its Default
    experiment; a store made later is a copy, to which MLflow gives the Default experiment it
    gives a store it makes there (its artifact root, from where the sweep runs)."""
    from mlflow.version import VERSION

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    first, fresh = open_client(f"sqlite:///{tmp_path / 'first.db'}")
    template = tmp_path / "cache" / "sweeps" / f"mlflow-{VERSION}.db"
    assert fresh and [p.name for p in template.parent.iterdir()] == [template.name]
    with contextlib.closing(sqlite3.connect(template)) as conn:
        assert conn.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    copy, fresh = open_client(f"sqlite:///{tmp_path / 'copy.db'}")
    assert fresh and _tables(tmp_path / "copy.db") == _tables(tmp_path / "first.db")
    [default] = copy.search_experiments()
    assert (default.experiment_id, default.name, default.artifact_location) == (
        "0", "Default", str(tmp_path / "elsewhere" / "mlruns" / "0"))
    assert first.get_experiment("0").artifact_location == str(tmp_path / "mlruns" / "0")
    run = copy.create_run(copy.create_experiment("sweep"))
    copy.log_metric(run.info.run_id, "val_acc", 0.5, step=1)
    assert copy.get_metric_history(run.info.run_id, "val_acc")[0].value == 0.5


def test_a_cache_that_cannot_be_written_costs_time_only(tmp_path, monkeypatch) -> None:
    (tmp_path / "cache").write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    client, fresh = open_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert fresh and client.search_experiments()[0].name == "Default"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mlflow.db.lock", "cache",
                                                          "mlflow.db"]


def test_a_new_store_is_created_whole_with_nothing_left_beside_it(tmp_path) -> None:
    db = tmp_path / "sub" / "mlflow.db"
    client, fresh = open_client(f"sqlite:///{db}")
    assert client.search_experiments()[0].name == "Default"
    # no temporary file, no -journal; the lock that orders creations stays
    assert sorted(p.name for p in db.parent.iterdir()) == [".mlflow.db.lock", "mlflow.db"]
    assert contents(db) == 0 and fresh
    assert open_client(f"sqlite:///{db}")[1] is False


@pytest.mark.slow  # a Python start with MLflow's import per kill
def test_a_killed_creation_leaves_no_store_and_its_temp_file_goes(tmp_path) -> None:
    """kill -9 during ``open_client``'s creation, at moments across it: afterwards either no
    store or one MLflow opens; the next open works (a killed creation's temporary file stays
    until it is minutes old)."""
    db = tmp_path / "stores" / "mlflow.db"
    db.parent.mkdir()
    code = f"from sweeps.tracking.sqlite_store import open_client; open_client('sqlite:///{db}')"
    # MLflow's migrations run (no template kept yet): the creation this guards
    cache = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "nothing-kept")}
    (tmp_path / "nothing-kept").mkdir()
    (tmp_path / "nothing-kept" / "sweeps").write_text("not a directory: nothing is kept")
    for delay in (1.5, 1.8, 2.1):
        for p in db.parent.iterdir():
            p.unlink()
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.DEVNULL,
                                env=cache)
        time.sleep(delay)
        proc.kill()
        proc.wait()
        if db.exists():
            MlflowClient(f"sqlite:///{db}").search_experiments()  # whole: MLflow opens it
        open_client(f"sqlite:///{db}")[0].search_experiments()
        others = [p.name for p in db.parent.iterdir()
                  if p.name not in (db.name, ".mlflow.db.lock")]
        assert all(n.startswith(".mlflow.db.creating-") for n in others), (delay, others)


def test_a_killed_creations_temp_file_goes_a_running_ones_stays(tmp_path) -> None:
    stale, running = tmp_path / ".mlflow.db.creating-old", tmp_path / ".mlflow.db.creating-new"
    for path in (stale, running):
        path.write_bytes(b"half")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    open_client(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert not stale.exists() and running.exists()


def test_a_half_created_store_without_runs_is_moved_aside_and_rebuilt(tmp_path, caplog,
                                                                     broken) -> None:
    db = tmp_path / "mlflow.db"
    broken = half_created(db, broken[0])
    with caplog.at_level(logging.WARNING, "sweeps.tracking.sqlite_store"):
        client, fresh = open_client(f"sqlite:///{db}")
    client.create_run("0")
    assert fresh
    (aside,) = tmp_path.glob("mlflow.db.broken-*")
    assert aside.read_bytes() == broken  # moved, never deleted
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mlflow.db.lock", "mlflow.db",
                                                          aside.name]
    assert contents(db) == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert "half-created" in line and "duplicate column name: step" in line
    assert aside.name in line


def test_a_half_created_store_with_runs_is_left_alone_and_the_error_says_what_to_do(
        tmp_path, broken) -> None:
    db = tmp_path / "mlflow.db"
    broken = half_created(db, broken[2])
    with pytest.raises(StoreUnusable) as info:
        open_client(f"sqlite:///{db}")
    assert db.read_bytes() == broken and sorted(tmp_path.iterdir())[-1:] == [db]
    assert not list(tmp_path.glob("*.broken*"))
    assert "holds 2 record(s) of its own" in info.value.why
    assert "duplicate column name: step" in info.value.why
    assert info.value.fix == (f"it is moved aside (mv {db} {db}.broken) or tracking.uri names "
                              "another store")


def test_the_writer_stops_retrying_an_unusable_store_and_says_why(tmp_path, broken) -> None:
    db = tmp_path / "mlflow.db"
    half_created(db, broken[2])
    journal = Journal(tmp_path / "tracking")
    journal.append({"op": "sweep_start"})

    def sink():
        open_client(f"sqlite:///{db}")

    writer = TrackingWriter(journal, sink)
    writer._idle.wait(30)  # its first try
    left = writer.flush(timeout_s=600)  # returns at once: nothing will change
    writer.stop()
    assert left == 1
    assert writer.unusable and "holds 2 record(s)" in writer.why
    assert writer.fix.startswith("it is moved aside")
    assert os.path.exists(db)


def test_a_store_made_anew_gets_the_whole_journal_of_a_sweep_sent_before(tmp_path) -> None:
    """The store a sweep's records went to is gone (set aside above, or by hand): the same
    sweep's next start sends every record again, to the new store, with the same runs."""
    from sweeps.tracking.callback import MLflowTracking, TrackingSettings
    from tests.unit.tracking.test_tracking_abort import TrialRecord

    db = tmp_path / "mlflow.db"
    settings = TrackingSettings(uri=f"sqlite:///{db}", experiment_name="again", model_name=None,
                                state_dir=str(tmp_path / "t"), max_epochs=3, scheduler="asha",
                                flush_timeout_s=60)

    def runs() -> dict[str, str]:
        client = MlflowClient(f"sqlite:///{db}")
        found = client.search_runs([client.get_experiment_by_name("again").experiment_id])
        return {r.data.tags.get("sweeps.trial_id", "parent"): r.info.status for r in found}

    first = MLflowTracking(settings)
    first.start_sweep("s", "uid", {"a": 1}, {}, {})
    first.on_trial_start(0, [], TrialRecord("t1", {"lr": 0.1}))
    first.on_trial_result(0, [], TrialRecord("t1"), {"epoch": 1, "val_acc": 0.5})
    first.on_trial_complete(0, [], TrialRecord("t1", last_result={"epoch": 1}))
    assert first.finish(None, None, status="FINISHED") == 0
    sent = runs()
    db.rename(tmp_path / "elsewhere.db")
    resumed = MLflowTracking(settings)
    resumed.start_sweep("s", "uid", {"a": 1}, {}, {}, 2)
    assert resumed.finish(None, None, status="FINISHED") == 0
    assert runs() == sent == {"parent": "FINISHED", "t1": "FINISHED"}


def test_a_store_that_fails_for_another_reason_is_never_moved(tmp_path) -> None:
    """Not a half-made store (here: not a database at all; a locked one, an I/O error): the
    error goes to the caller, who tries again, and the file stays."""
    db = tmp_path / "mlflow.db"
    db.write_bytes(b"not a database, " * 100)
    with pytest.raises(Exception, match="not a database"):
        open_client(f"sqlite:///{db}")
    assert db.read_bytes() == b"not a database, " * 100 and not list(tmp_path.glob("*.broken*"))


@pytest.mark.parametrize("revision", ["451aebb31d03", "ffffffffffff"])  # older; newer
def test_a_store_of_another_mlflow_version_is_left_with_what_to_do(tmp_path, revision) -> None:
    db = tmp_path / "mlflow.db"
    made = tmp_path / "made.db"
    MlflowClient(f"sqlite:///{made}")._tracking_client.store.engine.dispose()
    with sqlite3.connect(made) as conn:  # whole, recorded at another revision
        conn.execute("UPDATE alembic_version SET version_num = ?", (revision,))
    made.rename(db)
    before = db.read_bytes()
    with pytest.raises(StoreUnusable) as info:
        open_client(f"sqlite:///{db}")
    assert "out-of-date database schema" in info.value.why and db.read_bytes() == before
    assert info.value.fix == (f"it is upgraded (back it up, then `mlflow db upgrade "
                              f"sqlite:///{db}`) or opened with the MLflow version that made it")


def test_a_store_replaced_by_another_tool_gets_the_whole_journal(tmp_path) -> None:
    """The sweep's store was moved aside by hand and MLflow made a new, empty one in its place
    (``mlflow ui`` does): the sweep's recorded ids are not in it, so its next start sends the
    whole journal there."""
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry

    from sweeps.tracking.callback import MLflowTracking, TrackingSettings
    from tests.unit.tracking.test_tracking_abort import TrialRecord

    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    settings = TrackingSettings(uri=uri, experiment_name="again", model_name=None,
                                state_dir=str(tmp_path / "t"), max_epochs=3, scheduler="asha",
                                flush_timeout_s=60)
    first = MLflowTracking(settings)
    first.start_sweep("s", "uid", {"a": 1}, {}, {})
    first.on_trial_start(0, [], TrialRecord("t1", {"lr": 0.1}))
    assert first.finish(None, None, status="FINISHED") == 0
    db.rename(tmp_path / "elsewhere.db")
    made_by_mlflow = f"from mlflow import MlflowClient; MlflowClient('{uri}')"
    subprocess.run([sys.executable, "-c", made_by_mlflow], check=True, capture_output=True)
    _close_engine(uri)  # this process's MLflow forgets the old file, as a new process would
    _tracking_store_registry._get_store_with_resolved_uri.cache_clear()
    resumed = MLflowTracking(settings)
    resumed.start_sweep("s", "uid", {"a": 1}, {}, {}, 2)
    assert resumed.finish(None, None, status="FINISHED") == 0
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("again").experiment_id])
    assert sorted(r.data.tags.get("sweeps.trial_id", "parent") for r in runs) == ["parent", "t1"]
