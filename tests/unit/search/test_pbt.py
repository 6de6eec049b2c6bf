"""PBT without a cluster: explore, the quantiles, the decision log and its replay, and the
exploit hand-over to the trial driver (``sweeps.trial.exploit``).

Results are fed to ``on_trial_result`` the way the Tune controller does; trials' run directories
are written the way Train and the report bridge write them (snapshot, report log, clock).
"""

from __future__ import annotations

import json
import math
import pickle
import random
import uuid
from pathlib import Path
from typing import Any

import pytest

from sweeps import files
from sweeps._ray import train_snapshot
from sweeps.config.schema import SchedulerSection
from sweeps.errors import ConfigError
from sweeps.protocol import CHECKPOINT_PATH_KEY, CLOCK_FILE, CLOCK_KEY, checkpoint_dir_name
from sweeps.resume.train_runs import latest_checkpoint
from sweeps.search.outcome import Objective
from sweeps.search.pbt import ResumablePBT, decision_rng, explore, quantiles
from sweeps.search.schedulers import decision_log, ended_trials, verdicts
from sweeps.search.space import Param, parse_space
from sweeps.storage import stand_in, trees
from sweeps.trial import exploit as hand_over
from sweeps.trial import report_log

# ----------------------------------------------------------------------------------- explore


class Scripted:
    """A stand-in for ``random.Random``: ``random()`` returns ``u``, ``choice`` item ``pick``."""

    def __init__(self, u: float = 0.9, pick: int = 0) -> None:
        self.u, self.pick = u, pick

    def random(self) -> float:
        return self.u

    def choice(self, seq: Any) -> Any:
        return seq[self.pick]

    def uniform(self, a: float, b: float) -> float:
        return a + self.u * (b - a)

    def randint(self, a: int, b: int) -> int:
        return a + round(self.u * (b - a))


F = Param("x", "float", low=0.0, high=1.0)
F_HI = Param("x", "float", low=0.5, high=1.0)
F_STEP = Param("x", "float", low=0.0, high=1.0, step=0.25)
F_LOG = Param("x", "float", low=1e-4, high=1e-1, log=True)
INT = Param("x", "int", low=1, high=10)
INT_STEP = Param("x", "int", low=2, high=10, step=2)
INT_LOG = Param("x", "int", low=16, high=256, log=True)
C = Param("x", "choice", choices=(32, 64, 128))
UP, DOWN = 0, 1  # Scripted.pick into (1.2, 0.8); also into (-1, 1): left, right


@pytest.mark.parametrize(("param", "value", "rng", "expected", "op"), [
    (F, 0.5, Scripted(pick=UP), 0.6, "* 1.2"),
    (F, 0.5, Scripted(pick=DOWN), 0.4, "* 0.8"),
    (F, 0.9, Scripted(pick=UP), 1.0, "* 1.2"),  # clipped to the upper bound
    (F_HI, 0.55, Scripted(pick=DOWN), 0.5, "* 0.8"),  # clipped to the lower bound
    (F_STEP, 0.5, Scripted(pick=UP), 0.5, "* 1.2"),  # 0.6 back on the 0.25 grid
    (F_STEP, 0.75, Scripted(pick=UP), 1.0, "* 1.2"),  # 0.9 -> 1.0
    (F_LOG, 0.1, Scripted(pick=UP), 0.1, "* 1.2"),
    (F_LOG, 1e-3, Scripted(pick=DOWN), 8e-4, "* 0.8"),
    (INT, 5, Scripted(pick=UP), 6, "* 1.2"),
    (INT, 5, Scripted(pick=DOWN), 4, "* 0.8"),
    (INT, 2, Scripted(pick=UP), 2, "* 1.2"),  # 2.4 rounds back to 2, as Ray
    (INT, 1, Scripted(pick=DOWN), 1, "* 0.8"),  # 0.8 -> the lower bound
    (INT, 10, Scripted(pick=UP), 10, "* 1.2"),  # 12 -> the upper bound
    (INT_STEP, 6, Scripted(pick=UP), 8, "* 1.2"),  # 7.2 -> the step grid 2, 4, ..., 10
    (INT_LOG, 200, Scripted(pick=UP), 240, "* 1.2"),
    (C, 64, Scripted(pick=1), 128, "shift right"),
    (C, 64, Scripted(pick=0), 32, "shift left"),
    (C, 128, Scripted(pick=1), 128, "shift right (noop)"),  # as Ray: clamped at the edge
    (C, 32, Scripted(pick=0), 32, "shift left (noop)"),
    (C, 48, Scripted(pick=2), 128, "resample"),  # not a choice (an edited space): redraw
    # resample_probability 0.5 and random() 0.1: a fresh draw from the distribution
    (F, 0.5, Scripted(u=0.1), 0.1, "resample"),
    (F_STEP, 0.5, Scripted(u=0.1), 0.0, "resample"),
    (INT, 5, Scripted(u=0.1), 2, "resample"),
    (INT_STEP, 6, Scripted(u=0.1), 2, "resample"),
    (C, 64, Scripted(u=0.1, pick=2), 128, "resample"),
])
def test_explore_one_param(param, value, rng, expected, op) -> None:
    out, ops = explore({"x": value, "other": "kept"}, [param], rng, 0.5)
    assert out == {"x": pytest.approx(expected), "other": "kept"}
    assert ops == {"x": op}
    assert type(out["x"]) is type(expected)


