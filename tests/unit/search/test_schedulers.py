"""The scheduler's decision log: a restored ASHA decides exactly as the uninterrupted one, and
our rungs (``sweeps.search.asha``) decide exactly as Ray's own ASHA.

Results are fed to ``on_trial_result`` the way the Tune controller does (no cluster needed).
Ray's private ``_Bracket`` and its ``ASHAScheduler`` serve here as the oracle only.
"""

from __future__ import annotations

import json
import math
import pickle
import random
import warnings

import numpy as np
import pytest
from ray.tune.schedulers import ASHAScheduler
from ray.tune.schedulers.async_hyperband import _Bracket

from sweeps.errors import ConfigError
from sweeps.protocol import CLOCK_KEY
from sweeps.search.asha import AsyncHalving, percentile
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import ResumableASHA, ResumableFIFO, ended_trials, verdicts
from tests.unit.ray_adapter.staged import StagedController


class Trial:
    """The two attributes Tune's schedulers read from a trial."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id, self.last_result = trial_id, {}


def _results(seed: int, trials: int = 10, max_t: int = 9):
    """An interleaved stream of (trial, epoch, val_acc), as concurrent trials produce it."""
    rng = random.Random(seed)
    quality = {f"t{i}": rng.random() for i in range(trials)}
    pending = {t: 1 for t in quality}
    stream = []
    while pending:
        t = rng.choice(sorted(pending))
        epoch = pending[t]
        stream.append((t, epoch, quality[t] * (1 - 0.5 ** epoch) + rng.gauss(0, 0.02)))
        pending[t] = epoch + 1
        if epoch == max_t:
            del pending[t]
    return stream


def _asha(directory):
    s = ResumableASHA(directory, Objective("val_acc", "max", 9), grace_period=1,
                      reduction_factor=3)
    s.set_search_properties("val_acc", "max")
    return s


def _drive(scheduler, stream, trials, stopped):
    decisions = []
    for trial_id, epoch, value in stream:
        if trial_id in stopped:
            continue
        if trial_id not in trials:
            trials[trial_id] = Trial(trial_id)
            scheduler.on_trial_add(None, trials[trial_id])
        trial = trials[trial_id]
        result = {CLOCK_KEY: epoch, "val_acc": value}
        trial.last_result = result
        action = scheduler.on_trial_result(None, trial, result)
        decisions.append((trial_id, epoch, action))
        if action == "STOP" or epoch == 9:
            stopped.add(trial_id)
            scheduler.on_trial_complete(None, trial, result)
    return decisions


def stopped_at(decisions):
    return {t for t, epoch, a in decisions if a == "STOP" or epoch == 9}


@pytest.mark.parametrize("seed", [0, 1, 2, 5])
def test_restored_asha_makes_the_uninterrupted_decisions(tmp_path, seed) -> None:
    stream = _results(seed)
    whole = _drive(_asha(tmp_path / "a"), stream, {}, set())
    assert any(a == "STOP" for *_, a in whole) and any(a == "CONTINUE" for *_, a in whole)
    cut = random.Random(seed).randrange(len(stream) // 4, 3 * len(stream) // 4)
    stopped: set[str] = set()
    first = _drive(_asha(tmp_path / "b"), stream[:cut], {}, stopped)
    restored = _asha(tmp_path / "b")  # a new process: only the log on disk carries over
    rest = _drive(restored, stream[cut:], {}, stopped)
    assert first + rest == whole
    upstream_rungs = _asha(tmp_path / "c")
    _drive(upstream_rungs, stream, {}, set())
    assert restored.rungs() == upstream_rungs.rungs()


def test_without_the_log_a_restored_asha_decides_otherwise(tmp_path) -> None:
    """What the log fixes: upstream Tune restores ASHA with empty rungs (ray#30838)."""
    differ = 0
    for seed in range(10):
        stream = _results(seed)
        whole = _drive(_asha(tmp_path / f"a{seed}"), stream, {}, set())
        cut = random.Random(seed).randrange(len(stream) // 4, 3 * len(stream) // 4)
        first = _drive(_asha(tmp_path / f"b{seed}"), stream[:cut], {}, set())
        amnesiac = _asha(tmp_path / f"c{seed}")  # a fresh log: nothing to replay
        rest = _drive(amnesiac, stream[cut:], {}, stopped_at(first))
        differ += first + rest != whole
    assert differ >= 5, differ


def test_a_trial_that_ended_before_the_crash_is_stopped_on_its_re_report(tmp_path) -> None:
    stream = _results(3)
    stopped: set[str] = set()
    decisions = _drive(_asha(tmp_path), stream, {}, stopped)
    ended = ended_trials(tmp_path)
    assert set(ended) == stopped
    trial_id, epoch, _ = next(d for d in decisions if d[2] == "STOP")
    assert ended[trial_id][CLOCK_KEY] == epoch
    restored = _asha(tmp_path)
    trial = Trial(trial_id)
    restored.on_trial_add(None, trial)
    assert restored.on_trial_result(None, trial, dict(ended[trial_id])) == "STOP"


def test_fifo_logs_ends_for_resume(tmp_path) -> None:
    fifo = ResumableFIFO(tmp_path, Objective("val_acc", "max", 9))
    trial = Trial("t0")
    for epoch in (1, 2):
        assert fifo.on_trial_result(None, trial, {CLOCK_KEY: epoch, "val_acc": 0.5}) == "CONTINUE"
    fifo.on_trial_complete(None, trial, {CLOCK_KEY: 2, "val_acc": 0.5})
    assert ended_trials(tmp_path) == {"t0": {CLOCK_KEY: 2, "val_acc": 0.5}}
    again = ResumableFIFO(tmp_path, Objective("val_acc", "max", 9))
    assert again.on_trial_result(None, trial, {CLOCK_KEY: 2, "val_acc": 0.5}) == "STOP"


# --- Our rungs against Ray's (the oracle) -------------------------------------------------------

# (max_t, grace_period, reduction_factor, stop_last_trials): a rung at max_t (9/1/3) and none
# where Ray's float rung count falls short (1000/1/10: log quotient 2.9999999999999996), float
# factors, a single rung, and both stop_last_trials behaviours.
SETTINGS = [(9, 1, 3, True), (9, 1, 3, False), (10, 2, 2, True), (27, 1, 3, False),
            (100, 1, 4, True), (1000, 1, 10, False), (20, 3, 2.5, True), (5, 5, 2, True),
            (16, 1, 2, False), (12, 1, 1.5, False)]
TIES = [0.1, 0.2, 0.2, 0.3, 0.5, 0.5]  # a few values, often equal: ties at the cutoff
ODD = [math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0, -0.0]


def _value(rng: random.Random) -> float:
    roll = rng.random()
    return rng.choice(ODD) if roll < 0.1 else rng.choice(TIES) if roll < 0.6 else rng.random()


def _stream(rng: random.Random, max_t: float) -> list[tuple[str, float, float]]:
    """Interleaved (trial, clock, value): clocks that skip rungs, repeat, pass max_t; a trial
    may end early (its loop returned)."""
    steps = [0, 1, 1, 1, 2, 3, max(1, int(max_t) // 7)]
    last = {f"t{i}": rng.randint(1, 3) for i in range(rng.randint(2, 12))}
    clock = {t: 0 for t in last}
    ends = {t: rng.choice([max_t, max_t, max_t + 2, rng.randint(1, int(max_t))]) for t in last}
    out = []
    while clock:
        t = rng.choice(sorted(clock))
        clock[t] = max(clock[t] + rng.choice(steps), last.pop(t, 0)) or 1
        out.append((t, clock[t], _value(rng)))
        if clock[t] >= ends[t]:
            del clock[t]
    return out


def _same(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isnan(a) and math.isnan(b))


def _rung_values(rungs) -> list[tuple[float, dict[str, str]]]:
    return [(m, {t: repr(v) for t, v in r.items()}) for m, r in rungs]  # NaN == NaN, 0.0 != -0.0


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_async_halving_decides_as_rays_bracket(setting) -> None:
    """60 random streams per setting (600 in all, ~62,000 results, ~1,000 of them equal to the
    cutoff they meet): every decision, every rung and every cutoff is Ray's; raw NaN/inf values
    included (the screen normally maps them to +-1e300, also included)."""
    max_t, grace, rf, stop_last = setting
    warnings.simplefilter("ignore", RuntimeWarning)  # numpy: "All-NaN slice encountered"
    for seed in range(60):
        rng = random.Random(f"{setting}-{seed}")
        ours = AsyncHalving(grace, max_t, rf, stop_last)
        ray = _Bracket(min_t=grace, max_t=max_t, reduction_factor=rf, s=0,
                       stop_last_trials=stop_last)
        assert [m for m, _ in ours.rungs()] == [m for m, _ in ray._rungs]
        for trial_id, clock, value in _stream(rng, max_t):
            expected = ray.on_result(Trial(trial_id), clock, value) == "STOP"
            assert ours.on_result(trial_id, clock, value) == expected, (seed, trial_id, clock)
            assert _rung_values(ours.rungs()) == _rung_values(ray._rungs), seed
        for (_, recorded), (_, theirs) in zip(ours.rungs(), ray._rungs, strict=True):
            assert _same(ours.cutoff(recorded), ray.cutoff(theirs))


def test_rung_milestones_are_rays_on_a_grid() -> None:
    for max_t in range(1, 130):
        for grace in range(1, min(max_t, 8) + 1):
            for rf in (2, 3, 4, 10, 1.5, 2.5, math.e):
                ours = [m for m, _ in AsyncHalving(grace, max_t, rf).rungs()]
                ray = [m for m, _ in _Bracket(grace, max_t, rf, 0)._rungs]
                assert ours == ray, (max_t, grace, rf)


def test_percentile_is_numpys_nanpercentile() -> None:
    rng = random.Random(7)
    warnings.simplefilter("ignore", RuntimeWarning)
    for _ in range(5000):
        values = [_value(rng) for _ in range(rng.randint(1, 9))]
        pct = (1 - 1 / rng.choice([2, 3, 4, 2.5, 1.5, 10, 1e17])) * 100
        assert _same(percentile(values, pct), float(np.nanpercentile(values, pct))), values


@pytest.mark.parametrize(
    ("values", "rf", "cutoff"),
    [([0.5], 3, 0.5), ([0.5, 0.5, 0.5], 3, 0.5), ([1.0, 2.0, 4.0], 2, 2.0),
     ([1.0, 2.0, 3.0, 4.0], 4, 3.25), ([math.nan, 1.0, 3.0], 2, 2.0), ([math.nan], 3, math.nan),
     ([-1e300, 0.2, 0.4], 3, 0.2 + 0.2 / 3), ([], 3, None)],
)
def test_cutoff_table(values, rf, cutoff) -> None:
    """The (1 - 1/rf) quantile of a rung's values, NaN left out (None for an empty rung)."""
    got = AsyncHalving(1, 9, rf).cutoff({f"t{i}": v for i, v in enumerate(values)})
    assert got == (cutoff if cutoff is None else pytest.approx(cutoff, nan_ok=True))


def test_a_value_equal_to_the_cutoff_continues() -> None:
    halving = AsyncHalving(1, 9, 2)
    for trial_id, value in [("a", 0.2), ("b", 0.4), ("c", 0.2)]:
        halving.on_result(trial_id, 1, value)
    assert halving.cutoff(halving.rungs()[-1][1]) == 0.2  # the median of 0.2, 0.2, 0.4
    assert halving.judge("d", 1, 0.2) is False and halving.judge("e", 1, 0.19) is True
    assert halving.judge("f", 9, 1.0) is True  # the budget


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"grace_period": 0, "max_t": 9, "reduction_factor": 3}, "scheduler.grace_period"),
    ({"grace_period": 10, "max_t": 9, "reduction_factor": 3}, "scheduler.grace_period"),
    ({"grace_period": 1, "max_t": 9, "reduction_factor": 1}, "scheduler.reduction_factor"),
    ({"grace_period": 1, "max_t": 0, "reduction_factor": 3}, "scheduler.max_t"),
])
def test_bad_settings_name_the_key(kwargs, key) -> None:
    with pytest.raises(ConfigError, match=key):
        AsyncHalving(**kwargs)


