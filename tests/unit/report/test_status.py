"""``sweeps status``: sweep directories built with the writers a sweep uses (the record, the
scheduler's decisions, the trials' report logs, the claim), read back with no Ray.

Tune's experiment state has no writer outside a running Tune, so the few tests that need a
trial's Tune status write the two fields ``sweeps status`` reads from it (``trial_id``,
``status``) in Tune's layout. ``best.json``/``summary.csv`` are written with a real sweep's keys.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from pathlib import Path
from typing import BinaryIO

import pytest
from omegaconf import OmegaConf

from sweeps import compose, files
from sweeps.layout import SweepLayout
from sweeps.lease import Holder, LocalClaims, claim_store, hold, this_driver
from sweeps.lease.holder import boot_id, pid_namespace
from sweeps.protocol import CLOCK_KEY, checkpoint_dir_name
from sweeps.report.status import main, status_json, status_lines
from sweeps.resume.notes import resume_notes
from sweeps.resume.state import new_record, save_record
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import ResumableASHA, ended_trials
from sweeps.search.space import parse_space
from sweeps.storage import stand_in, uri_of
from sweeps.trial import report_log

ROOT = Path(__file__).resolve().parents[3]
COMMAND = "sweeps +experiment=digits search.num_samples=4 scheduler.max_t=3 sweep.dir=rel/s"


class Trial:
    """The two attributes Tune's schedulers read from a trial."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id, self.last_result = trial_id, {}


def _sweep(root: Path, samples: int = 4) -> Path:
    """A sweep directory as ``prepare`` and the first start leave it: record and config."""
    cfg = compose("digits", [f"search.num_samples={samples}", "scheduler.max_t=3",
                             f"sweep.dir={uri_of(root)}", "tracking.enabled=false"])
    record = new_record(cfg, parse_space(dict(cfg.experiment.search_space))[0], None)
    record.starts = 1
    save_record(root, record)
    files.write_atomic(SweepLayout(root).config(1), OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    return root


def _scheduler(root: Path) -> ResumableASHA:
    """The sweep's ASHA (max 3 epochs, rungs at 1): it writes ``state/scheduler.jsonl``."""
    asha = ResumableASHA(root, Objective("val_acc", "max", 3), grace_period=1,
                         reduction_factor=3)
    asha.set_search_properties("val_acc", "max")
    return asha


def _train(root: Path, asha: ResumableASHA, trial_id: str, values: list[float | None],
           checkpoints: bool = False) -> str:
    """One trial reports ``values`` at epochs 1, 2, ... (report log, then the scheduler), as the
    report bridge and Tune do; it ends when ASHA says STOP. Returns the last decision."""
    run = SweepLayout(root).run_dir(trial_id)
    files.make_dirs(run)
    trial = Trial(trial_id)
    asha.on_trial_add(None, trial)
    action = "CONTINUE"
    for epoch, value in enumerate(values, 1):
        metrics = {"epoch": epoch, CLOCK_KEY: float(epoch),
                   **({"val_acc": value} if value is not None else {"loss": 1.0})}
        checkpoint = run / checkpoint_dir_name(epoch)
        if checkpoints:  # a complete archive, as TrialSession's torch.save writes
            files.make_dirs(checkpoint)
            files.write_atomic(checkpoint / "checkpoint.pt", _archive)
        report_log.append(run, metrics, epoch, str(checkpoint) if checkpoints else None)
        trial.last_result = metrics
        action = asha.on_trial_result(None, trial, metrics)
        if action == "STOP":
            asha.on_trial_complete(None, trial, metrics)
            break
    return action


def _archive(f: BinaryIO) -> None:
    with zipfile.ZipFile(f, "w") as archive:
        archive.writestr("data.pkl", b"x")


def _trials(root: Path) -> Path:
    """a: trained all 3 epochs; b: stopped by ASHA at epoch 1; c: 2 epochs, still going."""
    asha = _scheduler(root)
    assert _train(root, asha, "a", [0.5, 0.7, 0.9]) == "STOP"
    assert _train(root, asha, "b", [0.1]) == "STOP"
    assert _train(root, asha, "c", [0.95, 0.97], checkpoints=True) == "CONTINUE"
    return root


def _tune_state(root: Path, statuses: dict[str, str]) -> None:
    entries = [[json.dumps({"trial_id": t, "status": s, "stub": False}), json.dumps({})]
               for t, s in statuses.items()]
    files.write_atomic(root / "experiment_state-2026-11-25_13-21-20.json",
                       json.dumps({"trial_data": entries, "runner_data": {}, "stats": {}}))


def _me() -> Holder:
    me = this_driver("digits", 5, 45)
    me.command = COMMAND
    return me


def test_a_live_sweep_says_who_holds_it_and_what_runs(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))
    with hold(claim_store(root), _me()):
        lines = status_lines(root)
    assert lines[0].startswith(f"sweep digits in {root} (started 1 time, first on 20")
    assert lines[1].startswith(f"  live: held by host {socket.gethostname()}, pid {os.getpid()}, "
                               "since 20") and lines[1].endswith("(last heartbeat 0 s ago)")
    assert lines[2:] == [
        "  trials: 1 completed, 1 stopped early, 0 failed, 1 running, 1 not started (of 4)",
        "  running: c (epoch 2)",
        "  best so far: trial c val_acc=0.97 at epoch 2 (maximize val_acc)",
        "  epochs spent: 6",
        f"  started with: {COMMAND}"]


