"""Growing a sweep in place (``sweeps.resume.grow``): which changes grow it, which are refused,
and which ended trials a larger ``scheduler.max_t`` continues."""

from __future__ import annotations

import json

import pytest

from sweeps import compose
from sweeps.config.overrides import quote_search_space
from sweeps.config.schema import to_config
from sweeps.errors import ConfigError
from sweeps.resume.grow import Growth, apply_growth, identity_changes, plan_growth
from sweeps.resume.state import decide_resume, load_record, new_record, save_record
from sweeps.search.decisions import decision_log, ended_ids
from sweeps.search.outcome import read_verdicts
from sweeps.search.space import parse_space
from sweeps.tracking.target import TrackingTarget

STORE = TrackingTarget("sqlite:////a/mlflow.db", "default", "digits", "experiment.name")
OLD = {"search.num_samples": "8", "scheduler.max_t": "9", "sweep.seed": "0",
       "experiment.search_space.lr": "log-uniform [0.0001, 0.5]"}


@pytest.mark.parametrize(("changed", "grown"), [
    ({}, {}),
    ({"search.num_samples": "12"}, {"search.num_samples": (8, 12)}),
    ({"scheduler.max_t": "27"}, {"scheduler.max_t": (9, 27)}),
    ({"search.num_samples": "9", "scheduler.max_t": "10"},
     {"search.num_samples": (8, 9), "scheduler.max_t": (9, 10)}),
])
def test_a_larger_num_samples_or_max_t_grows(tmp_path, changed, grown) -> None:
    assert identity_changes(OLD, {**OLD, **changed}, tmp_path) == grown


@pytest.mark.parametrize(("changed", "key", "words"), [
    ({"search.num_samples": "4"}, "search.num_samples", "is smaller than in the sweep being "
                                                        "resumed"),
    ({"scheduler.max_t": "3"}, "scheduler.max_t", "is smaller than in the sweep being resumed"),
    # the space is compared before the grown key, and names itself, not the growth
    ({"search.num_samples": "12", "experiment.search_space.lr": "uniform [0.1, 0.5]"},
     "experiment.search_space.lr", "grows in place only by a larger search.num_samples"),
    ({"sweep.seed": "1"}, "sweep.seed", "differs from the sweep being resumed"),
    ({"experiment.metric": "val_loss"}, "experiment.metric", "differs from the sweep"),
])
def test_shrinking_or_changing_anything_else_is_refused_naming_the_key(
        tmp_path, changed, key, words) -> None:
    with pytest.raises(ConfigError) as info:
        identity_changes(OLD, {**OLD, **changed}, tmp_path)
    assert info.value.key == key and words in str(info.value)
    assert "sweep.name=NEW" in info.value.fix and "\n" not in str(info.value)


def _judged(trial, epoch, value, action="CONTINUE"):
    return {"trial": trial, "epoch": epoch, "value": value, "action": action, "metrics": {}}


def _end(trial, epoch=None, value=None):
    return {"trial": trial, "end": True, "metrics": {},
            **({"epoch": epoch, "value": value} if epoch is not None else {})}


# scheduler=none, max_t 3 -> 6: a and b trained 3 epochs; c's loop returned after 2 (its own
# epoch count); d failed. Only a and b continue.
FIFO_LOG = [_judged("a", 1, .5), _judged("b", 1, .6), _judged("a", 2, .6), _judged("b", 2, .7),
            _judged("c", 1, .4), _judged("c", 2, .5), _end("c"),
            _judged("a", 3, .7, "STOP"), _end("a"), _judged("b", 3, .8, "STOP"), _end("b"),
            {"trial": "d", "epoch": 3, "error": "never reported val_acc", "action": "STOP"}]
# ASHA (grace 1, rf 3), max_t 3 -> 9: rungs 1, 3 -> 1, 3, 9. The rung at 3 was never recorded
# (a result at max_t stops without being recorded); replayed with max_t 9, the trials that
# reached 3 are judged there in the order they arrived: the first always passes.
ASHA_RISING = [_judged("a", 1, .5), _judged("c", 1, .6), _judged("e", 1, .1, "STOP"),
               _judged("a", 3, .7, "STOP"), _judged("c", 3, .9, "STOP")]
