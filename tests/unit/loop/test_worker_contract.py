"""The worker contract without Ray: the config a loop receives, the reads it makes, the trial
clock for every way loops count epochs, and the one outcome rule."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from sweeps.config.usercode import takes_config
from sweeps.driver.unread import unread_keys
from sweeps.loop.worker import ReadLog, TrackedConfig
from sweeps.protocol import CLOCK_FILE, CLOCK_KEY, STEP_KEY
from sweeps.search.outcome import Objective, Verdict, read_verdicts
from sweeps.trial.clock import TrialClock
from sweeps.trial.plan import _EXAMPLE, TrialPlan


@pytest.mark.parametrize(("params", "constants", "sampled", "expected"), [
    ({"lr": 0.1, "hidden": 8}, {}, {"lr": 0.01}, {"lr": 0.01, "hidden": 8}),
    ({"opt": {"lr": 0.1, "b": 1}}, {}, {"opt": {"lr": 0.2}}, {"opt": {"lr": 0.2, "b": 1}}),
    ({"lr": 0.1}, {"model.depth": 2}, {}, {"lr": 0.1, "model": {"depth": 2}}),
    ({}, {}, {"new": 1}, {"new": 1}),  # a loop_defaults key: only the sampled value
    ({"epochs": 4}, {"epochs": 6}, {}, {"epochs": 6}),  # a constant overrides the param
])
def test_the_loop_gets_the_trials_params_flat_and_nothing_else(params, constants, sampled,
                                                              expected) -> None:
    plan = TrialPlan(**{**_EXAMPLE, "params": params, "constants": constants})
    config = plan.worker_config(sampled)
    assert config == expected
    assert "sweep" not in config and "params" not in config


def test_the_sweeps_context_is_separate() -> None:
    ctx = TrialPlan(**_EXAMPLE).context("ab12")
    assert (ctx.trial_id, ctx.max_epochs, ctx.metric) == ("ab12", 9, "val_acc")
    assert ctx.run_dir.endswith("/train/ab12")


@pytest.mark.parametrize(("use", "read"), [
    (lambda c: c["lr"], ["lr"]),
    (lambda c: c.get("lr", 1e-3), ["lr"]),
    (lambda c: c.get("missing", 1), ["missing"]),
    (lambda c: "lr" in c, ["lr"]),
    (lambda c: c["opt"]["beta"], ["opt", "opt.beta"]),
    (lambda c: dict(c), ["hidden", "lr", "opt", "opt.beta"]),  # copying reads everything
    (lambda c: {**c}, ["hidden", "lr", "opt", "opt.beta"]),
    (lambda c: list(c.items()), ["hidden", "lr", "opt", "opt.beta"]),
    (lambda c: None, []),
])
def test_reads_are_tracked(use, read) -> None:
    log = ReadLog(None)
    use(TrackedConfig({"lr": 0.1, "hidden": 8, "opt": {"beta": 0.9}}, log))
    assert sorted(log.keys) == read


def test_reads_are_saved_and_the_config_stays_a_plain_dict(tmp_path) -> None:
    path = tmp_path / "reads.json"
    config = TrackedConfig({"lr": 0.1, "opt": {"beta": 0.9}}, ReadLog(path))
    assert isinstance(config, dict) and config["lr"] == 0.1
    assert json.loads(path.read_text()) == ["lr"]
    for copied in (pickle.loads(pickle.dumps(config)), copy.deepcopy(config), config.copy()):
        assert type(copied) is dict and type(copied["opt"]) is dict
        assert copied == {"lr": 0.1, "opt": {"beta": 0.9}}


@pytest.mark.parametrize(("searched", "read", "unread"), [
    (["lr", "hidden"], ["lr", "hidden", "epochs"], []),
    (["lr", "hidden"], ["lr"], ["hidden"]),
    (["opt.lr"], ["opt"], ["opt.lr"]),  # took the sub-dict but never its lr
    (["opt.lr"], ["opt", "opt.lr"], []),
    (["lr"], [], ["lr"]),
])
def test_unread_searched_keys(searched, read, unread) -> None:
    assert unread_keys(searched, read) == unread


@pytest.mark.parametrize(("fn", "expected"), [
    (lambda config: None, True),
    (lambda config, extra=1: None, True),
    (lambda: None, False),
    (lambda config=None: None, False),  # Ray calls it with no argument: so do we
    (lambda *args: None, True),
])
def test_the_loop_is_called_as_ray_calls_it(fn, expected) -> None:
    assert takes_config(fn) is expected


# (time_attr, reported time attribute per report (None: absent), expected clock, expected step)
CLOCKS = [
    ("epoch", [1, 2, 3], [1, 2, 3], [1, 2, 3]),  # TrialSession: 1-based ints
    ("epoch", [0, 1, 2], [1, 2, 3], [0, 1, 2]),  # Ray's docs: 0-based
    ("epoch", [1.0, 2.0, 3.0], [1, 2, 3], [1, 2, 3]),  # Transformers: floats
    ("epoch", [0.5, 1.0, 1.5], [0.5, 1.0, 1.5], [1, 1, 3]),  # fractional: step = report count
    ("epoch", [None, None, None], [1, 2, 3], [1, 2, 3]),  # no epoch key: report count
    (None, [5, 6, 7], [1, 2, 3], [1, 2, 3]),  # time_attr: null
    ("step", [10, 20, 30], [10, 20, 30], [10, 20, 30]),  # another key
    ("epoch", [1, None, 2], [1, 1, 2], [1, 1, 2]),  # a mid-epoch report without the key
]


@pytest.mark.parametrize(("attr", "values", "clocks", "steps"), CLOCKS)
def test_the_clock_reads_every_way_loops_count(attr, values, clocks, steps) -> None:
    clock = TrialClock(attr)
    out = [clock.stamp({} if v is None else {attr or "epoch": v}) for v in values]
    assert [r[CLOCK_KEY] for r in out] == clocks
    assert [r[STEP_KEY] for r in out] == steps


def test_a_resumed_trial_keeps_its_clock_reading(tmp_path) -> None:
    first = TrialClock.load(tmp_path, "epoch")
    assert first.stamp({"epoch": 0})[CLOCK_KEY] == 1  # 0-based: decided and saved
    assert json.loads((tmp_path / CLOCK_FILE).read_text())["offset"] == 1
    resumed = TrialClock.load(tmp_path, "epoch", reports_before=3)  # from its checkpoint
    assert resumed.stamp({"epoch": 3})[CLOCK_KEY] == 4  # not taken for a 1-based loop
    counted = TrialClock.load(tmp_path / "other", None, reports_before=3)
    assert counted.stamp({"loss": 1})[CLOCK_KEY] == 4  # the report count continues
    replayed = TrialClock.load(tmp_path / "other", None, reports_before=3)
    assert replayed.stamp({}, advance=False)[CLOCK_KEY] == 4 and replayed.count == 3


OUTCOMES = [
    # (clock, verdict, errored, expected)
    (9, None, False, "completed"),
    (6, None, False, "completed"),  # the loop returned on its own before the budget
    (3, Verdict(stopped_at=3), False, "stopped"),
    (9, Verdict(stopped_at=9), False, "completed"),  # ASHA's STOP at max_t
    (9.0, Verdict(stopped_at=9.0), False, "completed"),  # float epochs
    (2, Verdict(stopped_at=2, error="never reported val_acc"), False, "error"),
    (4, None, True, "error"),
]


@pytest.mark.parametrize(("clock", "verdict", "errored", "expected"), OUTCOMES)
def test_one_outcome_rule(clock, verdict, errored, expected) -> None:
    assert Objective("val_acc", "max", 9).outcome(clock, verdict, errored) == expected


def test_verdicts_come_from_the_scheduler_log() -> None:
    records = [{"trial": "a", "epoch": 1, "action": "CONTINUE", "value": 0.5},
               {"trial": "a", "epoch": 3, "action": "STOP", "value": 0.6},
               {"trial": "a", "end": True},
               {"trial": "b", "epoch": 1, "action": "STOP", "error": "never reported val_acc"}]
    verdicts = read_verdicts(records)
    assert verdicts["a"] == Verdict(stopped_at=3)
    assert verdicts["b"].error == "never reported val_acc"


@pytest.mark.parametrize(("mode", "value", "judged"), [
    ("max", float("nan"), -1e300), ("min", float("nan"), 1e300), ("max", float("inf"), -1e300),
    ("max", "high", -1e300), ("max", 0.5, 0.5), ("min", None, None),
])
def test_non_finite_metrics_are_judged_worst(mode, value, judged) -> None:
    assert Objective("m", mode, 9).judged(value) == judged
