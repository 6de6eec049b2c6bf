"""The tracking journal survives crashes mid-write and replays exactly what was not applied."""

from __future__ import annotations

from sweeps.journal import Journal


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