def _ray_drive(ray: ASHAScheduler, stream, objective: Objective, ends: dict[str, float]):
    """Ray's own ASHA fed the screened values (what ours judges after its screen)."""
    trials, stopped, decisions = {}, set(), []
    for trial_id, clock, value in stream:
        if trial_id in stopped:
            continue
        if trial_id not in trials:
            trials[trial_id] = Trial(trial_id)
            ray.on_trial_add(None, trials[trial_id])
        result = {CLOCK_KEY: clock, objective.metric: objective.judged(value)}
        action = ray.on_trial_result(None, trials[trial_id], result)
        decisions.append((trial_id, clock, action))
        if action == "STOP" or clock >= ends[trial_id]:
            stopped.add(trial_id)
            ray.on_trial_complete(None, trials[trial_id], result)
    return decisions


def _our_drive(scheduler, stream, objective, ends, stopped):
    trials: dict[str, Trial] = {}
    decisions = []
    for trial_id, clock, value in stream:
        if trial_id in stopped:
            continue
        if trial_id not in trials:
            trials[trial_id] = Trial(trial_id)
            scheduler.on_trial_add(None, trials[trial_id])
        result = {CLOCK_KEY: clock, objective.metric: value}
        action = scheduler.on_trial_result(None, trials[trial_id], result)
        decisions.append((trial_id, clock, action))
        if action == "STOP" or clock >= ends[trial_id]:
            stopped.add(trial_id)
            scheduler.on_trial_complete(None, trials[trial_id], result)
    return decisions


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_resumable_asha_decides_as_rays_asha_across_a_restore(tmp_path, setting) -> None:
    """6 streams per setting (60 in all), half of them minimising, each cut at a random point
    and resumed by a new scheduler from the log alone: the decisions and the final rungs are
    those of Ray's ``ASHAScheduler`` run through uninterrupted."""
    max_t, grace, rf, stop_last = setting
    for seed in range(6):
        rng = random.Random(f"sched-{setting}-{seed}")
        objective = Objective("score", "max" if seed % 2 else "min", max_t)
        stream = _stream(rng, max_t)
        ends = {trial_id: clock for trial_id, clock, _ in stream}  # its loop returns then
        ray = ASHAScheduler(time_attr=CLOCK_KEY, metric="score", mode=objective.mode,
                            max_t=max_t, grace_period=grace, reduction_factor=rf,
                            stop_last_trials=stop_last)
        expected = _ray_drive(ray, stream, objective, ends)

        def make(directory, objective=objective):
            return ResumableASHA(directory, objective, grace_period=grace, reduction_factor=rf,
                                 stop_last_trials=stop_last)

        cut = rng.randrange(len(stream) + 1)
        stopped: set[str] = set()
        first = _our_drive(make(tmp_path / str(seed)), stream[:cut], objective, ends, stopped)
        restored = make(tmp_path / str(seed))
        rest = _our_drive(restored, stream[cut:], objective, ends, stopped)
        assert first + rest == expected, (seed, cut)
        assert restored.rungs() == ray._brackets[0]._rungs, seed