def test_a_released_sweep_says_what_a_resume_continues_and_how(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))
    with hold(claim_store(root), _me()):
        pass
    lines = status_lines(root)
    assert lines[1] == f"  not running (released by host {socket.gethostname()}, pid {os.getpid()})"
    with hold(claim_store(root), _me()) as lease:  # a Slurm job its warning stopped
        lease.me.stopped_by, lease.me.job = "SIGTERM", "Slurm job 12"
    assert status_lines(root)[1] == (f"  not running (SIGTERM stopped host {socket.gethostname()},"
                                     f" pid {os.getpid()} (Slurm job 12): a preemption?)")
    assert lines[2:] == [
        "  trials: 1 completed, 1 stopped early, 0 failed, 1 interrupted, 1 not started (of 4)",
        "  a resume continues: c after epoch 2",
        "  best so far: trial c val_acc=0.97 at epoch 2 (maximize val_acc)",
        "  epochs spent: 6",
        "  resume with: sweeps +experiment=digits search.num_samples=4 scheduler.max_t=3 "
        f"sweep.dir={root}"]
    # what the resume itself will say (its ended trials come from the scheduler's own reader)
    resuming = resume_notes(SweepLayout(root), 4, ended_trials(root))[0]
    assert "1 continue (c after epoch 2)" in resuming and "2 of 4 trials had ended" in resuming


def test_json_says_the_state_the_holder_and_every_trial(tmp_path, capsys) -> None:
    """``--json``: one object in the documented format, live, then after the driver left,
    then finished; the params come from the trials' starts as the journal keeps them."""
    from sweeps.storage.journal import Journal

    root = _trials(_sweep(tmp_path / "s"))
    for trial, lr in (("a", 0.1), ("b", 0.2), ("c", 0.3)):
        Journal(SweepLayout(root).tracking).append(
            {"op": "trial_start", "trial": trial, "params": {"lr": lr}, "t": time.time()})
    with hold(claim_store(root), _me()):
        assert main([str(root), "--json"]) == 0
    live = json.loads(capsys.readouterr().out)
    assert (live["state"], live["holder"]["pid"], live["holder"]["command"]) == (
        "running", os.getpid(), COMMAND)
    assert live["claim"].startswith(f"live: held by host {socket.gethostname()}")
    assert live["best"] == {"trial": "c", "value": 0.97, "epoch": 2.0}
    assert (live["total"], live["not_started"], live["epochs_spent"]) == (4, 1, 6.0)
    assert live["objective"] == {"metric": "val_acc", "mode": "max"}
    assert [(t["id"], t["status"], t["params"], t["epoch"], t["metric"], t["restarts"])
            for t in live["trials"]] == [("a", "completed", {"lr": 0.1}, 3.0, 0.9, 0),
                                         ("b", "stopped", {"lr": 0.2}, 1.0, 0.1, 0),
                                         ("c", "running", {"lr": 0.3}, 2.0, 0.97, 0)]
    left = status_json(root)  # released: c waits for a resume
    assert (left["state"], left["trials"][2]["status"]) == ("interrupted", "interrupted")
    assert left["holder"]["pid"] == os.getpid()
    asha = _scheduler(root)
    _train(root, asha, "c", [0.95, 0.97, 0.98])
    _train(root, asha, "d", [0.2])
    assert status_json(root)["state"] == "finished"


def test_json_a_sweep_with_no_trial_is_not_finished_and_one_the_budget_ended_is(
        tmp_path) -> None:
    from sweeps.search.decisions import decision_log

    root = _sweep(tmp_path / "s", samples=3)
    assert (status_json(root)["state"], status_json(root)["trials"]) == ("interrupted", [])
    asha = _scheduler(root)
    _train(root, asha, "a", [0.5, 0.7, 0.9])
    _train(root, asha, "b", [0.1])
    decision_log(root).append({"trial": "d", "epoch": 0, "action": "STOP", "budget": "epochs",
                               "limit": 4.0, "t": time.time(), "metrics": {}})
    state = status_json(root)
    assert [t["status"] for t in state["trials"]] == ["completed", "stopped", "not started"]
    assert (state["state"], state["not_started"]) == ("finished", 0)


