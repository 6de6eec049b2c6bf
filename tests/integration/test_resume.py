"""Interrupted sweeps resume, and failures inside a sweep are survived: real processes, real
signals (SIGKILL of the sweep driver, of a Train worker, of a trial driver; SIGTERM).

Each sweep below runs ``tests.integration.observed:train_observed`` (the digits MLP, slowed to
``epoch_sleep`` seconds an epoch, writing which epochs it trained to ``logs/epochs.log``). After
every scenario: no placement group held, no MLflow run left RUNNING, one run per trial.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from sweeps import compose, run_sweep
from sweeps.lease import claim_store, read_holder
from sweeps.resume.train_runs import SNAPSHOT
from sweeps.search.schedulers import ended_trials
from tests.conftest import ROOT
from tests.integration.tensorboard_runs import assert_steps_are_epochs

pytestmark = pytest.mark.slow

TRAINABLE = "experiment.trainable=tests.integration.observed:train_observed"


def _args(tmp_path: Path, *overrides: str) -> list[str]:
    return ["+experiment=digits", TRAINABLE, f"+experiment.params.log_dir={tmp_path / 'logs'}",
            f"sweep.dir={tmp_path / 'sweep'}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
            *overrides]


TRIAL_PROCESSES = ("ray::ImplicitFunc", "ray::TrainController", "ray::RayTrainWorker")


def _pids_titled(*fragments: str) -> list[int]:
    """Processes whose title (Ray sets it to ``ray::Class.method``) contains a fragment."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                title = (entry / "cmdline").read_text()
                if any(f in title for f in fragments):
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


class Sweep:
    """``python -m sweeps ...`` in its own process group (its private Ray instance with it)."""

    def __init__(self, tmp_path: Path, args: list[str]) -> None:
        self.tmp_path, self.args, self.runs = tmp_path, args, 0

    def start(self) -> None:
        self.runs += 1
        self.out = self.tmp_path / f"run{self.runs}.txt"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
        with self.out.open("w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "sweeps", *self.args],
                                         cwd=self.tmp_path, env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout: float = 600) -> tuple[int, str]:
        try:
            rc = self.proc.wait(timeout)
        finally:
            self._reap()
        return rc, self.out.read_text()

    def kill9(self) -> None:
        """SIGKILL the sweep driver alone, as the OOM killer or a power cut would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._reap()

    def _reap(self) -> None:
        reap(self.proc)


def reap(proc: subprocess.Popen) -> None:
    """End what a killed sweep driver left behind, as a user's restart would find it."""
    # Ray's agents of the dead driver's instance outlive it; end them (same group).
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    # Its trial actors and Train workers (own process groups) die once their raylet is
    # gone, but may write a checkpoint first: wait for them, as a user's restart would.
    deadline = time.monotonic() + 30
    while _pids_titled(*TRIAL_PROCESSES) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _pids_titled(*TRIAL_PROCESSES):
        os.kill(pid, signal.SIGKILL)


def _wait_for(predicate, proc: subprocess.Popen | None = None, timeout: float = 600) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc is not None and proc.poll() is not None:
            return False
        time.sleep(0.1)
    raise AssertionError("timed out waiting for the sweep")


def _log_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _epochs(tmp_path: Path, log: str = "epochs.log") -> list[tuple[str, int, float]]:
    """(trial, epoch, time) per epoch reported (``epochs.log``) or trained (``trained.log``)."""
    return [(t, int(e), float(ts)) for t, e, ts in
            (line.split() for line in _log_lines(tmp_path / "logs" / log))]


def _mlflow_runs(tmp_path: Path):
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("digits")
    return client, client.search_runs([experiment.experiment_id], max_results=1000)


def _assert_clean_end(tmp_path: Path, trial_ids: set[str]) -> None:
    """One MLflow run and one TensorBoard run per trial, no duplicated steps, nothing RUNNING,
    no group held."""
    client, runs = _mlflow_runs(tmp_path)
    assert [r.info.run_name for r in runs if r.info.status == "RUNNING"] == []
    children = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    assert sorted(r.data.tags["sweeps.trial_id"] for r in children) == sorted(trial_ids)
    for run in children:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_acc")]
        assert steps == sorted(set(steps)) and steps == list(range(1, len(steps) + 1)), steps
    assert len([r for r in runs if r.data.tags.get("sweeps.role") == "parent"]) == 1
    # A trial resumed from an earlier epoch than it had reported continues its TensorBoard
    # curve (the driver that resumes it reads the run back), it does not restart it
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv", dtype={"trial_id": str})
    assert_steps_are_epochs(tmp_path / "sweep", trial_ids,
                            epochs=dict(zip(summary["trial_id"], summary["epochs"], strict=True)))
    end = json.loads((tmp_path / "sweep" / "state" / "end.json").read_text())
    assert end["held_placement_groups"] == 0