# A log written by the previous ResumableASHA (a subclass of Ray's ASHAScheduler, before
# sweeps.search.asha): loss, min, max_t 9, grace 1, rf 3. c is stopped at rung 1, d reported NaN
# (judged as 1e300), e never reported loss, f's loop returned at epoch 3 (recorded at rung 3 by
# the end record alone), b ran to the budget. Its rungs, as that code held them, below.
OLD_LOG = """\
{"trial":"a","epoch":1,"value":0.5,"bracket":0,"action":"CONTINUE","t":1795427066.9,"metrics":{"sweeps_epoch":1,"loss":0.5}}
{"trial":"b","epoch":1,"value":0.3,"bracket":0,"action":"CONTINUE","t":1795427066.901,"metrics":{"sweeps_epoch":1,"loss":0.3}}
{"trial":"c","epoch":1,"value":0.5,"bracket":0,"action":"STOP","t":1795427066.902,"metrics":{"sweeps_epoch":1,"loss":0.5}}
{"trial":"c","end":true,"epoch":1,"value":0.5,"bracket":0,"t":1795427066.902,"metrics":{"sweeps_epoch":1,"loss":0.5}}
{"trial":"d","epoch":1,"value":1e+300,"bracket":0,"action":"STOP","t":1795427066.903,"metrics":{"sweeps_epoch":1,"loss":1e+300}}
{"trial":"d","end":true,"epoch":1,"value":1e+300,"bracket":0,"t":1795427066.903,"metrics":{"sweeps_epoch":1,"loss":1e+300}}
{"trial":"e","epoch":1,"value":null,"action":"STOP","error":"never reported loss (experiment.metric) by epoch 1; it reported: acc. Report it with ray.train.report({'loss': ...}), or set experiment.metric to one of those keys","t":1795427066.904,"metrics":{"sweeps_epoch":1,"acc":0.1}}
{"trial":"e","end":true,"t":1795427066.904,"metrics":{"sweeps_epoch":1,"acc":0.1}}
{"trial":"a","epoch":2,"value":0.45,"bracket":0,"action":"CONTINUE","t":1795427066.904,"metrics":{"sweeps_epoch":2,"loss":0.45}}
{"trial":"b","epoch":2,"value":0.28,"bracket":0,"action":"CONTINUE","t":1795427066.905,"metrics":{"sweeps_epoch":2,"loss":0.28}}
{"trial":"f","epoch":1,"value":0.4,"bracket":0,"action":"CONTINUE","t":1795427066.905,"metrics":{"sweeps_epoch":1,"loss":0.4}}
{"trial":"a","epoch":3,"value":0.4,"bracket":0,"action":"CONTINUE","t":1795427066.906,"metrics":{"sweeps_epoch":3,"loss":0.4}}
{"trial":"b","epoch":3,"value":0.2,"bracket":0,"action":"CONTINUE","t":1795427066.906,"metrics":{"sweeps_epoch":3,"loss":0.2}}
{"trial":"f","epoch":2,"value":0.4,"bracket":0,"action":"CONTINUE","t":1795427066.907,"metrics":{"sweeps_epoch":2,"loss":0.4}}
{"trial":"f","end":true,"epoch":3,"value":0.4,"bracket":0,"t":1795427066.907,"metrics":{"sweeps_epoch":3,"loss":0.4}}
{"trial":"b","epoch":4,"value":0.19,"bracket":0,"action":"CONTINUE","t":1795427066.907,"metrics":{"sweeps_epoch":4,"loss":0.19}}
{"trial":"b","epoch":5,"value":0.15000000000000002,"bracket":0,"action":"CONTINUE","t":1795427066.908,"metrics":{"sweeps_epoch":5,"loss":0.15000000000000002}}
{"trial":"b","epoch":6,"value":0.14,"bracket":0,"action":"CONTINUE","t":1795427066.908,"metrics":{"sweeps_epoch":6,"loss":0.14}}
{"trial":"b","epoch":7,"value":0.13,"bracket":0,"action":"CONTINUE","t":1795427066.909,"metrics":{"sweeps_epoch":7,"loss":0.13}}
{"trial":"b","epoch":8,"value":0.12000000000000001,"bracket":0,"action":"CONTINUE","t":1795427066.909,"metrics":{"sweeps_epoch":8,"loss":0.12000000000000001}}
{"trial":"b","epoch":9,"value":0.11000000000000001,"bracket":0,"action":"STOP","t":1795427066.91,"metrics":{"sweeps_epoch":9,"loss":0.11000000000000001}}
{"trial":"b","end":true,"epoch":9,"value":0.11000000000000001,"bracket":0,"t":1795427066.91,"metrics":{"sweeps_epoch":9,"loss":0.11000000000000001}}
"""  # noqa: E501
OLD_RUNGS = [(9, {"b": -0.11000000000000001}), (3, {"a": -0.4, "b": -0.2, "f": -0.4}),
             (1, {"a": -0.5, "b": -0.3, "c": -0.5, "d": -1e300, "f": -0.4})]


