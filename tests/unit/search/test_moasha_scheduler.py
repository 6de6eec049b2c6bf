"""``ResumableMOASHA``: its decision log replays to the same rungs and the same later decisions,
every objective is logged and screened, and ``make_scheduler`` builds it for several objectives.

Results are fed to the scheduler the way the Tune controller does (no cluster needed).
"""

from __future__ import annotations

import json
import math
import pickle
import random

import pytest

from sweeps import compose
from sweeps.driver.tuner import make_scheduler
from sweeps.protocol import CLOCK_KEY
from sweeps.search.decisions import decision_log
from sweeps.search.moasha_scheduler import ResumableMOASHA
from sweeps.search.outcome import WORST, Objective
from sweeps.search.schedulers import ResumableASHA, ResumableFIFO, ended_trials, verdicts

OBJECTIVES = {"val_acc": "max", "n_params": "min"}


class Trial:
    """The two attributes Tune's schedulers read from a trial."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id, self.last_result = trial_id, {}


def _moasha(directory, objectives=None):
    s = ResumableMOASHA(directory, Objective("val_acc", "max", 9), objectives or OBJECTIVES,
                        grace_period=1, reduction_factor=3)
    s.set_search_properties("val_acc", "max")
    return s


def _results(seed: int, trials: int = 12, max_t: int = 9):
    """An interleaved stream of (trial, epoch, result), as concurrent trials produce it: bigger
    models learn a little better, so the two objectives trade off."""
    rng = random.Random(seed)
    size = {f"t{i}": rng.choice([600, 2000, 9000, 40000, 200000]) for i in range(trials)}
    skill = {t: rng.random() * 0.6 + 0.1 * math.log10(size[t]) / 5 for t in size}
    pending, stream = dict.fromkeys(size, 1), []
    while pending:
        t = rng.choice(sorted(pending))
        epoch = pending[t]
        acc = skill[t] * (1 - 0.5 ** epoch) + rng.gauss(0, 0.02)
        stream.append((t, epoch, {CLOCK_KEY: epoch, "val_acc": acc, "n_params": size[t]}))
        pending[t] = epoch + 1
        if epoch == max_t:
            del pending[t]
    return stream


def _drive(scheduler, stream, stopped, rename=None):
    decisions = []
    for trial_id, epoch, result in stream:
        if trial_id in stopped:
            continue
        trial = Trial(trial_id)
        scheduler.on_trial_add(None, trial)
        result = rename(result) if rename else dict(result)
        trial.last_result = result
        action = scheduler.on_trial_result(None, trial, result)
        decisions.append((trial_id, epoch, action))
        if action == "STOP" or epoch == 9:
            stopped.add(trial_id)
            scheduler.on_trial_complete(None, trial, result)
    return decisions


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_a_restored_moasha_makes_the_uninterrupted_decisions(tmp_path, seed) -> None:
    stream = _results(seed)
    whole = _drive(_moasha(tmp_path / "a"), stream, set())
    stops = [d for d in whole if d[2] == "STOP" and d[1] < 9]
    assert stops and any(a == "CONTINUE" for *_, a in whole)
    cut = random.Random(seed).randrange(len(stream) // 4, 3 * len(stream) // 4)
    stopped: set[str] = set()
    first = _drive(_moasha(tmp_path / "b"), stream[:cut], stopped)
    restored = pickle.loads(pickle.dumps(_moasha(tmp_path / "b")))  # as Tune restores it
    rest = _drive(restored, stream[cut:], stopped)
    assert first + rest == whole
    uninterrupted = _moasha(tmp_path / "c")
    _drive(uninterrupted, stream, set())
    assert restored.rungs() == uninterrupted.rungs()
    assert set(ended_trials(tmp_path / "b")) == stopped


def test_without_the_log_a_restored_moasha_decides_otherwise(tmp_path) -> None:
    """What the replay is for: rungs rebuilt empty re-decide from scratch."""
    differ = 0
    for seed in range(6):
        stream = _results(seed)
        whole = _drive(_moasha(tmp_path / f"a{seed}"), stream, set())
        cut = len(stream) // 2
        stopped: set[str] = set()
        first = _drive(_moasha(tmp_path / f"b{seed}"), stream[:cut], stopped)
        rest = _drive(_moasha(tmp_path / f"c{seed}"), stream[cut:], stopped)
        differ += first + rest != whole
    assert differ >= 3, differ


def test_every_decision_is_logged_with_every_objective(tmp_path) -> None:
    stream = _results(0)
    decisions = _drive(_moasha(tmp_path), stream, set())
    records = decision_log(tmp_path).records()
    judged = [r for r in records if "action" in r]
    assert [(r["trial"], r["epoch"], r["action"]) for r in judged] == decisions
    for r in judged:
        assert set(r["values"]) == set(OBJECTIVES)
        assert r["value"] == r["values"]["val_acc"]
    stopped = {d[0]: d[1] for d in decisions if d[2] == "STOP" and d[1] < 9}
    assert {t: v.stopped_at for t, v in verdicts(tmp_path).items()
            if v.stopped_at is not None and v.stopped_at < 9} == stopped


def test_mixed_directions_follow_each_objectives_mode(tmp_path) -> None:
    """n_params min decides as its negation under max: each objective is signed by its mode."""
    stream = _results(3)
    as_min = _drive(_moasha(tmp_path / "a"), stream, set())

    def negated(result):
        return {CLOCK_KEY: result[CLOCK_KEY], "val_acc": result["val_acc"],
                "neg_params": -result["n_params"]}

    as_max = _drive(_moasha(tmp_path / "b", {"val_acc": "max", "neg_params": "max"}), stream,
                    set(), negated)
    assert as_min == as_max
    wrong_way = _drive(_moasha(tmp_path / "c", {"val_acc": "max", "n_params": "max"}), stream,
                       set())
    assert wrong_way != as_min


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("metric", ["val_acc", "n_params"])
def test_a_non_finite_objective_is_the_worst_on_every_objective(tmp_path, bad, metric) -> None:
    s = _moasha(tmp_path)
    good = {CLOCK_KEY: 1, "val_acc": 0.1, "n_params": 10**6}
    assert s.on_trial_result(None, Trial("a"), good) == "CONTINUE"
    spoiled = {CLOCK_KEY: 1, "val_acc": 0.99, "n_params": 10, metric: bad}
    assert s.on_trial_result(None, Trial("b"), spoiled) == "STOP"
    record = decision_log(tmp_path).records()[-1]
    assert record["values"] == {"val_acc": -WORST, "n_params": WORST}
    assert record["metrics"][metric] is None  # the raw report: non-finite kept as null
    assert _moasha(tmp_path).rungs()[-1][1]["b"] == (-WORST, -WORST)  # replayed as judged


@pytest.mark.parametrize("result, missing, reported", [
    ({CLOCK_KEY: 1, "val_acc": 0.5, "train_loss": 0.3}, "n_params", "train_loss, val_acc"),
    ({CLOCK_KEY: 1, "val_acc": 0.5, "eval_n_params": 9}, "n_params", "did you mean eval_n_params"),
    ({CLOCK_KEY: 1, "n_params": 9, "acc": 0.5}, "val_acc", "acc, n_params"),
])
def test_an_objective_never_reported_fails_the_trial_naming_what_it_reported(
        tmp_path, result, missing, reported) -> None:
    s = _moasha(tmp_path)
    assert s.on_trial_result(None, Trial("a"), result) == "STOP"
    error = verdicts(tmp_path)["a"].error
    assert f"never reported {missing}" in error and reported in error


def test_a_result_without_an_objective_is_judged_with_its_last_reported_value(tmp_path) -> None:
    """A loop that reports n_params once (it does not change) is still judged at later rungs,
    with that value; a result without the primary is not (a loop that never reports an
    objective is failed by the screen, test above)."""
    s = _moasha(tmp_path)
    trial = Trial("a")
    assert s.on_trial_result(None, trial, {CLOCK_KEY: 1, "val_acc": 0.5,
                                           "n_params": 9}) == "CONTINUE"
    assert s.on_trial_result(None, trial, {CLOCK_KEY: 2, "val_acc": 0.5}) == "CONTINUE"
    assert s.on_trial_result(None, trial, {CLOCK_KEY: 3, "val_acc": 0.6}) == "CONTINUE"
    assert s.rungs()[1][1] == {"a": (0.6, -9.0)}  # rung 3: the last n_params, carried
    assert s.on_trial_result(None, trial, {CLOCK_KEY: 4, "n_params": 9}) == "CONTINUE"
    logged = [r for r in decision_log(tmp_path).records() if r.get("epoch") == 3]
    assert logged[0]["values"] == {"val_acc": 0.6, "n_params": 9}  # replayable as judged
    assert not verdicts(tmp_path)


def test_make_scheduler_builds_moasha_for_several_objectives(tmp_path) -> None:
    cfg = compose("digits_multiobjective", ["scheduler=asha", "scheduler.max_t=9"])
    s = make_scheduler(cfg, tmp_path / "mo", [])
    assert isinstance(s, ResumableMOASHA)
    assert (s.metric, s._modes) == ("val_acc", {"val_acc": "max", "n_params": "min"})
    assert [m for m, _ in s.rungs()] == [9, 3, 1]
    assert type(make_scheduler(compose("digits"), tmp_path / "one", [])) is ResumableASHA
    assert type(make_scheduler(compose("digits_multiobjective", ["scheduler=none"]),
                               tmp_path / "fifo", [])) is ResumableFIFO
    with pytest.raises(ValueError, match="does not hold the primary"):
        ResumableMOASHA(tmp_path, Objective("loss", "min", 9), OBJECTIVES)


@pytest.mark.parametrize("first", [
    {CLOCK_KEY: 0, "n_params": 9},  # reported before the first evaluation, never judged
    {CLOCK_KEY: 1, "val_acc": float("nan"), "n_params": 9},  # judged as the worst
])
def test_a_restarted_scheduler_carries_the_same_values_as_the_live_one(tmp_path, first) -> None:
    """What a later judgement carries is logged as reported (a NaN too), so the scheduler a
    resume rebuilds from the log decides as the one that ran."""
    live, trial = _moasha(tmp_path / "live"), Trial("a")
    live.on_trial_result(None, trial, dict(first))
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "state").mkdir()
    (tmp_path / "copy" / "state" / "scheduler.jsonl").write_bytes(
        (tmp_path / "live" / "state" / "scheduler.jsonl").read_bytes())
    restored = _moasha(tmp_path / "copy")
    later = {CLOCK_KEY: 3, "val_acc": 0.6}
    assert restored.on_trial_result(None, trial, dict(later)) == live.on_trial_result(
        None, trial, dict(later))
    assert restored.rungs()[1][1] == live.rungs()[1][1] == {"a": (0.6, -9.0)}
    assert json.dumps(restored._last_each) == json.dumps(live._last_each)  # NaN == NaN here