# On the default backend with 2 workers (rank 1 in a peer): a killed driver resuming a Ray
# Train run is the conformance suite's (tests/conformance/test_resume.py), per backend.
def test_sweep_driver_killed_at_seeded_moments_resumes_to_the_same_sweep(tmp_path) -> None:
    num_samples = 6
    sweep = Sweep(tmp_path, _args(tmp_path, f"search.num_samples={num_samples}",
                                  "scheduler.max_t=4", "+experiment.params.epoch_sleep=0.4",
                                  "scaling.num_workers=2", "trial.executor=inline"))
    log = tmp_path / "sweep" / "state" / "scheduler.jsonl"
    rng = random.Random(20261122)
    kills: list[tuple[float, dict]] = []  # (time, trials ended at that time)
    last_before: list[dict[str, int]] = []  # per kill: trial -> last epoch trained before it
    threshold = 0
    for _ in range(2):  # two kills at seeded moments (a third cost the suite a minute)
        threshold += rng.randint(2, 4)
        sweep.start()
        reached = _wait_for(lambda n=threshold: len(_log_lines(log)) >= n, sweep.proc)
        if not reached:  # the sweep ended before this moment came: no more kills
            break
        time.sleep(rng.uniform(0.0, 1.5))
        sweep.kill9()
        kills.append((time.time(), ended_trials(tmp_path / "sweep")))
        last: dict[str, int] = {}
        for trial, epoch, _ in _epochs(tmp_path):
            last[trial] = max(last.get(trial, 0), epoch)
        last_before.append(last)
    assert len(kills) == 2, "the sweep was interrupted twice"
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0, out
    for run in range(2, sweep.runs + 1):  # each rerun took the dead driver's claim at once
        text = (tmp_path / f"run{run}.txt").read_text()
        assert "taking over the sweep from host" in text and "that process is gone" in text
    assert "resuming:" in out and f"of {num_samples} trials had ended and are kept" in out
    kept = int(re.search(r"resuming: (\d+) of", out).group(1))
    first = re.search(rf"\] (\d+)/{num_samples} done \|", out.split("resuming:", 1)[1])
    assert first is not None and int(first.group(1)) >= kept, out  # the live lines count them

    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv", dtype={"trial_id": str})
    final_ids = set(summary["trial_id"])
    assert len(summary) == num_samples and len(final_ids) == num_samples
    seen_before = {r["trial"] for r in map(json.loads, _log_lines(log))}
    assert seen_before <= final_ids  # no trial that had run was lost or renamed
    assert set(summary["status"]) <= {"completed", "stopped"}

    # A kill between an epoch's report and the loop's next line leaves a reported epoch out of
    # epochs.log (the sweep keeps it: rank 0's report log): judge by the epochs trained.
    trained = defaultdict(list)
    for trial, epoch, ts in _epochs(tmp_path, "trained.log"):
        trained[trial].append((ts, epoch))
    for (kill_time, ended), last in zip(kills, last_before, strict=True):
        for trial in ended:  # ended before the kill: never trained again
            assert all(ts < kill_time for ts, _ in trained[trial]), trial
        for trial, epoch in last.items():
            after = [e for ts, e in sorted(trained[trial]) if ts > kill_time]
            if trial not in ended and after:  # in flight: lost at most the running epoch
                assert after[0] >= epoch, (trial, epoch, after)
    for trial, rows in trained.items():
        epochs = [e for _, e in rows]
        row = summary.set_index("trial_id").loc[trial]
        assert max(epochs) == row["epochs"], (trial, epochs)  # nothing ran past its end
    _assert_clean_end(tmp_path, final_ids)


def _journaled_starts(tmp_path: Path) -> list[str]:
    records = map(json.loads, _log_lines(tmp_path / "sweep" / "tracking" / "journal.jsonl"))
    return [r["trial"] for r in records if r.get("op") == "trial_start"]