def test_a_log_of_the_previous_implementation_replays_to_its_rungs(tmp_path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "scheduler.jsonl").write_text(OLD_LOG)
    restored = ResumableASHA(tmp_path, Objective("loss", "min", 9), grace_period=1,
                             reduction_factor=3)
    g, b = Trial("g"), Trial("b")
    restored.on_trial_add(None, g)
    assert restored.rungs() == OLD_RUNGS
    assert set(ended_trials(tmp_path)) == {"b", "c", "d", "e", "f"}
    assert verdicts(tmp_path)["e"].error and verdicts(tmp_path)["c"].stopped_at == 1
    # rung 1's cutoff: 2/3 quantile of (-1e300, -0.5, -0.5, -0.4, -0.3) = -0.4333...
    assert restored.on_trial_result(None, g, {CLOCK_KEY: 1, "loss": 0.45}) == "STOP"
    assert restored.on_trial_result(None, b, {CLOCK_KEY: 9, "loss": 0.11}) == "STOP"  # ended
    lines = (tmp_path / "state" / "scheduler.jsonl").read_text().splitlines()
    assert len(lines) == len(OLD_LOG.splitlines()) + 1  # b's re-report is not logged again
    new = json.loads(lines[-1])
    assert set(new) == {"trial", "epoch", "value", "bracket", "action", "t", "metrics"}
    assert (new["trial"], new["value"], new["bracket"], new["action"]) == ("g", 0.45, 0, "STOP")


