"""Placement-group ledger and reaper (``sweeps.placement``) against an in-memory key-value store.

The adapter seam (``sweeps._ray.kv`` and ``sweeps._ray.placement``'s ``remove_group`` /
``actor_state``) is replaced by fakes that keep group and actor states, so no Ray instance is
started. Note: ``ray.get_runtime_context()`` starts a local Ray instance when none runs, so it
is faked too.
"""

from __future__ import annotations

import pickle
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from sweeps._ray import kv
from sweeps.placement import ledger as ledger_mod
from sweeps.placement import reaper as reaper_mod
from sweeps.placement.ledger import PlacementGroupLedger, TrialStoppedError, kv_key
from sweeps.placement.reaper import PlacementGroupReaper, live_controllers, release_all


class FakeRay:
    """Ray's key-value store, placement groups and actors, in memory."""

    def __init__(self) -> None:
        self.store: dict[str, str] = {}
        self.groups: dict[str, str] = {}  # pg hex -> state
        self.actors: dict[str, str] = {}  # actor id -> state ("UNREADABLE": state read fails)
        self.removed: list[str] = []  # every remove_group call, in order
        self.on_create: list[Any] = []  # callbacks given to record_groups_on_creation

    def put(self, key: str, value: str | bytes) -> None:
        self.store[key] = value.decode() if isinstance(value, bytes) else value

    def get(self, key: str) -> str | None:
        return self.store.get(key)

    def keys(self, prefix: str) -> list[str]:
        return [k for k in list(self.store) if k.startswith(prefix)]

    def delete_prefix(self, prefix: str) -> None:
        for key in self.keys(prefix):
            del self.store[key]

    def remove_group(self, pg_hex: str) -> bool:  # as sweeps._ray.placement.remove_group
        self.removed.append(pg_hex)
        if self.groups.get(pg_hex) in (None, "REMOVED"):
            return False
        self.groups[pg_hex] = "REMOVED"
        return True

    def actor_state(self, actor_id: str) -> str | None:
        if self.actors.get(actor_id) == "UNREADABLE":
            raise RuntimeError("GCS unreachable")
        return self.actors.get(actor_id)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeRay:
    import ray

    fake = FakeRay()
    for name in ("put", "get", "keys", "delete_prefix"):
        monkeypatch.setattr(kv, name, getattr(fake, name))
    monkeypatch.setattr(ledger_mod, "remove_group", fake.remove_group)
    monkeypatch.setattr(reaper_mod, "remove_group", fake.remove_group)
    monkeypatch.setattr(reaper_mod, "actor_state", fake.actor_state)
    monkeypatch.setattr(ledger_mod, "record_groups_on_creation", fake.on_create.append)
    monkeypatch.setattr(ray, "get_runtime_context",
                        lambda: SimpleNamespace(get_actor_id=lambda: "actor-1"))
    yield fake
    assert not ray.is_initialized(), "a unit test started Ray"


def _group(pg_hex: str) -> SimpleNamespace:
    """A placement group handle: what ``record`` reads is ``pg.id.hex()``."""
    return SimpleNamespace(id=SimpleNamespace(hex=lambda: pg_hex))


def _trial(trial_id: str) -> SimpleNamespace:
    return SimpleNamespace(trial_id=trial_id)