def test_explore_log_resample_is_log_uniform_within_bounds() -> None:
    out, _ = explore({"x": 0.01}, [F_LOG], Scripted(u=0.5), 1.0)
    assert out["x"] == pytest.approx(math.sqrt(1e-4 * 1e-1))  # the geometric middle
    out, _ = explore({"x": 100}, [INT_LOG], Scripted(u=0.5), 1.0)
    assert out["x"] == 64


PARAMS = [F, F_STEP, F_LOG, INT, INT_STEP, INT_LOG, C]


@pytest.mark.parametrize("resample", [0.0, 0.25, 1.0])
def test_explored_values_always_lie_in_the_space(resample) -> None:
    params = [Param(f"p{i}", **{k: getattr(p, k) for k in ("kind", "low", "high", "step",
                                                           "log", "choices")})
              for i, p in enumerate(PARAMS)]
    config = {"p0": 0.5, "p1": 0.5, "p2": 0.01, "p3": 5, "p4": 6, "p5": 64, "p6": 64}
    for seed in range(300):
        config, _ = explore(config, params, random.Random(seed), resample)
        for p in params:
            value = config[p.path]
            if p.kind == "choice":
                assert value in p.choices
                continue
            assert p.low <= value <= p.high, (p, value)
            assert isinstance(value, int) == (p.kind == "int")
            if p.step:
                assert (value - p.low) / p.step == pytest.approx(round((value - p.low) / p.step))


def test_explore_is_reproducible_by_seed_and_decision() -> None:
    params, _ = parse_space({"lr": "tag(log, interval(1e-4, 0.5))", "bs": "choice(32, 64, 128)",
                             "drop": "interval(0.0, 0.5)"})
    donor = {"lr": 0.01, "bs": 64, "drop": 0.2}

    def draw(seed, trial, clock, k):
        return explore(donor, params, decision_rng(seed, trial, clock, k), 0.25)

    assert draw(0, "a", 2, 1) == draw(0, "a", 2.0, 1)
    outcomes = {json.dumps(draw(s, t, c, k)) for s in (0, 1) for t in ("a", "b")
                for c in (2, 4) for k in (1, 2)}
    assert len(outcomes) > 8, "seed, trial, clock and generation each change the draw"


# --------------------------------------------------------------------------------- quantiles