def test_a_dead_driver_on_this_host_is_named_as_gone(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = Holder(host=socket.gethostname(), pid=gone.pid, boot_id=boot_id(),
                  pid_ns=pid_namespace(), started=time.time() - 60, sweep="digits",
                  command=COMMAND)
    assert LocalClaims(root).create(1, dead.to_bytes())
    assert status_lines(root)[1] == (f"  not running (its driver, host {socket.gethostname()}, "
                                     f"pid {gone.pid}, is gone: the next command takes over at "
                                     "once)")


def test_a_silent_driver_elsewhere_is_past_its_expiry(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))
    other = Holder(host="other-host", pid=4242, boot_id="b", started=time.time() - 300,
                   sweep="digits", expiry_s=45)
    store = LocalClaims(root)
    assert store.create(1, other.to_bytes())
    then = time.time() - 80
    os.utime(store.dir / "000001.json", (then, then))
    line = status_lines(root)[1]
    assert line.startswith("  not running (silent for 8") and line.endswith(
        " s, past its 45 s expiry; last held by host other-host, pid 4242)")


def test_a_finished_sweep_from_before_claims(tmp_path) -> None:
    """No claim file: the best is best.json's, the command is built from config.yaml."""
    root = _sweep(tmp_path / "s", samples=2)
    asha = _scheduler(root)
    _train(root, asha, "a", [0.5, 0.7, 0.9])
    _train(root, asha, "b", [0.1])
    layout = SweepLayout(root)
    files.write_atomic(layout.best, json.dumps({
        "trial_id": "a", "metric": "val_acc", "value": 0.9, "epoch": 3, "config": {},
        "checkpoint": str(layout.run_dir("a") / "checkpoint_epoch_0003")}))
    files.write_atomic(layout.summary_csv, "trial_id,val_acc,epochs,status\n"
                       "a,0.9,3,completed\nb,0.1,1,stopped\n")
    assert status_lines(root)[1:] == [
        "  never claimed (a sweep from before claims, or none ran)",
        "  trials: 1 completed, 1 stopped early, 0 failed, 0 interrupted, 0 not started (of 2)",
        "  best: trial a val_acc=0.9 at epoch 3 (maximize val_acc; best.json)",
        "  epochs spent: 4",
        f"  finished: {layout.summary_csv}, {layout.best}",
        "  resume with: python -m sweeps +experiment=digits search.num_samples=2 "
        f"scheduler.max_t=3 sweep.seed=0 sweep.dir={root}"]


def test_records_left_in_the_tracking_journal_are_said_with_why(tmp_path) -> None:
    """Issue 50: a stopped sweep whose MLflow records wait in its journal says so, why (what
    the sweep's end recorded in tracking/held.json) and what sends them; none waiting, no
    line."""
    from sweeps.storage.journal import Journal

    root = _sweep(tmp_path / "s", samples=2)
    layout = SweepLayout(root)
    journal = Journal(layout.tracking)
    for op in ("sweep_start", "trial_start", "sweep_end"):
        journal.append({"op": op})
    journal.mark_applied(1)
    files.write_atomic(layout.tracking_held, json.dumps(
        {"records": 2, "why": "MLflow cannot open /w/mlflow.db (duplicate column name: step)",
         "fix": "you move it aside"}))
    assert status_lines(root)[-2] == (
        "  mlflow: 2 record(s) wait in the journal: MLflow cannot open /w/mlflow.db (duplicate "
        "column name: step); they go to MLflow at the next start or with python -m sweeps.sync "
        f"{root}, once you move it aside")
    journal.mark_applied(3)
    assert not any(line.startswith("  mlflow:") for line in status_lines(root))
    journal.append({"op": "trial_start"})  # a sweep killed since: no end said why
    layout.tracking_held.unlink()
    assert status_lines(root)[-2] == (
        "  mlflow: 1 record(s) wait in the journal; they go to MLflow at the next start or "
        f"with python -m sweeps.sync {root}")


