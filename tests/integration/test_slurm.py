"""The shipped sbatch script (``sweeps template slurm``) on a real Slurm: Debian's slurm-wlm,
slurmctld and slurmd started by the fixture on this host, auth/none on loopback.

One sweep, one job, three starts: Slurm's warning (``--signal=B:TERM@``, sent here by
``scancel --batch --signal=TERM`` as Slurm sends it: to the batch shell only) makes the sweep
save and the job requeue itself; then ``scontrol requeue`` kills the whole job mid-sweep as an
admin or a preemption would; the third start finishes the sweep. Every trial runs exactly once,
MLflow ends consistent, each start's log names the driver it continues from, and the job leaves
no Ray behind.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from sweeps.templates import text
from tests.integration.test_user_loop import _env, _project

pytestmark = pytest.mark.slow

NUM_SAMPLES, MAX_T = 3, 5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _install_slurm() -> None:
    """Debian's slurm-wlm where it is missing (CI's fresh machine); a failure says why."""
    if shutil.which("slurmctld") and shutil.which("slurmd"):
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.fail("Slurm is not installed and cannot be here (needs root and apt-get): "
                    "install Debian's slurm-wlm")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "slurm-wlm"]):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed: {done.stderr[-2000:]}")


class Slurm:
    """A one-node Slurm cluster of this host, its files under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root, self.node = root, socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.daemons: list[subprocess.Popen] = []

    def start(self) -> None:
        for sub in ("state", "spool", "log"):
            (self.root / sub).mkdir(parents=True)
        r = self.root
        self.conf.write_text(f"""ClusterName=sweepstest
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=5
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SchedulerParameters=sched_interval=2,bf_interval=2
JobRequeue=1
KillWait=30
MinJobAge=600
NodeName={self.node} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        for daemon in (["slurmctld", "-D", "-f", str(self.conf)],
                       ["slurmd", "-D", "-N", self.node, "-f", str(self.conf)]):
            self.daemons.append(subprocess.Popen(daemon, env=self.env,
                                                 stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.DEVNULL))
            time.sleep(1)
        deadline = time.monotonic() + 60
        while "idle" not in self.run("sinfo", "-h", "-o", "%T", check=False):
            if time.monotonic() > deadline or any(d.poll() is not None for d in self.daemons):
                pytest.fail("slurmctld/slurmd did not start: "
                            + "".join(p.read_text()[-1500:] for p in (r / "log").glob("*.log")))
            time.sleep(1)

    def run(self, *cmd: str, check: bool = True) -> str:
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: {done.stderr}")
        return done.stdout

    def job(self, job_id: str) -> dict[str, str]:
        out = self.run("scontrol", "-o", "show", "job", job_id)
        return dict(field.split("=", 1) for field in out.split() if "=" in field)

    def stop(self) -> None:
        self.run("scancel", "--full", "--user", "root", check=False)
        deadline = time.monotonic() + 90  # the script's own Ray stop, within KillWait
        while self.run("squeue", "-h", check=False).strip() and time.monotonic() < deadline:
            time.sleep(1)
        for daemon in self.daemons:
            daemon.terminate()
            daemon.wait(timeout=30)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory) -> Slurm:
    _install_slurm()
    cluster = Slurm(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _wait(what: str, until, log: Path, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not until():
        if time.monotonic() > deadline:
            text_ = log.read_text() if log.exists() else "(no log)"
            raise AssertionError(f"timed out waiting for {what}; the job's log:\n{text_[-6000:]}")
        time.sleep(0.5)


def _starts(log: Path) -> list[str]:
    """The job's log, one part per start of the script."""
    return re.split(r"(?m)^(?=sweep\.sbatch: job \d+, start )", log.read_text())[1:]


def _submit(slurm: Slurm, tmp_path: Path) -> tuple[str, Path, Path]:
    """The shipped script submitted from a user's project (its loop written as Ray Train's
    docs write one), outside the checkout: (job id, the project, the job's log)."""
    project = _project(tmp_path, "mine", "train_func", {"lr": 0.1, "hidden": 16,
                                                       "epochs": MAX_T},
                       {"lr": "tag(log, interval(0.01, 0.3))", "hidden": "choice(8, 32)"})
    script = project / "sweep.sbatch"
    script.write_text(subprocess.run([sys.executable, "-m", "sweeps", "template", "slurm"],
                                     capture_output=True, text=True, check=True).stdout)
    assert script.read_text() == text("slurm")
    log = project / "job.out"
    env = {**_env(SLOW_EPOCH_S="1.5", SWEEPS_PYTHON=sys.executable,
                  SWEEPS_RAY_PORT=str(_free_port())), "SLURM_CONF": str(slurm.conf)}
    job = subprocess.run(
        ["sbatch", "--parsable", f"--chdir={project}", f"--output={log}", str(script),
         "--config-dir", "conf", "+experiment=mine", f"search.num_samples={NUM_SAMPLES}",
         "search.n_startup_trials=3", "scheduler=none", f"scheduler.max_t={MAX_T}",
         "scaling.num_workers=1", f"sweep.dir={project / 'sweeps' / 'mine'}"],
        env=env, capture_output=True, text=True, check=True).stdout.strip()
    return job, project, log


def _no_ray_left() -> None:
    left = subprocess.run(["pgrep", "-f", "ray/core/src/ray/(raylet|gcs)"], capture_output=True)
    assert left.stdout == b"", "the job left Ray running"


def test_the_sbatch_script_survives_a_warning_and_a_requeue_and_finishes_the_sweep(
        slurm: Slurm, tmp_path: Path) -> None:
    job, project, log = _submit(slurm, tmp_path)
    sweep_dir = project / "sweeps" / "mine"

    def reported(start: int) -> int:  # epochs reported during the given start
        parts = _starts(log) if log.exists() else []
        return len(re.findall(r"epoch \d+/", parts[start - 1])) if len(parts) >= start else 0

    # Slurm's warning (B:TERM): the driver saves, exits 143, the script requeues the job.
    _wait("the first epochs", lambda: reported(1) >= 2, log)
    slurm.run("scancel", "--batch", "--signal=TERM", job)
    _wait("the second start", lambda: reported(2) >= 1, log)
    # The whole job killed at once (scontrol requeue: every process gets SIGTERM, then SIGKILL).
    slurm.run("scontrol", "requeue", job)
    _wait("the end of the job", lambda: slurm.job(job)["JobState"] == "COMPLETED", log,
          timeout_s=420)

    first, second, third = _starts(log)
    assert slurm.job(job)["Restarts"] == "2"
    assert "sweeps: stopped by SIGTERM (Slurm/Kubernetes preemption?)" in first, first
    assert f"requeueing job {job} to continue it" in first and "driver exited 143" in first
    host = socket.gethostname()
    said = re.search(rf"continuing the sweep from host {host}, pid \d+ \(Slurm job {job}\), "
                     r"which SIGTERM stopped \d+ s ago", second)
    assert said, second
    # A driver that saved within its grace says SIGTERM stopped it; one Slurm's SIGKILL got
    # first is gone: either way the third start names the second.
    assert re.search(rf"(continuing|taking over) the sweep from host {host}, pid \d+ "
                     rf"\(Slurm job {job}, start 2\)", third), third
    assert "the sweep's driver exited 0" in third, third

    summary = pd.read_csv(sweep_dir / "summary.csv", dtype={"trial_id": str})
    assert len(summary) == NUM_SAMPLES and summary["trial_id"].is_unique
    assert set(summary["status"]) == {"completed"} and set(summary["epochs"]) == {MAX_T}

    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{project / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("mine").experiment_id])
    assert [r.info.run_name for r in runs if r.info.status != "FINISHED"] == []
    trials = [r.data.tags["sweeps.trial_id"] for r in runs
              if r.data.tags.get("sweeps.role") == "trial"]
    assert sorted(trials) == sorted(summary["trial_id"])  # one run per trial, once
    parent = next(r for r in runs if r.data.tags.get("sweeps.role") == "parent")
    assert parent.data.tags["sweeps.starts"] == "3"
    assert "sweeps.abort_reason" not in parent.data.tags  # the stopped starts', gone at the end
    _no_ray_left()


def test_a_cancelled_job_saves_the_sweep_and_is_not_requeued(slurm: Slurm,
                                                            tmp_path: Path) -> None:
    job, _, log = _submit(slurm, tmp_path)
    _wait("the first epoch", lambda: log.exists() and "epoch 1/" in log.read_text(), log)
    slurm.run("scancel", job)  # every process of the job gets SIGTERM; the job is CANCELLED
    _wait("the script's end", lambda: "the sweep's driver exited" in log.read_text(), log)
    out = log.read_text()
    assert "sweep.sbatch: the sweep's driver exited 143" in out, out
    assert re.search(r"preemption\?\): \d of 3 trials ended", out), out
    assert "requeueing" not in out, out
    # The script's last line comes before Slurm is done with the job (COMPLETING, then this).
    _wait("the job's end", lambda: slurm.job(job)["JobState"] != "COMPLETING", log, 60)
    assert (slurm.job(job)["JobState"], slurm.job(job)["Restarts"]) == ("CANCELLED", "0")
    _wait("Ray's end", lambda: subprocess.run(["pgrep", "-f", "ray/core/src/ray/raylet"],
                                               capture_output=True).stdout == b"", log, 30)