def test_driver_killed_as_a_reused_process_starts_a_trial_resumes_that_trial(tmp_path) -> None:
    """An inline trial on a reused process starts within milliseconds of Tune adding it, inside
    Tune's one-second state save: the sweep saves Tune's state before any new trial starts, so
    the trial killed there is resumed, not orphaned (its MLflow run left behind, the search
    suggesting another: Optuna's trial ids are random, where random search's come back)."""
    sweep = Sweep(tmp_path, _args(tmp_path, "scheduler=none", "search.num_samples=3",
                                  "search.max_concurrent_trials=1",
                                  "scheduler.max_t=2", "+experiment.params.epoch_sleep=0.2",
                                  "scaling.num_workers=1", "trial.reuse_process=true"))
    sweep.start()
    assert _wait_for(lambda: len(_journaled_starts(tmp_path)) >= 2, sweep.proc, timeout=300)
    sweep.kill9()
    started = _journaled_starts(tmp_path)
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0, out
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv", dtype={"trial_id": str})
    assert set(started) <= set(summary["trial_id"]) and len(summary) == 3, (started, out)
    _assert_clean_end(tmp_path, set(summary["trial_id"]))


def _pid_file(tmp_path: Path, rank: int, epoch: int) -> Path | None:
    found = list((tmp_path / "logs" / "pids").glob(f"*-r{rank}-e{epoch}"))
    return found[0] if found else None


def _in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def _one_trial_cfg(tmp_path: Path, *overrides: str, epochs: int = 5, epoch_sleep: float = 1.0):
    return compose("digits", [a for a in _args(tmp_path, *overrides) if a != "+experiment=digits"]
                   + ["search=random", "scheduler=none", "search.num_samples=1",
                      f"scheduler.max_t={epochs}", f"+experiment.params.epoch_sleep={epoch_sleep}"])


def _trained_in_order(tmp_path: Path) -> list[int]:
    return [e for _, e, _ in sorted(_epochs(tmp_path), key=lambda r: r[2])]


def _no_group_held() -> None:
    from sweeps.placement.reaper import held_groups

    assert held_groups() == 0


@pytest.mark.parametrize("executor", ["train"])
def test_train_worker_killed_mid_epoch_restarts_from_its_checkpoint(tmp_path, ray_cluster,
                                                                   executor) -> None:
    """Rank 1 of a 2-worker trial killed: a Train worker (Train restarts the worker group).
    Inline, the peer's process killed is test_inline_ranks' failed-peer test (each epoch once,
    resumed from the checkpoint, a new peer, no group held); its MLflow and TensorBoard steps
    after a restart, test_inline_loop_that_raises_restarts_in_its_process_from_its_checkpoint."""
    killed: dict[str, int] = {}

    def kill_rank1_in_epoch3() -> None:
        _wait_for(lambda: _pid_file(tmp_path, 1, 3) is not None, timeout=300)
        time.sleep(0.3)  # inside the epoch's sleep: mid-epoch
        killed["pid"] = int(_pid_file(tmp_path, 1, 3).read_text())
        os.kill(killed["pid"], signal.SIGKILL)

    thread = _in_thread(kill_rank1_in_epoch3)
    result = run_sweep(_one_trial_cfg(tmp_path, "trial.max_failures=1",
                                      f"trial.executor={executor}"))
    thread.join(5)
    assert killed, "the worker was killed"
    row = result.summary.table.iloc[0]
    assert (row["status"], row["epochs"]) == ("completed", 5)
    # Epochs 1-2 were checkpointed before the kill; the new worker group resumed at 3.
    assert _trained_in_order(tmp_path) == [1, 2, 3, 4, 5]
    assert int(_pid_file(tmp_path, 1, 3).read_text()) != killed["pid"]
    assert result.results[0].metrics_dataframe["epoch"].tolist() == [1, 2, 3, 4, 5]
    _no_group_held()
    _assert_runs_closed(tmp_path, {row["trial_id"]: "FINISHED"})


def _assert_runs_closed(tmp_path: Path, expected: dict[str, str]) -> None:
    client, runs = _mlflow_runs(tmp_path)
    children = {r.data.tags["sweeps.trial_id"]: r for r in runs
                if r.data.tags.get("sweeps.role") == "trial"}
    assert {t: r.info.status for t, r in children.items()} == expected
    for run in children.values():
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_acc")]
        assert steps == list(range(1, len(steps) + 1)), steps
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert_steps_are_epochs(tmp_path / "sweep", set(expected))  # the retry re-reported none