ASHA_FALLING = [_judged("c", 1, .6), _judged("a", 1, .5), _judged("e", 1, .1, "STOP"),
                _judged("c", 3, .9, "STOP"), _judged("a", 3, .7, "STOP")]


@pytest.mark.parametrize(("scheduler", "log", "max_t", "reopened", "stay"), [
    ("none", FIFO_LOG, (3, 6), ["a", "b"], []),
    ("asha", ASHA_RISING, (3, 9), ["a", "c"], []),   # .9 >= cutoff(.7): both pass rung 3
    ("asha", ASHA_FALLING, (3, 9), ["c"], ["a"]),    # .7 < cutoff(.9): a stops at rung 3
    ("asha", ASHA_RISING + [{"trial": "a", "reopen": True}], (3, 9), ["c"], []),  # reopened
])
def test_a_larger_max_t_continues_the_trials_that_trained_the_old_one(
        scheduler, log, max_t, reopened, stay) -> None:
    cfg = to_config(compose("digits", [f"scheduler={scheduler}", f"scheduler.max_t={max_t[1]}",
                                       "scheduler.reduction_factor=3",
                                       "scheduler.grace_period=1"]))
    growth = plan_growth(cfg, {"scheduler.max_t": max_t}, log, kept=5)
    assert (growth.reopened, growth.stay_stopped) == (reopened, stay)
    assert "e" not in growth.reopened  # stopped early by ASHA: stays stopped


@pytest.mark.parametrize(("key", "old", "new"), [("scheduler.max_t", 9, 12),
                                                 ("search.num_samples", 8, 10)])
def test_a_pbt_sweep_does_not_grow(key, old, new) -> None:
    cfg = to_config(compose("digits", ["scheduler=pbt", f"{key}={new}"]))
    with pytest.raises(ConfigError, match=f"{key}: {new} cannot grow a scheduler=pbt") as e:
        plan_growth(cfg, {key: (old, new)}, [], kept=8)
    assert f"{key}={old}" in e.value.fix


@pytest.mark.parametrize(("growth", "line"), [
    (Growth({"search.num_samples": (4, 6)}, kept=4), "grow: 4 trials kept, 2 new"),
    (Growth({"search.num_samples": (4, 6), "scheduler.max_t": (3, 5)}, kept=4,
            reopened=list("abcd")),
     "grow: 4 trials kept, 2 new; 4 trials continue from epoch 3 to 5"),
    (Growth({"scheduler.max_t": (3, 9)}, kept=3, reopened=["c"], stay_stopped=["a"]),
     "grow: 3 trials kept, 0 new; 1 trial continues from epoch 3 to 9; 1 that reached epoch 3 "
     "stops there (ASHA's rung at epoch 3, recomputed for max_t 9); trials ASHA stopped "
     "earlier stay stopped"),
])
def test_the_plan_line_says_what_will_run(growth, line) -> None:
    assert growth.describe() == line


def test_reopen_records_undo_the_end_for_every_reader() -> None:
    log = FIFO_LOG + [{"trial": "a", "reopen": True}]
    assert ended_ids(log) == {"b", "c", "d"}
    assert "a" not in read_verdicts(log) and read_verdicts(log)["b"].stopped_at == 3


def _sweep(tmp_path, *overrides):
    args = quote_search_space([f"sweep.dir={tmp_path / 'sw'}", "scheduler=none",
                               "scheduler.max_t=3", *overrides])
    cfg = to_config(compose("digits", args))
    return cfg, parse_space(cfg.experiment.search_space)[0]


def _state(status_by_trial):
    return {"runner_data": {}, "trial_data": [
        [json.dumps({"trial_id": t, "status": s, "config": {"x": 1}}), "{}"]
        for t, s in status_by_trial.items()]}


