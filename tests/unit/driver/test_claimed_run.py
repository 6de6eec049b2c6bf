"""run_sweep's claim when the sweep is refused before anything runs: the directories the claim
created go again, and nothing else (a sibling sweep under the same parent is never touched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps import compose, run_sweep
from sweeps.errors import SweepError
from sweeps.lease import claim_store, hold, read_holder, this_driver


def test_a_refused_fresh_sweep_leaves_no_directory_and_spares_its_siblings(tmp_path) -> None:
    outputs = tmp_path / "outputs"
    sibling = outputs / "running"
    with hold(claim_store(sibling), this_driver("running", 5, 45)):  # a live sweep beside it
        (sibling / "train").mkdir()
        (sibling / "train" / "ckpt.pt").write_bytes(b"x")
        cfg = compose("digits", [f"sweep.dir={outputs / 'new' / 'deep'}", "sweep.resume=must"])
        with pytest.raises(SweepError, match="sweep.resume"):
            run_sweep(cfg)
        assert sorted(p.name for p in outputs.iterdir()) == ["running"]
        assert (sibling / "train" / "ckpt.pt").read_bytes() == b"x"
        assert claim_store(sibling).generations() == [1]


def test_a_refused_sweep_in_a_new_tree_removes_the_whole_tree(tmp_path) -> None:
    cfg = compose("digits", [f"sweep.dir={tmp_path / 'a' / 'b' / 'c'}", "sweep.resume=must"])
    with pytest.raises(SweepError):
        run_sweep(cfg)
    assert list(tmp_path.iterdir()) == []


def test_a_refused_resume_of_an_existing_sweep_keeps_its_directory(tmp_path) -> None:
    sweep_dir: Path = tmp_path / "old"
    (sweep_dir / "notes").mkdir(parents=True)
    cfg = compose("digits", [f"sweep.dir={sweep_dir}", "sweep.resume=must"])
    with pytest.raises(SweepError):
        run_sweep(cfg)
    assert (sweep_dir / "notes").is_dir()
    store = claim_store(sweep_dir)
    assert store.generations() == []  # withdrawn: the claim reads as it did before


def test_a_refused_driver_leaves_the_claim_a_sigterm_stopped_for_the_next_start(tmp_path) -> None:
    sweep_dir = tmp_path / "s"
    store = claim_store(sweep_dir)
    with hold(store, this_driver("s", 5, 45)) as lease:
        lease.me.stopped_by = "SIGTERM"  # what Interrupt.on_sigterm writes
    with pytest.raises(SweepError):
        run_sweep(compose("digits", [f"sweep.dir={sweep_dir}", "sweep.resume=must"]))
    assert store.generations() == [1]
    assert read_holder(store.read(1)).stopped_by == "SIGTERM"


def test_a_plan_made_while_another_driver_held_the_sweep_is_never_reused(tmp_path,
                                                                        monkeypatch) -> None:
    from sweeps.driver.prepare import _free_claim
    from sweeps.driver.runner import _current

    sweep_dir = tmp_path / "s"
    assert _free_claim(sweep_dir) == 0  # never claimed
    store = claim_store(sweep_dir)
    with hold(store, this_driver("s", 5, 45)):
        assert _free_claim(sweep_dir) == -1  # held: a plan made now may go stale
    assert _free_claim(sweep_dir) == 1  # released
    store.create(2, b'{"host": "h", "pi')  # unreadable: not known to be free
    assert _free_claim(sweep_dir) == -1
    monkeypatch.setattr("sweeps.driver.runner.prepare", lambda cfg: "prepared again")
    stale = type("P", (), {"claim_gen": -1})()
    fresh = type("P", (), {"claim_gen": 1})()
    assert _current(fresh, None, 2) is fresh  # the claim taken is the next one: reused
    assert _current(stale, None, 2) == "prepared again"  # made while a driver held it
    assert _current(fresh, None, 3) == "prepared again"  # another driver claimed in between
    assert _current(None, None, 1) == "prepared again"
