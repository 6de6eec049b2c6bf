"""The claim on a sweep directory (sweeps.lease): the rule table, then the protocol over every
claim store (a local directory, and a real S3 endpoint: moto's server), with real threads and
processes racing for it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from sweeps.errors import SweepBusy
from sweeps.lease import Holder, acquire, claim_store, hold, judge, read_holder, this_driver
from sweeps.lease.holder import boot_id, pid_namespace, process_start
from sweeps.storage import stand_in
from sweeps.storage.claims import LocalClaims, ObjectClaims

ME = Holder(host="h1", pid=1, boot_id="boot-1", expiry_s=30)
ALIVE = {(11, 500)}  # (pid, start) of processes that run on h1


def _alive(pid: int, started: int | None) -> bool:
    return (pid, started) in ALIVE


@pytest.mark.parametrize(("holder", "age", "kind", "live"), [
    (Holder(host="h2", pid=9, boot_id="boot-2", expiry_s=30), 5, "live", True),
    (Holder(host="h2", pid=9, boot_id="boot-2", expiry_s=30), 31, "expired", False),
    (Holder(host="h2", pid=9, boot_id="boot-2", expiry_s=90), 60, "live", True),  # its expiry
    (Holder(host="h2", pid=9, boot_id="boot-2", expiry_s=-1), 31, "expired", False),  # bad: mine
    (Holder(host="h2", pid=9, boot_id="boot-2", released=True), 1, "released", False),
    (Holder(host="h1", pid=11, boot_id="boot-1", pid_started=500), 1, "live", True),
    (Holder(host="h1", pid=11, boot_id="boot-1", pid_started=499), 1, "dead", False),  # reused
    (Holder(host="h1", pid=12, boot_id="boot-1"), 1, "dead", False),  # gone
    (Holder(host="h1", pid=12, boot_id="boot-9"), 1, "live", True),  # same name, other host
    (Holder(host="h1", pid=12, boot_id=""), 1, "live", True),  # no boot id: not provably here
    (Holder(host="h1", pid=12, boot_id="boot-1", pid_ns="pid:[2]"), 1, "live", True),  # a
    # container sharing the host's name and boot id: its pids are not this namespace's
    (Holder(host="h1", pid=12, boot_id="boot-1"), 400, "dead", False),
    (None, 5, "unreadable-live", True),
    (None, 31, "unreadable", False),
])
def test_judge(holder: Holder | None, age: float, kind: str, live: bool) -> None:
    verdict = judge(holder, age, ME, alive=_alive)
    assert (verdict.kind, verdict.live, verdict.silent_s) == (kind, live, age)


@pytest.mark.parametrize("raw", [None, b"", b"{", b'{"host": "h1", "pi', b"[1, 2]", b'"x"',
                                 b'{"host": 3, "pid": 1}', b'{"host": "h", "pid": "7"}',
                                 b"\xff\xfe", b'{"pid": 1}'])
def test_unreadable_claims_read_as_none(raw: bytes | None) -> None:
    assert read_holder(raw) is None


def test_a_claim_keeps_unknown_keys_out_and_reads_back() -> None:
    me = this_driver("digits", 5, 45)
    data = json.loads(me.to_bytes())
    data["from_a_newer_version"] = 1
    back = read_holder(json.dumps(data).encode())
    assert back == me and back.pid_started == process_start(me.pid)


def test_this_host_and_a_finished_process() -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    here = this_driver("s", 5, 45)
    gone = Holder(host=socket.gethostname(), pid=int(done.stdout), boot_id=boot_id(),
                  pid_ns=pid_namespace())
    assert judge(gone, 0.0, here).kind == "dead"
    assert judge(here, 0.0, here).kind == "live"


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.slow)])  # moto: slow
def sweep_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "local":
        return tmp_path / "sweep"
    moto = request.getfixturevalue("moto_s3")
    return stand_in(f"s3://{moto.BUCKET}/lease/{uuid.uuid4().hex[:8]}")


def _holder(**kw: object) -> Holder:
    return Holder(**{"host": "elsewhere", "pid": 4242, "boot_id": "b", "expiry_s": 45,
                     "started": time.time(), **kw})


def test_the_store_kind_follows_the_directory(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    assert isinstance(store, ObjectClaims if "sweeps-storage" in str(sweep_dir) else LocalClaims)
    assert store.latest() == 0 and store.generations() == []


def test_one_holder_then_a_refusal_then_the_release(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    me = this_driver("digits", 5, 45)
    with hold(store, me) as lease:
        assert lease.gen == 1 and lease.taken_over is None
        with pytest.raises(SweepBusy) as busy:
            acquire(claim_store(sweep_dir), this_driver("digits", 5, 45))
        line = str(busy.value)
        assert f"pid {me.pid}" in line and f"host {me.host}" in line
        assert "sweep.name=NEW" in line and "sweeps status" in line and "\n" not in line
    assert read_holder(store.read(1)).released
    with hold(store, this_driver("digits", 5, 45)) as again:
        assert again.gen == 2 and again.taken_over is None  # a released claim: nothing to say


def test_a_dead_drivers_claim_is_taken_at_once(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    store.create(1, _holder(host=socket.gethostname(), boot_id=boot_id(),
                            pid_ns=pid_namespace(), pid=int(done.stdout)).to_bytes())
    with hold(store, this_driver("digits", 5, 45)) as lease:
        assert lease.gen == 2
        assert lease.taken_over == (f"taking over the sweep from host {socket.gethostname()}, "
                                    f"pid {int(done.stdout)}: that process is gone")


def test_a_claim_a_sigterm_stopped_says_so_to_the_next_start(sweep_dir: Path,
                                                             monkeypatch) -> None:
    store = claim_store(sweep_dir)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    with hold(store, this_driver("digits", 5, 45)) as first:
        first.me.stopped_by = "SIGTERM"
    monkeypatch.setenv("SLURM_RESTART_COUNT", "2")
    with hold(store, this_driver("digits", 5, 45)) as lease:
        assert lease.taken_over.startswith(
            f"continuing the sweep from host {socket.gethostname()}, pid {os.getpid()} "
            "(Slurm job 77, start 2), which SIGTERM stopped ")
        assert lease.taken_over.endswith(" s ago (Slurm/Kubernetes preemption?)")
        with pytest.raises(SweepBusy, match=r"pid \d+ \(Slurm job 77, start 3\), since"):
            acquire(store, this_driver("digits", 5, 45))
    with hold(store, this_driver("digits", 5, 45)) as third:
        assert third.taken_over is None  # released by a driver no signal stopped


def test_another_hosts_claim_holds_until_it_is_silent_past_its_expiry(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    skewed = time.time() + 3600  # that host's clock is an hour ahead: never compared
    store.create(1, _holder(expiry_s=1, started=skewed).to_bytes())
    with pytest.raises(SweepBusy, match="host elsewhere, pid 4242"):
        acquire(store, this_driver("digits", 0.2, 1))
    time.sleep(2.2 if isinstance(store, ObjectClaims) else 1.2)  # S3 stamps whole seconds
    with hold(store, this_driver("digits", 0.2, 1)) as lease:
        assert lease.gen == 2
        assert lease.taken_over.startswith("taking over the sweep from host elsewhere, pid "
                                           "4242, silent for ")


def test_a_claim_silent_for_two_heartbeats_is_waited_out_not_refused(sweep_dir: Path,
                                                                    caplog) -> None:
    """A driver killed on another host (a Kubernetes retry's new cluster): the next start waits
    for its claim to expire; a claim that beats again meanwhile is a live driver's: refused."""
    store = claim_store(sweep_dir)
    store.create(1, _holder(heartbeat_s=0.2, expiry_s=4).to_bytes())
    time.sleep(2.2)  # silent past two heartbeats (S3 stamps whole seconds)
    with hold(store, this_driver("digits", 0.2, 4)) as lease:
        assert lease.gen == 2 and "silent for " in lease.taken_over
    # it waited for the expiry, it did not refuse
    assert "has been silent for" in caplog.text and "waiting for it to expire" in caplog.text

    store.create(3, _holder(heartbeat_s=0.3, expiry_s=30).to_bytes())
    time.sleep(2.2)
    beating = threading.Timer(1.0, store.rewrite, (3, _holder(heartbeat_s=0.3).to_bytes()))
    beating.start()
    with pytest.raises(SweepBusy, match="held by a running driver"):
        acquire(store, this_driver("digits", 0.2, 4))
    beating.join()

    store.create(4, _holder(heartbeat_s=0.2, expiry_s=30, host=socket.gethostname(),  # stopped
                            boot_id=boot_id(), pid_ns=pid_namespace(), pid=os.getpid(),  # here,
                            pid_started=process_start(os.getpid())).to_bytes())  # Ctrl-Z'd
    time.sleep(2.2)
    caplog.clear()
    with pytest.raises(SweepBusy, match="held by a running driver"):
        acquire(store, this_driver("digits", 0.2, 4))
    assert "waiting for it to expire" not in caplog.text  # it runs on this host: not waited on


def test_a_corrupt_claim_is_a_claim_until_it_expires_never_a_crash(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    store.create(1, b'{"host": "h", "pid')  # truncated (test_unreadable_claims: other kinds)
    with pytest.raises(SweepBusy, match="claim file that cannot be read"):
        acquire(store, this_driver("digits", 0.2, 1))
    time.sleep(2.2 if isinstance(store, ObjectClaims) else 1.2)  # S3 stamps whole seconds
    with hold(store, this_driver("digits", 0.2, 1)) as lease:
        assert lease.gen == 2 and "could not be read" in lease.taken_over


def test_drivers_racing_for_a_free_sweep_make_exactly_one_winner(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    store.create(1, _holder(released=True).to_bytes())
    won: list[int] = []
    refused: list[str] = []
    start = threading.Barrier(6)

    def race() -> None:
        start.wait()
        try:
            won.append(acquire(claim_store(sweep_dir), this_driver("digits", 5, 45)).gen)
        except SweepBusy as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=race) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert won == [2] and len(refused) == 5, (won, refused)
    assert store.generations() == [1, 2]


def test_the_heartbeat_renews_and_notices_a_takeover(sweep_dir: Path) -> None:
    store = claim_store(sweep_dir)
    lost: list[str] = []
    with hold(store, this_driver("digits", 0.3, 3), on_lost=lost.append) as lease:
        time.sleep(1.2)
        assert read_holder(store.read(1)).beats >= 2
        store.create(2, _holder().to_bytes())  # another driver judged this one dead
        deadline = time.monotonic() + 5
        while not lost and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lost and "host elsewhere, pid 4242" in lost[0] and lease.lost == lost[0]
    assert not read_holder(store.read(1)).released, "a lost claim is not marked released"
    assert read_holder(store.read(2)).host == "elsewhere"


def test_a_driver_that_lost_its_claim_exits_at_once_and_writes_nothing_more(tmp_path) -> None:
    """Interrupt.lost, as run_sweep wires it: no save, its children killed, exit status 4."""
    script = (
        "import subprocess, sys, time\n"
        "from sweeps.driver.interrupt import Interrupt\n"
        "from sweeps.lease import claim_store, hold, this_driver\n"
        "child = subprocess.Popen(['sleep', '60'])\n"
        "print(child.pid, flush=True)\n"
        f"with hold(claim_store({str(tmp_path)!r}), this_driver('s', 0.2, 1), "
        "on_lost=Interrupt('s').lost):\n"
        "    time.sleep(60)\n"
        "print('unreachable')\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    store = claim_store(tmp_path)
    while store.latest() < 1:
        time.sleep(0.05)
    store.create(2, _holder().to_bytes())  # another driver took the sweep over
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 4 and "unreachable" not in out, (out, err)
    assert "another driver (host elsewhere, pid 4242" in err and "writes nothing more" in err
    assert not read_holder(store.read(1)).released  # nothing written after the loss
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(child, 0)
            time.sleep(0.1)


def test_driver_processes_racing_for_a_new_sweep_make_exactly_one_winner(sweep_dir) -> None:
    """As drivers race: separate processes (each judges the others' live pids), one go."""
    script = ("import sys\n"
              "from sweeps.errors import SweepBusy\n"
              "from sweeps.lease import acquire, claim_store, this_driver\n"
              "from sweeps.storage import stand_in\n"
              f"store = claim_store({str(sweep_dir)!r})\n"
              "print('ready', flush=True)\n"
              "sys.stdin.readline()\n"  # released together
              "try:\n"
              "    print('won', acquire(store, this_driver('s', 5, 45)).gen, flush=True)\n"
              "except SweepBusy as exc:\n"
              "    print('refused', exc, flush=True)\n"
              "sys.stdin.readline()\n")  # alive until every racer has decided
    racers = [subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True) for _ in range(4)]
    assert [r.stdout.readline().strip() for r in racers] == ["ready"] * 4  # all imported
    for r in racers:
        r.stdin.write("go\n")
        r.stdin.flush()
    said = [r.stdout.readline().strip() for r in racers]
    for r in racers:
        r.communicate("end\n", timeout=30)
    assert sorted(line.split()[0] for line in said) == ["refused"] * 3 + ["won"], said
    assert [line for line in said if line.startswith("won")] == ["won 1"]
    assert claim_store(sweep_dir).generations() == [1]
