"""One driver per sweep, with real drivers as users start them: two commands on one sweep
directory started together, a SIGTERM whose grace runs out, and a disk that fills mid-sweep (a
real tmpfs). Elsewhere: a second command on a live S3 sweep is refused in
``test_object_store``, a killed driver's takeover is printed by the reruns of ``test_resume``
and ``test_object_store``, and racing claims on disk and on S3 in ``tests/unit/lease``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from sweeps import files
from sweeps.lease import claim_store, read_holder
from tests.integration.test_resume import Sweep, _args, _log_lines, _wait_for

pytestmark = pytest.mark.slow


def _running_in_group(pgid: int) -> list[int]:
    """Processes of the group ``pgid`` that still run (not zombies)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _newest_claim(sweep_dir: Path):
    store = claim_store(sweep_dir)
    return read_holder(store.read(store.latest()))


def _race(tmp_path: Path, sweep_dir: str) -> tuple[tuple[int, str], tuple[int, str], Sweep]:
    """The same command twice, started together; (winner's, loser's) (rc, output)."""
    args = _args(tmp_path, "search.num_samples=2", "scheduler.max_t=3",
                 "+experiment.params.epoch_sleep=0.3", f"sweep.dir={sweep_dir}")
    a, b = (Sweep(tmp_path / name, args) for name in ("a", "b"))
    for s in (a, b):
        s.tmp_path.mkdir()
    a.start()
    b.start()
    ends = [a.wait(), b.wait()]
    winner = 0 if ends[0][0] == 0 else 1
    return ends[winner], ends[1 - winner], (a, b)[winner]


def _assert_one_winner(won: tuple[int, str], lost: tuple[int, str], winner: Sweep,
                       sweep_dir: Path) -> None:
    assert won[0] == 0, won[1]
    rc, out = lost
    lines = [line for line in out.splitlines() if line.strip()]
    assert rc == 2 and len(lines) == 1, out  # refused in one line, before anything ran
    assert f"pid {winner.proc.pid}" in lines[0] and "sweep.name=NEW" in lines[0], out
    record = json.loads(files.read_text(sweep_dir / "state" / "sweep.json"))
    assert record["starts"] == 1  # the loser started nothing
    assert not files.exists(sweep_dir / "config.start2.yaml")
    summary = files.read_text(sweep_dir / "summary.csv").splitlines()
    assert len(summary) == 3 and all("completed" in r or "stopped" in r for r in summary[1:])
    holder = _newest_claim(sweep_dir)
    assert holder.pid == winner.proc.pid and holder.released


def test_two_drivers_started_together_on_one_local_sweep_make_one_sweep(tmp_path) -> None:
    won, lost, winner = _race(tmp_path, str(tmp_path / "sweep"))
    _assert_one_winner(won, lost, winner, tmp_path / "sweep")


def test_sigterm_whose_grace_runs_out_ends_the_driver_and_its_ray(tmp_path) -> None:
    args = _args(tmp_path, "search.num_samples=1", "scheduler.max_t=4", "scheduler=none",
                 "+experiment.params.epoch_sleep=0.4", "sweep.stop_grace_s=0.5")
    sweep = Sweep(tmp_path, args)
    sweep.start()
    _wait_for(lambda: len(_log_lines(tmp_path / "logs" / "epochs.log")) >= 2, sweep.proc)
    sweep.proc.send_signal(signal.SIGTERM)
    try:
        rc = sweep.proc.wait(60)  # a scheduler's SIGKILL would come after its own grace
    except subprocess.TimeoutExpired:
        sweep.proc.send_signal(signal.SIGKILL)
        rc = sweep.proc.wait(30)
    out = sweep.out.read_text()
    assert rc == 143, out
    assert "did not end within sweep.stop_grace_s=0.5 s of SIGTERM" in out, out
    # The driver's own Ray processes were killed with it (zombies wait for init to reap them)
    assert _wait_for(lambda: not _running_in_group(sweep.proc.pid), timeout=30)
    assert _newest_claim(tmp_path / "sweep").released
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0 and "resuming:" in out and "taking over" not in out, out
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv")
    assert len(summary) == 1 and set(summary["status"]) == {"completed"}
    assert set(summary["epochs"]) == {4}


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 48 MB tmpfs (root can mount one: the CI machine runs the suite as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _sizes(checkpoint: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in checkpoint.iterdir()}


def _fill(path: Path) -> Path:
    filler = path / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_stops_the_sweep_in_one_line_and_it_resumes_once_there_is_room(
        tmp_path, small_disk) -> None:
    sweep_dir = small_disk / "sweep"
    args = _args(tmp_path, "search.num_samples=1", "scheduler.max_t=6", "scheduler=none",
                 "+experiment.params.epoch_sleep=0.3", f"sweep.dir={sweep_dir}")
    sweep = Sweep(tmp_path, args)
    sweep.start()
    checkpoints = lambda: sorted(sweep_dir.glob("train/*/checkpoint_epoch_*"))  # noqa: E731
    _wait_for(lambda: len(checkpoints()) >= 2, sweep.proc)
    before = {c: _sizes(c) for c in checkpoints()[:-1]}  # the newest may be being written
    filler = _fill(small_disk)
    rc, out = sweep.wait(300)
    assert rc == 3, out
    errors = [line for line in out.splitlines() if line.startswith("sweeps: error:")]
    assert len(errors) == 1 and "No space left on device (errno 28, ENOSPC)" in errors[0], out
    assert f"could not write {sweep_dir}" in errors[0] or f"write {small_disk}" in errors[0], out
    assert "Traceback" not in out and "Logging error" not in out, out
    assert _newest_claim(sweep_dir).released
    assert {c: _sizes(c) for c in before} == before, "checkpoints written before are intact"

    filler.unlink()
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0 and "resuming:" in out, out
    summary = pd.read_csv(sweep_dir / "summary.csv")
    assert len(summary) == 1 and set(summary["status"]) == {"completed"}
    assert set(summary["epochs"]) == {6}