def test_failed_and_pending_trials(tmp_path) -> None:
    """Failed: Tune's ERROR (the loop raised), or the scheduler failing a trial that never
    reported the metric. A trial Tune holds PENDING with no report has not started."""
    root = _sweep(tmp_path / "s")
    asha = _scheduler(root)
    _train(root, asha, "a", [0.5, 0.7, 0.9])
    assert _train(root, asha, "m", [None]) == "STOP"  # reported loss, never val_acc
    (SweepLayout(root).run_dir("x")).mkdir(parents=True)
    report_log.append(SweepLayout(root).run_dir("x"), {"val_acc": 0.2, CLOCK_KEY: 1.0}, 1, None)
    _tune_state(root, {"a": "TERMINATED", "m": "TERMINATED", "x": "ERROR", "p": "PENDING"})
    assert status_lines(root)[2] == (
        "  trials: 1 completed, 0 stopped early, 2 failed, 0 interrupted, 1 not started (of 4)")


def test_a_name_is_looked_up_under_outputs_and_no_sweep_is_exit_2(tmp_path, monkeypatch,
                                                                   capsys) -> None:
    monkeypatch.chdir(tmp_path)
    _trials(_sweep(tmp_path / "outputs" / "digits"))
    assert main(["digits"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sweep digits in {tmp_path / 'outputs' / 'digits'} (")
    assert main(["nothing"]) == 2
    assert capsys.readouterr().err == (f"sweeps: error: {tmp_path}/outputs/nothing: no such "
                                       "sweep directory (a NAME is looked up as outputs/NAME)\n")
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == (f"sweeps: error: {tmp_path}/empty holds no sweep (no "
                                       "state/sweep.json, claim or Tune state)\n")


def test_a_sweep_on_s3(moto_s3) -> None:
    uri = f"s3://{moto_s3.BUCKET}/status/{uuid.uuid4().hex[:8]}"
    root = _trials(_sweep(stand_in(uri)))
    with hold(claim_store(root), _me()):
        lines = status_lines(root)
    assert lines[0].startswith(f"sweep digits in {uri} (started 1 time")
    assert lines[1].startswith(f"  live: held by host {socket.gethostname()}, pid {os.getpid()}")
    assert lines[2] == ("  trials: 1 completed, 1 stopped early, 0 failed, 1 running, "
                        "1 not started (of 4)")
    assert "  best so far: trial c val_acc=0.97 at epoch 2 (maximize val_acc)" in lines
    prefix, local = uri.split("/", 3)[3], sorted(Path(root).rglob("*"))
    before = moto_s3.keys(prefix)
    status = status_lines(root)
    assert status[1].startswith("  not running (released by host ")
    assert status[-1] == ("  resume with: sweeps +experiment=digits search.num_samples=4 "
                          f"scheduler.max_t=3 sweep.dir={uri}")
    assert moto_s3.keys(prefix) == before, "read only (the clock probe is removed)"
    assert sorted(Path(root).rglob("*")) == local, "nothing kept under the stand-in"


def test_the_command_prints_and_imports_no_ray(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "sweeps", "status",
                           str(root)], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[2].startswith("  trials: 1 completed, 1 stopped early")
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "sweeps.report.status" in imported
    heavy = {m for m in imported if m.split(".")[0] in ("ray", "torch", "mlflow", "pandas")}
    assert heavy == set()


@pytest.mark.parametrize("argv", [["--help"], ["-h"]])
def test_help(argv, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0 and "Exit code 0 for a sweep" in capsys.readouterr().out


def test_a_trial_the_budget_ended_unstarted_and_the_last_ends_importance(tmp_path) -> None:
    """A trial ``sweep.budget`` stopped before its first report is not started (as the
    summary says), also where the sweep's total is unknown; the importance of the last end
    is read from importance.json."""
    from sweeps.report.importance import Importance
    from sweeps.search.decisions import decision_log

    root = _trials(_sweep(tmp_path / "s"))
    decision_log(root).append({"trial": "d", "epoch": 0, "action": "STOP", "budget": "epochs",
                               "limit": 6.0, "t": time.time(), "metrics": {}})
    files.write_atomic(SweepLayout(root).importance, json.dumps(
        Importance({"lr": 0.7, "hidden": 0.3}, 12, ["val_acc"]).to_json()))
    lines = status_lines(root)
    assert lines[2] == ("  trials: 1 completed, 1 stopped early, 0 failed, 1 interrupted, "
                        "1 not started (of 4)")
    assert "  importance (at the last end): lr 0.70, hidden 0.30" in lines
    _tune_state(root, {"a": "TERMINATED", "b": "TERMINATED", "c": "RUNNING"})
    for gone in (SweepLayout(root).record, SweepLayout(root).config(1)):
        files.remove_file(gone)  # no record, no config: no total, the budget's still counted
    assert status_lines(root)[3].endswith(" interrupted, 1 not started")  # no "(of N)"
