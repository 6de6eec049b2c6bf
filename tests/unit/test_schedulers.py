"""The scheduler's decision log: a restored ASHA decides exactly as the uninterrupted one.

Real Ray Tune scheduler code (no cluster needed): results are fed to ``on_trial_result`` the way
the Tune controller does.
"""

from __future__ import annotations

import random

import pytest

from sweeps.protocol import CLOCK_KEY
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import ResumableASHA, ResumableFIFO, ended_trials


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
        trial = trials.setdefault(trial_id, Trial(trial_id))
        if trial_id not in getattr(scheduler, "_trial_info", {trial_id: 0}):
            scheduler.on_trial_add(None, trial)
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