def test_tune_facing_surface(tmp_path) -> None:
    asha = _asha(tmp_path)
    assert asha.metric == "val_acc"
    assert asha.set_search_properties(None, None) and asha.set_search_properties("val_acc", "max")
    with pytest.raises(ConfigError, match="val_acc/max"):
        asha.set_search_properties("loss", "min")
    _drive(asha, _results(0), {}, set())
    assert asha.debug_string().startswith("Using AsyncHyperBand: num_stopped=")
    copy = pickle.loads(pickle.dumps(asha))  # as Tune's tuner.pkl: rungs come from the log
    assert copy.rungs() == asha.rungs() and any(r for _, r in asha.rungs())
    assert copy.debug_string() == asha.debug_string()  # the replay counts no stop twice
    asha.on_trial_remove(None, Trial("t0"))  # no KeyError for a trial already completed


class _Controller(StagedController):
    """What a scheduler reaches of Tune's wrapped controller when Tune asks it which trial to
    start: the trials, and (behind the wrapper) the controller's state save."""

    def __init__(self, root) -> None:
        super().__init__(root)
        self.trials: list[Trial] = []
        self.saves: list[list[str]] = []  # the trials each save held, read back from storage

    def get_trials(self) -> list[Trial]:
        return self.trials

    def state(self) -> dict:
        return {"trial_data": [t.trial_id for t in self.trials]}

    def save_to_dir(self) -> None:
        super().save_to_dir()
        self.pending = True

    def choose(self, scheduler):
        self.pending = False
        chosen = scheduler.choose_trial_to_run(self)
        if self.pending:  # saved: what storage holds now
            self.saves.append(self.stored()["trial_data"])
        return chosen


