"""The trial driver's pure parts (``sweeps.trial.driver``): the worker config, the
trial context, the start limits and the reports a resumed trial hands Tune again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sweeps._ray import train_snapshot
from sweeps.loop.context import TrialContext
from sweeps.protocol import CHECKPOINT_PATH_KEY, CLOCK_KEY
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import decision_log
from sweeps.trial import report_log
from sweeps.trial.backends.train import start_limits
from sweeps.trial.driver import unseen_reports
from sweeps.trial.plan import _EXAMPLE, TrialPlan


def _plan(**changes: Any) -> TrialPlan:
    return TrialPlan(**{**_EXAMPLE, **changes})


@pytest.mark.parametrize("params, constants, sampled, expected", [
    # sampled wins over params
    ({"lr": 0.1, "bs": 32}, {}, {"lr": 0.01}, {"lr": 0.01, "bs": 32}),
    # dotted constants are nested and merged into the params' own mapping
    ({"opt": {"b": 1, "m": 0.9}}, {"opt.b": 2}, {}, {"opt": {"b": 2, "m": 0.9}}),
    ({"lr": 0.1}, {"net.width": 3, "net.act": "relu"}, {},
     {"lr": 0.1, "net": {"width": 3, "act": "relu"}}),
    # sampled wins over constants
    ({}, {"x": 1, "y": 2}, {"x": 5}, {"x": 5, "y": 2}),
    ({"opt": {"b": 1}}, {"opt.b": 2}, {"opt": {"b": 3}}, {"opt": {"b": 3}}),
    # nested sampled values merge into nested params, leaving their siblings
    ({"opt": {"b": 1, "m": 0.9}}, {}, {"opt": {"b": 3}}, {"opt": {"b": 3, "m": 0.9}}),
    # a sampled leaf replaces a whole mapping
    ({"sched": {"kind": "cos"}}, {}, {"sched": None}, {"sched": None}),
    ({}, {}, {}, {}),
])
def test_worker_config_merges_params_constants_and_sampled(
        params: dict, constants: dict, sampled: dict, expected: dict) -> None:
    assert _plan(params=params, constants=constants).worker_config(sampled) == expected


def test_worker_config_leaves_the_shared_plan_untouched() -> None:
    plan = _plan(params={"opt": {"b": 1}}, constants={"opt.m": 0.9})
    first = plan.worker_config({"opt": {"b": 2}})
    first["opt"]["b"] = 99
    assert plan.params == {"opt": {"b": 1}} and plan.constants == {"opt.m": 0.9}
    assert plan.worker_config({}) == {"opt": {"b": 1, "m": 0.9}}


def test_context_names_the_trials_run_dir_and_the_sweeps_settings() -> None:
    plan = _plan(train_storage="/data/sweep/train", objective=Objective("val_loss", "min", 12),
                 checkpoint_every=3, seed=5)
    assert plan.context("ab12_00003") == TrialContext(
        trial_id="ab12_00003", run_dir="/data/sweep/train/ab12_00003", max_epochs=12,
        checkpoint_every=3, seed=5, metric="val_loss", mode="min")


@pytest.mark.parametrize("timeout_s, expected", [
    (-1, (60.0, -1)),      # wait forever: Ray Train's default attempts, no failure limit
    (600, (60.0, 9)),      # 10 attempts of 60 s
    (60, (60.0, 0)),       # exactly one attempt
    (120, (60.0, 1)),
    (90, (60.0, 1)),       # not a multiple of 60: rounded up to two attempts
    (61, (60.0, 1)),
    (20, (20.0, 0)),       # below 60: one shorter attempt
    (0.5, (0.5, 0)),
    (59.9, (59.9, 0)),
])
def test_start_limits(timeout_s: float, expected: tuple[float, int]) -> None:
    assert start_limits(timeout_s) == expected


def test_start_limits_never_wait_less_than_asked() -> None:
    for timeout_s in (1, 45, 60, 61, 119, 120, 121, 600, 601, 3599):
        attempt_s, failures = start_limits(timeout_s)
        assert attempt_s <= 60 and attempt_s * (failures + 1) >= timeout_s
        assert attempt_s * failures < timeout_s  # and not a whole attempt more


# --- unseen_reports: real reports.jsonl, scheduler log and Train snapshot -------------------

def _run(sweep_dir: Path, trial: str = "t1") -> Path:
    run = sweep_dir / "train" / trial
    run.mkdir(parents=True)
    return run


def _ckpt(run: Path, epoch: int) -> str:
    return str(run / f"checkpoint_epoch_{epoch:04d}")


def _restore_from(run: Path, *epochs: int) -> None:
    """Train's snapshot registers checkpoints at ``epochs`` (report index epoch - 1); the
    last one is the checkpoint the trial resumes from."""
    train_snapshot.write(run, train_snapshot.rebuilt(
        [(Path(_ckpt(run, e)).name, {"epoch": e}, e - 1) for e in epochs], "2.60.0"))


def _report(run: Path, n: int, checkpoint: bool, clock: int | None = None, **metrics: Any) -> None:
    report_log.append(run, {CLOCK_KEY: n if clock is None else clock, "val_acc": n / 10,
                            **metrics}, n=n, checkpoint=_ckpt(run, n) if checkpoint else None)


def test_no_restored_checkpoint_means_nothing_to_report_again(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for n in (1, 2):
        _report(run, n, checkpoint=True)
    assert unseen_reports(run, tmp_path, "t1") == []  # no snapshot: Train starts afresh


def test_unjudged_reports_up_to_the_restored_checkpoint_come_back_oldest_first(
        tmp_path: Path) -> None:
    run = _run(tmp_path)
    for n in (1, 2, 3, 4, 5):  # checkpoints every 2 epochs; 5 is past the restored one
        _report(run, n, checkpoint=n % 2 == 0)
    _restore_from(run, 2, 4)
    log = decision_log(tmp_path)
    log.append({"trial": "t1", "epoch": 1, "value": 0.1})
    log.append({"trial": "other", "epoch": 4, "value": 0.4})  # another trial's judgement
    unseen = unseen_reports(run, tmp_path, "t1")
    assert [r[CLOCK_KEY] for r in unseen] == [2, 3, 4]
    assert unseen[0] == {CLOCK_KEY: 2, "val_acc": 0.2, CHECKPOINT_PATH_KEY: _ckpt(run, 2)}
    assert unseen[1][CHECKPOINT_PATH_KEY] is None


def test_reports_the_scheduler_judged_are_not_reported_again(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for n in (1, 2, 3):
        _report(run, n, checkpoint=True)
    _restore_from(run, 1, 2, 3)
    log = decision_log(tmp_path)
    log.append({"trial": "t1", "epoch": 2, "value": 0.2})
    log.append({"trial": "t1", "end": True})  # a record without a clock judges nothing
    assert [r[CLOCK_KEY] for r in unseen_reports(run, tmp_path, "t1")] == [3]
    log.append({"trial": "t1", "epoch": 3, "value": 0.3})
    assert unseen_reports(run, tmp_path, "t1") == []


def test_the_cut_off_is_the_restored_checkpoint_not_the_newest_report(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for n in (1, 2, 3):
        _report(run, n, checkpoint=True)
    _restore_from(run, 1)  # checkpoints 2 and 3 were written but never registered
    assert [r[CLOCK_KEY] for r in unseen_reports(run, tmp_path, "t1")] == [1]


def test_a_restored_checkpoint_the_log_does_not_know_gives_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _report(run, 1, checkpoint=False)
    _report(run, 2, checkpoint=False)
    _restore_from(run, 2)
    assert unseen_reports(run, tmp_path, "t1") == []


def test_judgement_compares_the_sweeps_clock_not_the_loops_epoch(tmp_path: Path) -> None:
    run = _run(tmp_path)
    for n in (1, 2, 3):  # the loop counts epochs from 0; the clock from 1
        _report(run, n, checkpoint=True, epoch=n - 1)
    _restore_from(run, 3)
    decision_log(tmp_path).append({"trial": "t1", "epoch": 2, "value": 0.2})
    assert [r["epoch"] for r in unseen_reports(run, tmp_path, "t1")] == [2]


def test_a_report_made_again_after_a_restore_replaces_the_lost_one(tmp_path: Path) -> None:
    run = _run(tmp_path)
    _report(run, 1, checkpoint=True, v="first")
    _report(run, 2, checkpoint=False, v="lost")  # the driver died before its checkpoint
    _report(run, 2, checkpoint=True, v="again")
    _restore_from(run, 1, 2)
    assert [r["v"] for r in unseen_reports(run, tmp_path, "t1")] == ["first", "again"]
