"""The ranks' meeting point of an inline multi-worker trial, on a real TCPStore (no Ray):
threads stand in for the ranks, and a spawned process for rank 1 of a real gloo group."""

from __future__ import annotations

import threading

import pytest

from sweeps.trial.backends.rendezvous import (
    STOPPED,
    PeerFailed,
    Rendezvous,
    TrialStopped,
    WorldSpec,
    joined_world,
    open_store,
)


@pytest.fixture(scope="module")
def store():
    return open_store()


def _ranks(store, prefix: str, n: int, alive=None) -> list[Rendezvous]:
    return [Rendezvous(store, prefix, r, n, alive=alive if r == 0 else None) for r in range(n)]


def _run(*calls):
    """Run the calls in threads at once; their results (or what they raised), in order."""
    out: list = [None] * len(calls)

    def one(i, call):
        try:
            out[i] = call()
        except BaseException as exc:  # noqa: BLE001 - TrialStopped is a BaseException
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads), "a rank still waits"
    return out


def test_a_barrier_returns_on_every_rank_once_all_arrived(store) -> None:
    zero, one, two = _ranks(store, "barrier", 3)
    assert _run(lambda: zero.barrier("b"), lambda: one.barrier("b"),
                lambda: two.barrier("b")) == [None, None, None]


def test_broadcast_gives_every_rank_rank_zeros_value(store) -> None:
    zero, one = _ranks(store, "bcast", 2)
    assert _run(lambda: zero.broadcast_from_rank_zero({"a": 1}),
                lambda: one.broadcast_from_rank_zero(None)) == [{"a": 1}, {"a": 1}]
    assert _run(zero.collective_barrier, one.collective_barrier) == [None, None]
    assert _run(lambda: zero.broadcast_from_rank_zero(2),
                lambda: one.broadcast_from_rank_zero(0)) == [2, 2]


def test_a_stop_ends_the_waits_of_the_other_ranks_with_trial_stopped(store) -> None:
    zero, one = _ranks(store, "stop", 2)
    threading.Timer(0.2, zero.abort, args=(STOPPED,)).start()
    (waited,) = _run(lambda: one.wait("never"))
    assert isinstance(waited, TrialStopped)


def test_a_failure_ends_the_waits_with_the_first_reason(store) -> None:
    zero, one = _ranks(store, "fail", 2)
    one.abort("rank 1 raised ValueError: boom")
    zero.abort("rank 0 raised PeerFailed: ...")  # later: the first reason stays
    (waited,) = _run(lambda: zero.barrier("b"))
    assert isinstance(waited, PeerFailed) and str(waited) == "rank 1 raised ValueError: boom"


def test_rank_zero_stops_waiting_when_its_liveness_check_raises(store) -> None:
    def gone() -> None:
        raise PeerFailed("rank 1's process died")

    zero, _ = _ranks(store, "alive", 2, alive=gone)
    (waited,) = _run(lambda: zero.barrier("b"))
    assert isinstance(waited, PeerFailed) and "died" in str(waited)


def test_attempts_do_not_read_each_others_keys(store) -> None:
    first, second = Rendezvous(store, "a1", 0, 1), Rendezvous(store, "a2", 0, 1)
    first.set("r1/go", "1")
    assert not second.store.check(["r1/go"]) and first.wait("r1/go") == b"1"


def _rank_one(host: str, port: int, out) -> None:
    import os

    import torch
    import torch.distributed as dist

    from sweeps.trial.backends.rendezvous import WorldSpec, connect_store, joined_world

    with joined_world(WorldSpec(2, 1, 1, 2, 0, host, port, "pg-test"), connect_store(host, port)):
        t = torch.tensor([float(dist.get_rank())])
        dist.all_reduce(t)
        out.put((os.environ["RANK"], os.environ["LOCAL_WORLD_SIZE"], t.item()))


def test_a_world_of_two_makes_one_process_group_over_the_store_and_undoes_it(store) -> None:
    import multiprocessing
    import os

    import torch
    import torch.distributed as dist

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    peer = ctx.Process(target=_rank_one, args=(store.host, store.port, out))
    peer.start()
    try:
        with joined_world(WorldSpec(2, 0, 0, 2, 0, store.host, store.port, "pg-test"), store):
            assert (dist.get_world_size(), os.environ["WORLD_SIZE"]) == (2, "2")
            t = torch.tensor([float(dist.get_rank())])
            dist.all_reduce(t)
            assert t.item() == 1.0  # 0 + 1
        assert out.get(timeout=60) == ("1", "2", 1.0)
    finally:
        peer.join(60)
    assert not dist.is_initialized() and "WORLD_SIZE" not in os.environ