def _fifo(directory):
    return ResumableFIFO(directory, Objective("val_acc", "max", 9))


@pytest.mark.parametrize("make", [_asha, _fifo], ids=["asha", "fifo"])
def test_tune_state_is_saved_before_a_new_trial_can_start(tmp_path, make) -> None:
    """Tune saves its state once a second: a trial added and started inside that second would
    be unknown to a resume after kill -9. The scheduler saves it first, once per new trial."""
    scheduler, controller = make(tmp_path / "sweep"), _Controller(tmp_path)
    assert controller.choose(scheduler) is None and controller.saves == []
    for trial_id in ("a", "b"):
        trial = Trial(trial_id)
        trial.status = "PENDING"
        controller.trials.append(trial)
        scheduler.on_trial_add(controller, trial)
        assert controller.choose(scheduler).trial_id == "a"
        assert controller.choose(scheduler).trial_id == "a"  # asked again: no save
    assert controller.saves == [["a"], ["a", "b"]]
    restored = pickle.loads(pickle.dumps(scheduler))  # Tune's tuner.pkl: a new driver saves anew
    controller.choose(restored)
    assert controller.saves[-1] == ["a", "b"] and len(controller.saves) == 3


class _Held:
    def __init__(self, trial_id: str, status: str) -> None:
        self.trial_id, self.status, self.config = trial_id, status, {}

    def set_status(self, status: str) -> None:
        self.status = status


