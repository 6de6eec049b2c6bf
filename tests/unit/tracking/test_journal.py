"""The tracking journal survives crashes mid-write and replays exactly what was not applied."""

from __future__ import annotations

from sweeps.storage.journal import Journal


def test_append_pending_and_mark_applied(tmp_path) -> None:
    j = Journal(tmp_path)
    for i in range(3):
        j.append({"op": "metrics", "i": i})
    assert [r["i"] for _, r in j.pending()] == [0, 1, 2]
    j.mark_applied(2)
    assert [(i, r["i"]) for i, r in j.pending()] == [(2, 2)]
    assert [(i, r["i"]) for i, r in Journal(tmp_path).pending()] == [(2, 2)]  # persisted


def test_torn_last_line_is_skipped_and_next_append_starts_fresh(tmp_path) -> None:
    j = Journal(tmp_path)
    j.append({"i": 0})
    with j.path.open("ab") as f:
        f.write(b'{"i": 1, "trunc')  # a crash mid-append
    assert [r["i"] for r in j.records()] == [0]
    j.append({"i": 2})
    assert [r["i"] for r in j.records()] == [0, 2]


def test_corrupt_applied_count_replays_everything(tmp_path) -> None:
    j = Journal(tmp_path)
    j.append({"i": 0})
    j.applied_path.write_text("garbage")
    assert len(j.pending()) == 1  # replay is safe: applying is idempotent


def test_sync_sends_what_the_sweep_could_not(tmp_path) -> None:
    """Records left in the journal (server was down at the end) reach MLflow via sync."""
    import json

    from mlflow import MlflowClient

    from sweeps.sync import sync

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    state = tmp_path / "sweep" / "tracking"
    j = Journal(state)
    state.mkdir(parents=True)  # the sweep made it (tracking_run); a Journal makes it on a write
    (state / "meta.json").write_text(json.dumps(
        {"uri": uri, "experiment_name": "later", "model_name": None}))
    j.append({"op": "sweep_start", "sweep_name": "s", "sweep_uid": "u", "params": {"a": 1},
              "config_yaml": "a: 1\n", "search_space": {}, "tags": {}, "ts": 1})
    j.append({"op": "trial_start", "trial": "t", "params": {"lr": 0.1}, "ts": 2})
    for step in (1, 2):
        j.append({"op": "metrics", "trial": "t", "step": step, "ts": 10 + step,
                  "values": {"acc": step / 4}})
    assert sync(tmp_path / "sweep", timeout_s=60) == 0
    assert sync(tmp_path / "sweep", timeout_s=60) == 0  # again: nothing is sent twice
    client = MlflowClient(uri)
    run_id = json.loads((state / "runs.json").read_text())["trials"]["t"]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "acc")] == [
        (1, 0.25), (2, 0.5)]
    assert j.pending() == []


def test_pending_after_many_applies_sees_exactly_the_rest(tmp_path) -> None:
    """Reading from the remembered offset gives what a full re-read gives, torn lines, a
    half-written last line and a rewound applied count included."""
    j = Journal(tmp_path)
    for i in range(5):
        j.append({"i": i})
    for index, _ in j.pending()[:3]:
        j.mark_applied(index + 1)
    with j.path.open("ab") as f:
        f.write(b'{"i": "torn')  # crash mid-append
    j.append({"i": 5})
    with j.path.open("ab") as f:
        f.write(b'{"i": 6')  # another thread is still writing this line
    assert [(i, r["i"]) for i, r in j.pending()] == [(3, 3), (4, 4), (5, 5)]
    with j.path.open("ab") as f:
        f.write(b"}\n")  # ... and now it is complete
    assert [(i, r["i"]) for i, r in j.pending()] == [(3, 3), (4, 4), (5, 5), (6, 6)]
    assert [(i, r["i"]) for i, r in Journal(tmp_path).pending()] == [(3, 3), (4, 4), (5, 5),
                                                                     (6, 6)]
    j.mark_applied(7)
    assert j.pending() == []
    j.applied_path.write_text("1")  # rewound by hand: everything after record 1 again
    assert [i for i, _ in j.pending()] == [1, 2, 3, 4, 5, 6]


def test_records_reads_what_was_appended_since_and_starts_over_on_a_new_file(tmp_path) -> None:
    """records() of a local journal reads only the bytes past its last read (the sweep driver
    reads the scheduler's log at every trial end); a line still being written is left for the
    next read; a replaced or cut file is read from the start."""
    journal = Journal(tmp_path, "log")
    journal.append({"n": 1})
    assert journal.records() == [{"n": 1}]
    journal.append({"n": 2})
    with journal.path.open("ab") as f:
        f.write(b'{"n": 3')  # another process mid-append
    assert Journal(tmp_path, "log").records() == [{"n": 1}, {"n": 2}]
    with journal.path.open("ab") as f:
        f.write(b"}\n")
    assert journal.records() == [{"n": 1}, {"n": 2}, {"n": 3}]
    journal.records().append({"n": "not kept"})  # a caller's list is its own
    assert journal.records() == [{"n": 1}, {"n": 2}, {"n": 3}]

    replacement = tmp_path / "other.jsonl"
    replacement.write_text('{"n": 7}\n')
    replacement.replace(journal.path)  # a new file (inode) at the same path
    assert journal.records() == [{"n": 7}]
    journal.path.write_text("")  # cut in place
    assert journal.records() == []
    journal.append({"n": 8})
    assert journal.records() == [{"n": 8}]


def test_records_of_a_journal_made_again_at_the_same_path_are_its_own(tmp_path) -> None:
    """A journal removed and written again (its inode may come back) or cut and regrown past
    the last read is read from its start, never as the old file's records plus new ones."""
    journal = Journal(tmp_path, "log")
    for n in range(3):
        journal.append({"old": n})
    assert len(journal.records()) == 3
    journal.path.unlink()
    journal.path.write_text("".join(f'{{"new": {n}}}\n' for n in range(5)))
    assert journal.records() == [{"new": n} for n in range(5)]
    with journal.path.open("r+") as f:  # cut in place, then regrown past the last read
        f.truncate(0)
        f.write("".join(f'{{"again": {n}}}\n' for n in range(6)))
    assert journal.records() == [{"again": n} for n in range(6)]