@pytest.mark.parametrize(("scores", "fraction", "expected"), [
    ({}, 0.25, ([], [])),
    ({"a": 1.0}, 0.5, ([], [])),  # one trial: nobody to copy
    ({"a": 1.0, "b": 2.0}, 0.25, (["a"], ["b"])),  # ceil(0.5) = 1
    ({"a": 1.0, "b": 2.0, "c": 3.0}, 0.5, (["a"], ["c"])),  # ceil(1.5) = 2 > 1.5 -> 1
    ({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, 0.5, (["a", "b"], ["c", "d"])),
    ({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0, "e": 5.0}, 0.25, (["a", "b"], ["d", "e"])),
    ({"d": 1.0, "c": 1.0, "b": 1.0, "a": 1.0}, 0.25, (["a"], ["d"])),  # ties: by trial id
    ({"a": -1e300, "b": 0.5, "c": 0.4}, 0.25, (["a"], ["b"])),  # NaN judged as the worst
])
def test_quantiles(scores, fraction, expected) -> None:
    assert quantiles(scores, fraction) == expected


# ------------------------------------------------------------------------- the scheduler


class Trial:
    """What Tune's schedulers read from a trial, and the config setter PBT calls."""

    def __init__(self, trial_id: str, config: dict[str, Any]) -> None:
        self.trial_id, self.config, self.last_result = trial_id, config, {}

    def set_config(self, config: dict[str, Any]) -> None:
        self.config = config


SPACE = {"lr": "tag(log, interval(1e-4, 0.5))", "opt.batch": "choice(32, 64, 128)"}
OBJECTIVE = Objective("val_acc", "max", 6)


def _pbt(sweep: Path, interval: int = 1, fraction: float = 0.5, seed: int = 0,
         resample: float = 0.25) -> ResumablePBT:
    params, _ = parse_space(SPACE)
    section = SchedulerSection(name="pbt", max_t=6, perturbation_interval=interval,
                               quantile_fraction=fraction, resample_probability=resample)
    return ResumablePBT(sweep, OBJECTIVE, params, section, seed)


def _trials(n: int = 4) -> dict[str, Trial]:
    return {f"t{i}": Trial(f"t{i}", {"lr": 0.01 * (i + 1), "opt": {"batch": 64}})
            for i in range(n)}


def _train(sweep: Path, trial_id: str, epoch: int, value: float) -> str:
    """Write what Train and the report bridge leave for one checkpointed epoch; its path."""
    run = sweep / "train" / trial_id
    name = checkpoint_dir_name(epoch)
    files.make_dirs(run / name)
    files.write_atomic(run / name / "model.bin", b"w" * epoch)
    metrics = {"val_acc": value, "epoch": epoch}
    entries = [(n, {"val_acc": 0.0, "epoch": i + 1}, i) for i in range(epoch - 1)
               for n in [checkpoint_dir_name(i + 1)]]
    train_snapshot.write(run, train_snapshot.rebuilt([*entries, (name, metrics, epoch - 1)],
                                                     "2.60.0"))
    report_log.append(run, {**metrics, CLOCK_KEY: epoch}, epoch, str(run / name))
    files.write_atomic(run / CLOCK_FILE, json.dumps({"time_attr": "epoch", "by": "attr",
                                                     "offset": 0.0}))
    return str(run / name)


def _result(sweep: Path, trial_id: str, epoch: int, value: float | None,
            checkpoint: bool = True) -> dict[str, Any]:
    path = _train(sweep, trial_id, epoch, value or 0.0) if checkpoint else None
    out: dict[str, Any] = {CLOCK_KEY: epoch, "epoch": epoch, CHECKPOINT_PATH_KEY: path}
    if value is not None:
        out["val_acc"] = value
    return out


QUALITY = {"t0": 0.2, "t1": 0.9, "t2": 0.5, "t3": 0.7}
STREAM = [(t, e) for e in range(1, 7) for t in ("t0", "t1", "t2", "t3")]


def _feed(scheduler: ResumablePBT, sweep: Path, trials: dict[str, Trial], stream) -> list[str]:
    """Feed ``stream`` (each trial's own epochs, as if exploits changed nothing)."""
    decisions = []
    for trial_id, epoch in stream:
        value = QUALITY[trial_id] + 0.01 * epoch
        decisions.append(scheduler.on_trial_result(None, trials[trial_id],
                                                   _result(sweep, trial_id, epoch, value)))
    return decisions


def test_a_bottom_trial_is_paused_with_its_exploit_logged_first(tmp_path) -> None:
    trials = _trials()
    pbt = _pbt(tmp_path)
    for t in trials.values():
        pbt.on_trial_add(None, t)
    decisions = _feed(pbt, tmp_path, trials, [("t1", 1), ("t2", 1), ("t3", 1), ("t0", 1)])
    # t1 alone: nobody to rank against; t2 below t1 with 2 trials: bottom of [t2 | t1]
    assert decisions[0] == "CONTINUE" and decisions[1] == "PAUSE"
    records = decision_log(tmp_path).records()
    pause = records[-1] if decisions[-1] == "PAUSE" else records[1]
    assert pause["action"] == "PAUSE" and pause["perturb"] is True
    ex = pause["exploit"]
    assert set(ex) == {"generation", "donor", "donor_epoch", "donor_value", "checkpoint",
                       "frozen", "config", "changed", "ops"}
    assert ex["generation"] == 1 and ex["donor_epoch"] == 1
    assert set(ex["config"]) == {"lr", "opt.batch"}
    frozen = Path(ex["frozen"])
    assert frozen.name == "checkpoint_epoch_0001" and (frozen / "model.bin").is_file()
    assert frozen.parent == tmp_path / "train" / f"{pause['trial']}.pbt" / "donor1"
    info = json.loads((frozen.parent / hand_over.DONOR_INFO).read_text())
    assert (info["donor"], info["reports"], info["metrics"]["val_acc"]) == (
        ex["donor"], 1, QUALITY[ex["donor"]] + 0.01)
    # The trial's Tune config now holds the explored values (nested, as Tune has it).
    trial = trials[pause["trial"]]
    assert trial.config["lr"] == ex["config"]["lr"]
    assert trial.config["opt"]["batch"] == ex["config"]["opt.batch"]
    for key, (old, new) in ex["changed"].items():
        assert new == ex["config"][key] and old != new


def test_no_exploit_without_a_donor_checkpoint_or_a_second_trial(tmp_path) -> None:
    trials = _trials(2)
    pbt = _pbt(tmp_path)
    for t in trials.values():
        pbt.on_trial_add(None, t)
    assert pbt.on_trial_result(None, trials["t0"], _result(tmp_path, "t0", 1, 0.1)) == "CONTINUE"
    # t1 is the better one but reported no checkpoint; t0 stays where it is
    assert pbt.on_trial_result(None, trials["t1"],
                               _result(tmp_path, "t1", 1, 0.9, checkpoint=False)) == "CONTINUE"
    assert pbt.on_trial_result(None, trials["t0"], _result(tmp_path, "t0", 2, 0.1)) == "CONTINUE"
    assert not any(r.get("exploit") for r in decision_log(tmp_path).records())
    # Its next checkpoint makes it a donor.
    assert pbt.on_trial_result(None, trials["t1"], _result(tmp_path, "t1", 2, 0.9)) == "CONTINUE"
    assert pbt.on_trial_result(None, trials["t0"], _result(tmp_path, "t0", 3, 0.1)) == "PAUSE"


def test_perturbation_interval_and_budget(tmp_path) -> None:
    trials = _trials(2)
    pbt = _pbt(tmp_path, interval=3)
    for t in trials.values():
        pbt.on_trial_add(None, t)
    for epoch in (1, 2):
        assert pbt.on_trial_result(None, trials["t1"], _result(tmp_path, "t1", epoch, 0.9)) \
            == "CONTINUE"
        assert pbt.on_trial_result(None, trials["t0"], _result(tmp_path, "t0", epoch, 0.1)) \
            == "CONTINUE"
    assert pbt.on_trial_result(None, trials["t1"], _result(tmp_path, "t1", 6, 0.9)) == "STOP"
    # t1 ended: t0 is alone now, so nothing to copy even at its perturbation time
    assert pbt.on_trial_result(None, trials["t0"], _result(tmp_path, "t0", 3, 0.1)) == "CONTINUE"
    assert pbt.on_trial_result(None, trials["t1"], _result(tmp_path, "t1", 6, 0.9)) == "STOP"


def test_a_trial_that_never_reports_the_metric_fails(tmp_path) -> None:
    trial = Trial("t0", {"lr": 0.1})
    pbt = _pbt(tmp_path)
    pbt.on_trial_add(None, trial)
    assert pbt.on_trial_result(None, trial, {CLOCK_KEY: 1, "loss": 0.3}) == "STOP"
    assert "never reported val_acc" in verdicts(tmp_path)["t0"].error


def test_invalid_settings_name_key_and_fix(tmp_path) -> None:
    params, _ = parse_space(SPACE)
    for field, value in (("quantile_fraction", 0.75), ("perturbation_interval", 0),
                         ("resample_probability", 1.5)):
        section = SchedulerSection(name="pbt", **{field: value})
        with pytest.raises(ConfigError, match=f"scheduler.{field}"):
            ResumablePBT(tmp_path, OBJECTIVE, params, section, 0)


def _strip(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records without what differs between two sweep directories (paths, times)."""
    out = []
    for r in records:
        r = {k: v for k, v in r.items() if k not in ("t", "checkpoint")}
        if "exploit" in r:
            r["exploit"] = {k: v for k, v in r["exploit"].items()
                            if k not in ("checkpoint", "frozen")}
        out.append(r)
    return out


@pytest.mark.parametrize("crash_at", [3, 9, 14, 21])
def test_a_restored_scheduler_decides_as_the_uninterrupted_one(tmp_path, crash_at) -> None:
    whole_dir, crashed_dir = tmp_path / "whole", tmp_path / "crashed"
    trials = _trials()
    whole = _pbt(whole_dir)
    for t in trials.values():
        whole.on_trial_add(None, t)
    expected = _feed(whole, whole_dir, trials, STREAM)
    assert "PAUSE" in expected

    trials = _trials()
    first = _pbt(crashed_dir)
    for t in trials.values():
        first.on_trial_add(None, t)
    got = _feed(first, crashed_dir, trials, STREAM[:crash_at])
    # The driver is killed: Tune's saved trial configs lag (the exploits are lost from them)
    # and the scheduler comes back from its pickle, replaying its log on first use.
    restored = pickle.loads(pickle.dumps(first))
    lagging = _trials()
    for t in lagging.values():
        restored.on_trial_add(None, t)
    for trial_id, trial in lagging.items():  # each exploited trial got its logged config back
        assert trial.config == trials[trial_id].config
    got += _feed(restored, crashed_dir, lagging, STREAM[crash_at:])
    assert got == expected
    assert _strip(decision_log(crashed_dir).records()) == _strip(
        decision_log(whole_dir).records())


def test_pause_records_are_neither_ends_nor_stops(tmp_path) -> None:
    trials = _trials()
    pbt = _pbt(tmp_path)
    for t in trials.values():
        pbt.on_trial_add(None, t)
    decisions = _feed(pbt, tmp_path, trials, STREAM[:8])
    paused = {r["trial"] for r in decision_log(tmp_path).records() if r["action"] == "PAUSE"}
    assert paused and decisions.count("PAUSE") == len(
        [r for r in decision_log(tmp_path).records() if r["action"] == "PAUSE"])
    assert ended_trials(tmp_path) == {} and verdicts(tmp_path) == {}
    pbt.on_trial_result(None, trials["t1"], _result(tmp_path, "t1", 6, 0.95))
    pbt.on_trial_complete(None, trials["t1"], None)
    assert set(ended_trials(tmp_path)) == {"t1"}
    assert verdicts(tmp_path)["t1"].stopped_at == 6
    assert OBJECTIVE.outcome(6, verdicts(tmp_path)["t1"], False) == "completed"


# --------------------------------------------------------------------- the exploit hand-over


@pytest.fixture(params=["local", "s3"])
def sweep(request, tmp_path) -> Path:
    """A sweep directory on disk, or the stand-in of one on a real S3 endpoint (moto's
    server): the exploit hand-over runs through sweeps.files, the same on both."""
    if request.param == "local":
        return tmp_path
    moto = request.getfixturevalue("moto_s3")
    return stand_in(f"s3://{moto.BUCKET}/pbt/{uuid.uuid4().hex[:8]}")


def _exploited(sweep: Path) -> tuple[str, dict[str, Any]]:
    trials = _trials(2)
    pbt = _pbt(sweep)
    for t in trials.values():
        pbt.on_trial_add(None, t)
    pbt.on_trial_result(None, trials["t1"], _result(sweep, "t1", 1, 0.9))
    pbt.on_trial_result(None, trials["t1"], _result(sweep, "t1", 2, 0.91))
    assert pbt.on_trial_result(None, trials["t0"], _result(sweep, "t0", 1, 0.1)) == "PAUSE"
    return "t0", decision_log(sweep).records()[-1]["exploit"]


def _dir(path: Path) -> None:
    """A directory holding a file (an object store has no empty directories)."""
    files.make_dirs(path)
    files.write_atomic(path / "part", b"")


def test_the_restarted_trial_runs_from_its_donors_checkpoint(sweep) -> None:
    trial_id, ex = _exploited(sweep)
    run = sweep / "train" / trial_id
    files.write_atomic(run / "trial.json", "{}")
    sampled = {"lr": 0.01, "opt": {"batch": 64}, "fixed": 1}
    got = hand_over.take_exploit(run, trial_id, sampled, "sweep-id")
    assert got == {"lr": ex["config"]["lr"], "opt": {"batch": ex["config"]["opt.batch"]},
                   "fixed": 1}
    # Train resumes the fresh run from the donor's epoch-2 checkpoint, 2 reports in
    assert ex["donor"] == "t1" and ex["donor_epoch"] == 2
    name, metrics, reports = latest_checkpoint(run)
    assert (name, metrics["val_acc"], reports) == ("checkpoint_epoch_0002", 0.91, 2)
    assert files.read_bytes(run / name / "model.bin") == b"ww"
    assert json.loads(files.read_text(run / CLOCK_FILE))["by"] == "attr"
    assert hand_over.applied_generation(run) == 1
    assert not files.exists(run / "trial.json")  # claim_run pins the explored config afresh
    assert report_log.records(run) == [] and report_log.restored_count(run) is None
    # The trial's own run is kept, moved aside
    kept = sweep / "train" / "t0.pbt" / "gen0"
    assert files.is_dir(kept / "checkpoint_epoch_0001") and files.is_file(kept / "trial.json")
    # Done once: a second start (a retry) keeps the run it made since
    _dir(run / "checkpoint_epoch_0003")
    assert hand_over.take_exploit(run, trial_id, sampled, "sweep-id") == got
    assert files.is_dir(run / "checkpoint_epoch_0003")


def test_a_crash_mid_exploit_is_redone_from_the_frozen_copy(sweep) -> None:
    trial_id, ex = _exploited(sweep)
    run = sweep / "train" / trial_id
    history = sweep / "train" / "t0.pbt"
    # Killed after moving the old run aside and before the new one took its place
    _dir(history / "gen1.new")
    trees.move(run, history / "gen0")
    # ... and Train deleted the donor's checkpoint meanwhile (retention)
    trees.remove_tree(sweep / "train" / "t1" / "checkpoint_epoch_0002")
    hand_over.take_exploit(run, trial_id, {}, "sweep-id")
    assert latest_checkpoint(run)[0] == "checkpoint_epoch_0002"
    assert files.read_bytes(run / "checkpoint_epoch_0002" / "model.bin") == b"ww"
    assert not files.exists(history / "gen1.new")


def test_the_marker_is_written_last(sweep) -> None:
    """Killed after the seeded run took its place and before its marker: the next start
    seeds it again, keeping what was there."""
    trial_id, _ = _exploited(sweep)
    run = sweep / "train" / trial_id
    hand_over.take_exploit(run, trial_id, {}, "sweep-id")
    files.remove_file(run / hand_over.MARKER)
    hand_over.take_exploit(run, trial_id, {}, "sweep-id")
    assert hand_over.applied_generation(run) == 1
    assert latest_checkpoint(run)[0] == "checkpoint_epoch_0002"
    # the trial's own run, and the unmarked seeded one set aside next to it
    kept = [n for n in files.listdir(sweep / "train" / "t0.pbt") if n.startswith("gen0")]
    assert kept[0] == "gen0" and len(kept) == 2 and kept[1].startswith("gen0-"), kept


@pytest.mark.parametrize(("records", "expected"), [
    ([], 0.0),
    ([{"trial": "a", "epoch": 2}, {"trial": "a", "epoch": 3}], 3.0),
    ([{"trial": "a", "epoch": 3}, {"trial": "a", "epoch": 3, "exploit": {"donor_epoch": 1}}],
     1.0),  # the clock went back: epochs 2 and 3 of the new lineage are not judged yet
    ([{"trial": "a", "epoch": 1, "exploit": {"donor_epoch": 4}}, {"trial": "a", "epoch": 5}],
     5.0),
    ([{"trial": "b", "epoch": 9}, {"trial": "a", "end": True}], 0.0),
])
def test_judged_clock_restarts_at_an_exploit(records, expected) -> None:
    assert hand_over.judged_clock(records, "a") == expected


def test_no_exploit_leaves_the_trial_alone(tmp_path) -> None:
    run = tmp_path / "train" / "t9"
    assert hand_over.take_exploit(run, "t9", {"lr": 1}, "s") == {"lr": 1}
    assert not run.exists()