@pytest.mark.parametrize(("workers", "executor"), [(2, "train"), (1, "auto"), (2, "inline")],
                         ids=["train", "inline", "inline-2"])
def test_trial_driver_killed_is_retried_from_its_checkpoint(tmp_path, ray_cluster, workers,
                                                            executor) -> None:
    """Inline, the trial driver is the process that trains (rank 0): the kill lands in it, and
    its peer goes with it."""
    killed: list[int] = []

    def kill_trial_driver_in_epoch3() -> None:
        _wait_for(lambda: _pid_file(tmp_path, 0, 3) is not None, timeout=300)
        time.sleep(0.3)
        for pid in _pids_titled("ray::ImplicitFunc"):  # Tune's actor for a function trainable
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    thread = _in_thread(kill_trial_driver_in_epoch3)
    result = run_sweep(_one_trial_cfg(tmp_path, "trial.max_retries=1",
                                      f"scaling.num_workers={workers}",
                                      f"trial.executor={executor}"))
    thread.join(5)
    assert len(killed) == 1, killed
    row = result.summary.table.iloc[0]
    assert (row["status"], row["epochs"]) == ("completed", 5)
    assert _trained_in_order(tmp_path) == [1, 2, 3, 4, 5]  # the retry resumed after epoch 2
    _no_group_held()
    _assert_runs_closed(tmp_path, {row["trial_id"]: "FINISHED"})


def test_inline_loop_that_raises_restarts_in_its_process_from_its_checkpoint(
        tmp_path, ray_cluster) -> None:
    """trial.max_failures for an inline trial: the loop runs again in the same process, from
    its last checkpoint, as a Train run restarts its worker group. (With
    tracking.system_metrics=false: its run has no system/ metrics.)"""
    result = run_sweep(_one_trial_cfg(tmp_path, "scaling.num_workers=1", "trial.max_failures=1",
                                      "trial.max_retries=0", "+experiment.params.raise_at_epoch=3",
                                      "tracking.system_metrics=false", epoch_sleep=0.2))
    row = result.summary.table.iloc[0]
    assert (row["status"], row["epochs"]) == ("completed", 5)
    assert _trained_in_order(tmp_path) == [1, 2, 3, 4, 5]  # epoch 3 again, from epoch 2's
    raised = next((tmp_path / "logs").glob("*-raised")).read_text()
    assert int(_pid_file(tmp_path, 0, 3).read_text()) == int(raised)  # the same process
    assert result.results[0].metrics_dataframe["epoch"].tolist() == [1, 2, 3, 4, 5]
    _no_group_held()
    _assert_runs_closed(tmp_path, {row["trial_id"]: "FINISHED"})
    _, runs = _mlflow_runs(tmp_path)
    assert not [k for r in runs for k in r.data.metrics if k.startswith("system/")]


def test_trial_driver_killed_while_its_workers_start_is_retried(tmp_path, ray_cluster) -> None:
    """Killed between Train creating the worker group and the workers reporting ready: the
    group must be released for the retry (it was recorded at creation), not hold the CPUs."""
    killed: list[int] = []

    def kill_trial_driver_during_worker_startup() -> None:
        _wait_for(lambda: _pids_titled("ray::RayTrainWorker"), timeout=300)
        assert _pid_file(tmp_path, 0, 1) is None, "still starting: no epoch began"
        for pid in _pids_titled("ray::ImplicitFunc"):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    thread = _in_thread(kill_trial_driver_during_worker_startup)
    # A leaked group would hold both CPUs: the retry then fails after 60 s (instead of waiting).
    result = run_sweep(_one_trial_cfg(tmp_path, "trial.max_retries=1", "trial.start_timeout_s=60",
                                      "trial.executor=train", epochs=2, epoch_sleep=0.2))
    thread.join(5)
    assert len(killed) == 1, killed
    row = result.summary.table.iloc[0]
    assert (row["status"], row["epochs"]) == ("completed", 2)
    assert _trained_in_order(tmp_path) == [1, 2]
    _no_group_held()
    _assert_runs_closed(tmp_path, {row["trial_id"]: "FINISHED"})