def _until(condition: Any, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def test_kv_key_names_kind_sweep_and_trial() -> None:
    assert kv_key("s", "t") == "pg/s/t"
    assert kv_key("s", "t", "stop") == "stop/s/t"


def test_record_stores_the_group_hex_under_the_trial_key(fake: FakeRay) -> None:
    PlacementGroupLedger("s", "t1").record(_group("ab12"))
    PlacementGroupLedger("s", "t2").record(_group("cd34"))
    assert fake.store == {"pg/s/t1": "ab12", "pg/s/t2": "cd34"}


def test_before_start_registers_the_controller_and_hooks_group_creation(fake: FakeRay) -> None:
    ledger = PlacementGroupLedger("s", "t1")
    ledger.before_worker_group_start(None)
    assert fake.store == {"ctl/s/t1": "actor-1"}
    assert fake.on_create == [ledger.record]
    assert fake.removed == []  # nothing recorded before: nothing to release


def test_before_start_refuses_a_trial_the_sweep_stopped(fake: FakeRay) -> None:
    fake.store.update({"stop/s/t1": "1", "pg/s/t1": "old"})
    fake.groups["old"] = "CREATED"
    with pytest.raises(TrialStoppedError, match="t1 was ended by the sweep"):
        PlacementGroupLedger("s", "t1").before_worker_group_start(None)
    # Not registered: a refused controller creates no group, so the sweep's end has nothing to
    # wait for; and one refused after that end (an orphan) must leave no record behind.
    assert "ctl/s/t1" not in fake.store
    PlacementGroupLedger("s", "t2").before_worker_group_start(None)  # other trials go on


def test_before_start_releases_the_previous_attempts_group(fake: FakeRay) -> None:
    fake.store["pg/s/t1"] = "old"
    fake.groups.update({"old": "CREATED", "other": "CREATED"})
    PlacementGroupLedger("s", "t1").before_worker_group_start(None)
    assert fake.removed == ["old"]
    assert fake.groups == {"old": "REMOVED", "other": "CREATED"}


def test_after_start_records_the_started_groups_placement_group(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ledger_mod, "group_of", lambda worker_group: worker_group.pg)
    PlacementGroupLedger("s", "t1").after_worker_group_start(SimpleNamespace(pg=_group("ef56")))
    assert fake.store == {"pg/s/t1": "ef56"}


@pytest.mark.parametrize("event", ["on_trial_complete", "on_trial_error"])
def test_an_ended_trial_is_flagged_and_its_group_released(fake: FakeRay, event: str) -> None:
    fake.store["pg/s/t1"] = "g1"
    fake.groups.update({"g1": "CREATED", "g2": "CREATED"})
    reaper = PlacementGroupReaper("s", watch_s=2.0, poll_s=0.01)
    getattr(reaper, event)(3, [], _trial("t1"))
    assert fake.store["stop/s/t1"] == "1"
    assert _until(lambda: fake.groups["g1"] == "REMOVED")
    assert _until(lambda: "t1" in reaper.released)
    assert reaper.release_polls == {"t1": 1}  # the first poll after the end released it
    # A restart that slipped in before the flag was read: the watcher releases its group too.
    fake.store["pg/s/t1"] = "g2"
    assert _until(lambda: fake.groups["g2"] == "REMOVED")
    thread = reaper._thread
    reaper.join(timeout=1.0)
    assert not thread.is_alive() and reaper._thread is None


def test_the_watcher_gives_up_after_watch_s(fake: FakeRay, monkeypatch: pytest.MonkeyPatch
                                            ) -> None:
    listings: list[str] = []
    monkeypatch.setattr(kv, "keys", lambda prefix: listings.append(prefix) or fake.keys(prefix))
    reaper = PlacementGroupReaper("s", watch_s=0.05, poll_s=0.01)
    reaper.on_trial_complete(0, [], _trial("t1"))
    assert _until(lambda: reaper.watching() == [])
    # Idle: the watcher waits for the next end, with no timeout (it lists nothing more).
    assert _until(lambda: not reaper._wake.is_set() and reaper._thread is not None)
    polled = len(listings)
    fake.store["pg/s/t1"] = "late"
    fake.groups["late"] = "CREATED"
    reaper.on_trial_complete(0, [], _trial("t2"))  # a later end wakes it: t1 is not read again
    assert _until(lambda: len(listings) > polled)
    reaper.join(timeout=1.0)  # that poll, and any after it, has ended
    assert fake.groups["late"] == "CREATED" and reaper.released == {}


def test_one_watcher_serves_every_ended_trial_and_asks_once_per_group(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def spy(name: str) -> Any:
        def call(key: str) -> Any:
            calls.append(f"{name} {key}")
            return getattr(fake, name)(key)
        return call

    for name in ("get", "keys"):
        monkeypatch.setattr(kv, name, spy(name))
    fake.store.update({"pg/s/t0": "g0", "pg/s/t1": "g1"})
    fake.groups.update({"g0": "CREATED", "g1": "CREATED"})
    before = threading.active_count()
    reaper = PlacementGroupReaper("s", watch_s=5.0, poll_s=0.01)
    for i in range(20):  # trials without a recorded group (inline ranks) cost no read
        reaper.on_trial_complete(0, [], _trial(f"t{i}"))
    assert threading.active_count() == before + 1
    assert _until(lambda: fake.groups["g0"] == fake.groups["g1"] == "REMOVED")
    assert _until(lambda: calls.count("keys pg/s/") >= 10)  # ten polls or more since
    snapshot = list(calls)
    assert fake.removed == ["g0", "g1"]  # a removed group is not asked about again
    assert {c for c in snapshot if c.startswith("get")} == {"get pg/s/t0", "get pg/s/t1"}
    polls = snapshot.count("keys pg/s/")
    assert len(snapshot) <= 3 * polls  # per poll, a listing and at most the two recorded keys
    assert sorted(reaper.released) == ["t0", "t1"] and len(reaper.watching()) == 20
    thread = reaper._thread
    reaper.join(timeout=1.0)
    assert not thread.is_alive()


def test_a_failed_listing_is_tried_again_while_ray_is_up(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    failures = [RuntimeError("GCS busy")] * 3

    def keys(prefix: str) -> list[str]:
        if failures:
            raise failures.pop()
        return fake.keys(prefix)

    monkeypatch.setattr(kv, "keys", keys)
    monkeypatch.setattr(reaper_mod, "_ray_up", lambda: True)
    fake.store["pg/s/t1"] = "g1"
    fake.groups["g1"] = "CREATED"
    reaper = PlacementGroupReaper("s", watch_s=5.0, poll_s=0.01)
    reaper.on_trial_complete(0, [], _trial("t1"))
    assert _until(lambda: fake.groups["g1"] == "REMOVED") and failures == []
    reaper.join(timeout=1.0)


def test_the_watcher_ends_when_ray_is_gone_and_a_later_end_starts_another(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    up = [False]

    def keys(prefix: str) -> list[str]:
        if not up[0]:
            raise RuntimeError("not connected")
        return fake.keys(prefix)

    monkeypatch.setattr(kv, "keys", keys)
    monkeypatch.setattr(reaper_mod, "_ray_up", lambda: up[0])
    reaper = PlacementGroupReaper("s", watch_s=5.0, poll_s=0.01)
    reaper.on_trial_complete(0, [], _trial("t1"))
    assert _until(lambda: reaper._thread is None)
    up[0] = True
    fake.store["pg/s/t2"] = "g2"
    fake.groups["g2"] = "CREATED"
    reaper.on_trial_complete(0, [], _trial("t2"))
    assert _until(lambda: fake.groups["g2"] == "REMOVED")
    reaper.join(timeout=1.0)


def test_trials_ended_just_before_join_are_polled_once(fake: FakeRay) -> None:
    reaper = PlacementGroupReaper("s", watch_s=5.0, poll_s=10.0)
    reaper.on_trial_complete(0, [], _trial("t0"))
    assert _until(lambda: not reaper._wake.is_set())  # the watcher polled, now sleeps 10 s
    fake.store["pg/s/t1"] = "g1"
    fake.groups["g1"] = "CREATED"
    with reaper._lock:  # t1 ends while the watcher sleeps; the sweep ends at once after
        reaper._watched["t1"] = time.monotonic()
    reaper.join(timeout=1.0)
    assert fake.groups["g1"] == "REMOVED" and "t1" in reaper.released



def test_a_retried_trial_loses_its_old_group_but_gets_no_stop_flag(fake: FakeRay) -> None:
    fake.store["pg/s/t1"] = "g1"
    fake.groups["g1"] = "CREATED"
    reaper = PlacementGroupReaper("s", watch_s=1.0, poll_s=0.01)
    reaper.on_trial_recover(0, [], _trial("t1"))
    assert fake.groups["g1"] == "REMOVED"
    assert "stop/s/t1" not in fake.store
    assert reaper._thread is None and reaper.released == {}
    reaper.on_trial_recover(0, [], _trial("t2"))  # nothing recorded: no call, no error
    assert fake.removed == ["g1"]


def _counting_states(fake: FakeRay, monkeypatch: pytest.MonkeyPatch,
                     then: dict[int, tuple[str, str]] | None = None) -> list[str]:
    """Every actor-state read of the reaper, in order; ``then`` {n: (actor, state)} sets an
    actor's state right after the n-th read."""
    reads: list[str] = []

    def state(actor_id: str) -> str | None:
        reads.append(actor_id)
        answer = fake.actor_state(actor_id)
        if then and len(reads) in then:
            fake.actors.__setitem__(*then[len(reads)])
        return answer

    monkeypatch.setattr(reaper_mod, "actor_state", state)
    return reads


def test_join_returns_at_once_when_no_controller_is_alive(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.store.update({"ctl/s/t1": "a1", "ctl/s/t2": "", "ctl/other/t3": "a3"})
    fake.actors.update({"a1": "DEAD", "a3": "ALIVE"})  # another sweep's controller: ignored
    reads = _counting_states(fake, monkeypatch)
    reaper = PlacementGroupReaper("s", watch_s=5.0, poll_s=0.01)
    reaper.join()
    assert reads == ["a1"]  # one look at the sweep's one controller, no wait
    assert reaper._done.is_set()


def test_join_waits_bounded_while_a_controller_is_alive(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.store["ctl/s/t1"] = "a1"
    fake.actors["a1"] = "ALIVE"
    reads = _counting_states(fake, monkeypatch)
    reaper = PlacementGroupReaper("s", watch_s=5.0, poll_s=0.01)
    start = time.monotonic()
    reaper.join(timeout=0.2)  # returns although the controller lives on
    assert time.monotonic() - start >= 0.2  # waited its whole bound (a lower bound: no race)
    assert len(reads) >= 2 and set(reads) == {"a1"} and fake.actors["a1"] == "ALIVE"


def test_join_returns_once_the_last_controller_dies(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.store["ctl/s/t1"] = "a1"
    fake.actors["a1"] = "ALIVE"
    reads = _counting_states(fake, monkeypatch, then={3: ("a1", "DEAD")})
    PlacementGroupReaper("s", watch_s=5.0, poll_s=0.01).join()
    assert reads == ["a1"] * 4  # alive three times, then dead: returns at that read


def test_a_controller_whose_state_cannot_be_read_counts_as_alive(fake: FakeRay) -> None:
    fake.store.update({"ctl/s/t1": "a1", "ctl/s/t2": "a2", "ctl/s/t3": "a3", "ctl/s/t4": ""})
    fake.actors.update({"a1": "UNREADABLE", "a2": "DEAD", "a3": "RESTARTING"})
    assert sorted(live_controllers("s")) == ["ctl/s/t1", "ctl/s/t3"]


@pytest.mark.parametrize("keep_stop_flags", [False, True])
def test_release_all_removes_recorded_groups_and_clears_keys(
        fake: FakeRay, keep_stop_flags: bool) -> None:
    fake.store.update({
        "pg/s/t1": "g1", "pg/s/t2": "g2", "pg/s/t3": "g3", "ctl/s/t1": "a1",
        "stop/s/t1": "1", "stop/s/t2": "1",
        "pg/other/t9": "g9", "ctl/other/t9": "a9", "stop/other/t9": "1"})
    fake.groups.update({"g1": "CREATED", "g2": "REMOVED", "g3": "PENDING", "g9": "CREATED"})
    assert release_all("s", keep_stop_flags=keep_stop_flags) == 2  # g2 was already gone
    assert sorted(fake.removed) == ["g1", "g2", "g3"]
    assert fake.groups == {"g1": "REMOVED", "g2": "REMOVED", "g3": "REMOVED", "g9": "CREATED"}
    kept = {"stop/s/t1", "stop/s/t2"} if keep_stop_flags else set()
    assert set(fake.store) == kept | {"pg/other/t9", "ctl/other/t9", "stop/other/t9"}


def test_release_all_goes_on_past_a_group_that_fails_to_remove(
        fake: FakeRay, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.store.update({"pg/s/t1": "bad", "pg/s/t2": "g2"})
    fake.groups["g2"] = "CREATED"

    def remove(pg_hex: str) -> bool:
        if pg_hex == "bad":
            raise RuntimeError("removed by Train meanwhile")
        return fake.remove_group(pg_hex)

    monkeypatch.setattr(reaper_mod, "remove_group", remove)
    assert release_all("s") == 1
    assert fake.groups["g2"] == "REMOVED" and fake.store == {}


def test_a_pickled_reaper_comes_back_with_a_fresh_event_and_no_threads(fake: FakeRay) -> None:
    fake.store["pg/s/t1"] = "g1"
    fake.groups["g1"] = "CREATED"
    reaper = PlacementGroupReaper("s", watch_s=1.0, poll_s=0.01)
    reaper.on_trial_complete(0, [], _trial("t1"))
    assert _until(lambda: "t1" in reaper.released)
    reaper.join(timeout=1.0)
    assert reaper._done.is_set()
    restored = pickle.loads(pickle.dumps(reaper))
    assert (restored.sweep_id, restored.watch_s, restored.poll_s) == ("s", 1.0, 0.01)
    assert restored.released == reaper.released
    assert restored._thread is None and restored.watching() == []
    assert isinstance(restored._done, threading.Event) and not restored._done.is_set()
    assert reaper._done.is_set() and reaper.released  # the original is left as it was
    restored.on_trial_complete(0, [], _trial("t2"))  # a restored reaper watches anew
    assert restored.watching() == ["t2"] and restored._thread.is_alive()
    restored.join(timeout=1.0)