class _AddedTo:
    def __init__(self, trials: list) -> None:
        self.trials = trials

    def get_trials(self) -> list:
        return self.trials


def _pbt(directory):
    from tests.unit.search.test_pbt import _pbt as pbt

    return pbt(directory)


@pytest.mark.parametrize("make", [_fifo, _asha, _pbt], ids=["fifo", "asha", "pbt"])
@pytest.mark.parametrize(("cap", "before", "added"), [
    (None, ["RUNNING", "RUNNING"], "PENDING"),   # no search.max_concurrent_trials: no hold
    (2, ["RUNNING"], "PENDING"),                 # room for it
    (2, ["RUNNING", "PENDING"], "PAUSED"),       # a resume restored two already: it waits
    (1, ["TERMINATED", "TERMINATED"], "PENDING"),
    (1, ["PAUSED"], "PENDING"),                  # held ones do not count: one starts
])
def test_trials_restored_past_the_trial_limit_wait_paused(tmp_path, make, cap, before,
                                                          added) -> None:
    """Tune starts pending trials without asking the scheduler, so the ones a resume restores
    past search.max_concurrent_trials (reopened by a grown max_t or a raised budget) are
    added paused, which only choose_trial_to_run starts, under the cap (PBT held none)."""
    scheduler = make(tmp_path)
    scheduler.max_running = cap
    trials = [_Held(f"t{i}", s) for i, s in enumerate(before)]
    new = _Held("new", "PENDING")
    scheduler.on_trial_add(_AddedTo([*trials, new]), new)
    assert new.status == added


def test_a_text_metric_fails_its_trial_naming_the_value(tmp_path) -> None:
    asha = _asha(tmp_path)
    trial = Trial("t")
    asha.on_trial_add(None, trial)
    result = {CLOCK_KEY: 1, "val_acc": "high"}
    assert asha.on_trial_result(None, trial, result) == "STOP"
    asha.on_trial_complete(None, trial, result)  # nothing to judge: no TypeError
    from sweeps.search.schedulers import decision_log

    (error,) = [r["error"] for r in decision_log(tmp_path).records() if r.get("error")]
    assert error == ("reported val_acc='high' (a str) at epoch 1; experiment.metric must be a "
                     "number: report it as one (float(...), .item())")