def test_truncated_newest_checkpoint_falls_back_to_the_previous_one(tmp_path) -> None:
    sweep = Sweep(tmp_path, _args(tmp_path, "search=random", "scheduler=none",
                                  "search.num_samples=1", "scheduler.max_t=6",
                                  "+experiment.params.epoch_sleep=1.0"))
    sweep.start()
    _wait_for(lambda: any(e == 3 for _, e, _ in _epochs(tmp_path)), sweep.proc)
    sweep.kill9()
    before = _trained_in_order(tmp_path)
    run_dir = next(p for p in (tmp_path / "sweep" / "train").iterdir() if p.is_dir())
    # The newest checkpoint Train registered: the workers outlive the killed driver and may
    # write one more directory that the run's snapshot never lists (and resuming ignores).
    snapshot = json.loads((run_dir / SNAPSHOT).read_text())
    newest = run_dir / snapshot["latest_checkpoint_result"]["checkpoint_dir_name"]
    n = int(newest.name.rsplit("_", 1)[1])
    assert n >= 3
    payload = newest / "checkpoint.pt"
    payload.write_bytes(payload.read_bytes()[:100])  # a crash mid-write, or a bad disk
    sweep.args = [*sweep.args, "sweep.resume=must"]
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0, out
    assert f"checkpoint_epoch_{n:04d} is unreadable (truncated?)" in out
    assert f"falling back to the previous valid checkpoint checkpoint_epoch_{n - 1:04d}" in out
    # The resumed run starts at epoch n (its checkpoint was lost), not at n + 1 or 1.
    trained = _trained_in_order(tmp_path)
    assert before == list(range(1, len(before) + 1)) and trained[len(before):] == [*range(n, 7)]
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv", dtype={"trial_id": str})
    assert (summary.loc[0, "status"], summary.loc[0, "epochs"]) == ("completed", 6)
    _assert_clean_end(tmp_path, {run_dir.name})


def test_sigterm_saves_state_closes_runs_and_the_same_command_resumes(tmp_path) -> None:
    args = _args(tmp_path, "search.num_samples=3", "scheduler.max_t=4",
                 "+experiment.params.epoch_sleep=0.5")
    sweep = Sweep(tmp_path, args)
    sweep.start()
    log = tmp_path / "sweep" / "state" / "scheduler.jsonl"
    _wait_for(lambda: len(_log_lines(log)) >= 2, sweep.proc)
    sweep.proc.send_signal(signal.SIGTERM)
    rc, out = sweep.wait(120)
    assert rc == 143, out
    assert "stopped by SIGTERM (Slurm/Kubernetes preemption?)" in out, out
    assert "run the same command again to resume" in out
    assert "did not end within" not in out  # it ended on its own, within its grace
    said_ended = re.search(r"preemption\?\): (\d+) of 3 trials ended", out).group(1)
    store = claim_store(tmp_path / "sweep")
    stopped = read_holder(store.read(store.latest()))
    assert stopped.released and stopped.stopped_by == "SIGTERM"
    _, runs = _mlflow_runs(tmp_path)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    parent = next(r for r in runs if r.data.tags.get("sweeps.role") == "parent")
    assert parent.info.status == "KILLED"
    assert "preemption?" in parent.data.tags["sweeps.abort_reason"]

    # Bad inputs on the interrupted sweep: each refused in one line, nothing touched.
    for extra, message in [
        ("sweep.resume=never", "already holds sweep"),
        ("experiment.search_space.hidden=choice(8,16)", "experiment.search_space.hidden"),
        ("experiment.metric=val_loss", "experiment.metric: 'val_loss' differs"),
    ]:
        refused = Sweep(tmp_path, [*args, extra])
        refused.start()
        rc, out = refused.wait(120)
        assert rc == 2 and message in out, out
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0, out
    assert f"resuming: {said_ended} of 3 trials had ended" in out, out  # counted alike
    assert (f"continuing the sweep from host {stopped.host}, pid {stopped.pid}, which SIGTERM "
            "stopped") in out, out
    summary = pd.read_csv(tmp_path / "sweep" / "summary.csv", dtype={"trial_id": str})
    assert len(summary) == 3
    _assert_clean_end(tmp_path, set(summary["trial_id"]))
    _, runs = _mlflow_runs(tmp_path)
    parent = next(r for r in runs if r.data.tags.get("sweeps.role") == "parent")
    assert (parent.info.status, parent.data.tags["sweeps.starts"]) == ("FINISHED", "2")
    assert "sweeps.abort_reason" not in parent.data.tags  # the first start's, gone with it