def test_resume_plans_and_applies_the_growth_in_a_durable_order(tmp_path) -> None:
    cfg, params = _sweep(tmp_path, "search.num_samples=4")
    record = new_record(cfg, params, STORE)
    save_record(tmp_path / "sw", record)
    state = tmp_path / "sw" / "experiment_state-2026-01-01_00-00-00.json"
    state.write_text(json.dumps(_state({"a": "TERMINATED", "b": "TERMINATED", "c": "TERMINATED",
                                        "d": "ERROR"})))
    for r in FIFO_LOG:
        decision_log(tmp_path / "sw").append(r)
    cfg, params = _sweep(tmp_path, "search.num_samples=6", "scheduler.max_t=5")
    found = decide_resume(cfg, params, tmp_path / "sw")
    assert found.growth.describe() == ("grow: 4 trials kept, 2 new; 2 trials continue from "
                                       "epoch 3 to 5")
    apply_growth(tmp_path / "sw", found.growth, found.record, resuming=True)
    statuses = {json.loads(e[0])["trial_id"]: json.loads(e[0])["status"]
                for e in json.loads(state.read_text())["trial_data"]}
    assert statuses == {"a": "PAUSED", "b": "PAUSED", "c": "TERMINATED", "d": "ERROR"}
    assert ended_ids(decision_log(tmp_path / "sw").records()) == {"c", "d"}
    # not saved yet (the caller saves it last): the same command plans the rest again
    again = decide_resume(cfg, params, tmp_path / "sw")  # the same line, the same trials
    assert again.growth.describe() == found.growth.describe()
    assert again.growth.reopened == ["a", "b"]
    save_record(tmp_path / "sw", found.record)
    saved = load_record(tmp_path / "sw")
    assert saved.identity["search.num_samples"] == "6" and saved.identity["scheduler.max_t"] == "5"
    assert saved.growth == [{"start": 1, "search.num_samples": [4, 6], "scheduler.max_t": [3, 5]}]
    assert decide_resume(cfg, params, tmp_path / "sw").growth is None  # grown: resumes as is


def test_a_grid_sweep_with_another_num_samples_says_nothing_is_added(tmp_path) -> None:
    cfg, params = _sweep(tmp_path, "search=grid", "search.num_samples=4")
    record = new_record(cfg, params, STORE)
    record.starts = 1
    save_record(tmp_path / "sw", record)
    (tmp_path / "sw" / "config.yaml").write_text("search:\n  num_samples: 4\n")
    cfg, params = _sweep(tmp_path, "search=grid", "search.num_samples=10")
    found = decide_resume(cfg, params, tmp_path / "sw")
    assert found.growth is None
    assert found.notes == ["search=grid: search.num_samples (4 -> 10) does not apply to a grid, "
                           "whose every point runs once; growing it adds no trial (extend the "
                           "grid's choice(...)/range(...) values in a new sweep instead)"]


def _mo(trial, epoch, acc, params, action="CONTINUE"):
    return {**_judged(trial, epoch, acc, action), "values": {"val_acc": acc, "n_params": params}}


@pytest.mark.parametrize(("log", "reopened", "stay"), [
    # c dominates a (more accurate and smaller); the first at the rung passes, then rank 0 of 2
    # passes (0 * 3 <= 2) and rank 1 does not (3 > 2)
    ([_mo("a", 1, .5, 900), _mo("c", 1, .6, 800), _mo("c", 3, .9, 700, "STOP"),
      _mo("a", 3, .7, 900, "STOP")], ["c"], ["a"]),
    ([_mo("a", 1, .5, 900), _mo("c", 1, .6, 800), _mo("a", 3, .7, 900, "STOP"),
      _mo("c", 3, .9, 700, "STOP")], ["a", "c"], []),
    # neither dominates: one front, ordered by the epsilon-net from the best primary (c), so a
    # ranks 1 of 2 and stops as a dominated one would
    ([_mo("a", 1, .5, 900), _mo("c", 1, .6, 800), _mo("c", 3, .9, 900, "STOP"),
      _mo("a", 3, .7, 100, "STOP")], ["c"], ["a"]),
])
def test_under_mo_asha_the_recomputed_rung_sorts_by_every_objective(log, reopened, stay) -> None:
    cfg = to_config(compose("digits_multiobjective", ["scheduler=asha", "scheduler.max_t=9",
                                                      "scheduler.reduction_factor=3",
                                                      "scheduler.grace_period=1"]))
    growth = plan_growth(cfg, {"scheduler.max_t": (3, 9)}, log, kept=2)
    assert (sorted(growth.reopened), growth.stay_stopped) == (reopened, stay)
