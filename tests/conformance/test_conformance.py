"""A loop cannot tell the trial backends from Ray Train: every corpus loop (``corpus.py``) runs
under a plain ``TorchTrainer`` (the reference, in the same test), then as a sweeps trial on the
Train backend (``trial.executor=train``) and on the default (``auto``: the inline backend, or a
Train run where the loop needs one, which the test checks the plan says), with 1 and 2
workers (the loops of one ``harness.group_key`` as one sweep per backend and worker count, a
trial each, where Tune reuses a trial's process unless it failed, as a user's trials get it);
each must observe what the reference observed: every rank's notes, every checkpoint's metrics
and files, and the failing rank's own error, which the user must also read in the console, the
summary, ``error.txt`` and the trial's MLflow run.

    python -m pytest tests/conformance -k lightning      # one loop, every backend
"""

from __future__ import annotations

import difflib
import json
import pprint
from pathlib import Path

import pytest

from sweeps.trial.backends import BACKENDS, DEFAULT, BackendRequest
from tests.conformance.corpus import LOOPS, Loop
from tests.conformance.harness import Outcome, group_key, run_group, run_plain, run_sweeps

pytestmark = pytest.mark.slow

CASES = [(name, workers) for name, loop in LOOPS.items() for workers in loop.workers]


def _diff(reference: Outcome, other: Outcome) -> str:
    a = pprint.pformat(reference.comparable(), width=100).splitlines()
    b = pprint.pformat(other.comparable(), width=100).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "plain Ray Train", "sweeps", lineterm=""))


@pytest.mark.timeout(600)
@pytest.mark.parametrize(("name", "workers"), CASES, ids=[f"{n}-{w}w" for n, w in CASES])
def test_every_backend_gives_the_loop_what_plain_ray_train_gives_it(
        name: str, workers: int, tmp_path: Path, tmp_path_factory, ray_cluster, capsys,
        caplog) -> None:
    case, loop = name, LOOPS[name]
    reference = run_plain(loop, workers, tmp_path / "plain")
    assert reference.observed or reference.checkpoints or reference.error, \
        "the reference run observed nothing: the loop is not exercised"
    assert sorted(reference.observed) == list(range(workers)) or reference.error
    # Every registered backend (sweeps.trial.backends.BACKENDS), through its interface: a
    # backend that refuses this loop must leave it to Ray Train under trial.executor=auto; one
    # that auto picks runs as auto (the default a user gets), any other by its name.
    request = BackendRequest(num_workers=workers, use_gpu=False, datasets=loop.dataset,
                             trainable=loop.trainable)
    for name, backend in BACKENDS.items():
        if name != DEFAULT and backend.refusal(request) is not None:
            _auto_picks_a_train_run(loop, workers, tmp_path / name)  # the run just compared
            continue
        executor = "auto" if name != DEFAULT and backend.chosen_by_auto(request) else name
        capsys.readouterr()
        caplog.clear()
        if group_key(loop, workers) is not None:  # with the loops of its group, one trial each
            outcome, console = _grouped(case, workers, executor, tmp_path_factory, capsys)
        else:
            # MLflow only where the test reads it (a failing trial's run), and where the loop
            # reads its checkpoints' metrics back: system metrics (on with MLflow) must not show
            tracked = reference.error is not None or case == "context"
            outcome = run_sweeps(loop, workers, executor, tmp_path / name, tracked=tracked)
            console = capsys.readouterr().out
        plan = next(line for line in console.splitlines() if line.startswith("sweep "))
        assert ("inline" in plan) == (name == "inline"), plan  # which backend ran: the plan says
        assert outcome.comparable() == reference.comparable(), \
            f"{name} backend, {workers} worker(s):\n{_diff(reference, outcome)}"
        if reference.error is not None:
            _the_user_reads_the_failing_ranks_error(reference.error, outcome, console, workers,
                                                    loop)


# (executor, key): (outcomes, console), or what the group's sweep raised
_GROUPS: dict[tuple, tuple[dict[str, Outcome], str] | BaseException] = {}


def _grouped(name: str, workers: int, executor: str, tmp_path_factory,
             capsys) -> tuple[Outcome, str]:
    """The loop's outcome and the console of its group's sweep on ``executor`` (``run_group``):
    run by the group's first test, kept for the others (each compares its own loop)."""
    key = (executor, group_key(LOOPS[name], workers))
    if key not in _GROUPS:
        members = [loop for loop in LOOPS.values()
                   if workers in loop.workers and group_key(loop, workers) == key[1]]
        try:
            outcomes = run_group(members, workers, executor,
                                 tmp_path_factory.mktemp(f"group-{executor}-{workers}w"))
        except BaseException as exc:  # (a timeout too) the other members fail on it, not rerun
            _GROUPS[key] = exc
            raise
        _GROUPS[key] = outcomes, capsys.readouterr().out
    if isinstance(_GROUPS[key], BaseException):
        raise RuntimeError(f"the {executor} sweep of this loop's group failed") from _GROUPS[key]
    outcomes, console = _GROUPS[key]
    return outcomes[name], console


def _auto_picks_a_train_run(loop: Loop, workers: int, tmp: Path) -> None:
    """``trial.executor=auto`` plans a Ray Train run for this loop (the run the train backend
    just made, not made twice), and tells the user why when the loop calls what inline does
    not serve."""
    from sweeps import compose
    from sweeps.driver.prepare import prepare
    from tests.conformance.harness import CONF, sweep_overrides

    prep = prepare(compose("conformance", sweep_overrides(loop, workers, "auto", tmp),
                           config_dir=CONF))
    assert "inline" not in prep.resources.describe(), prep.resources.describe()
    if loop.routed:
        assert any(f"the loop calls {loop.routed}, which the inline backend does not serve: "
                   "its trials run as Ray Train runs" in w for w in prep.warnings), prep.warnings


def _the_user_reads_the_failing_ranks_error(error: tuple[str, str], outcome: Outcome,
                                            console: str, workers: int,
                                            loop: Loop) -> None:
    """The failing rank's own ``Type: message`` everywhere the user looks, naming that rank
    (of several); the other ranks' symptoms (a closed connection, an abort) only after it."""
    own = f"{error[0]}: {error[1]}"
    shown = outcome.shown
    assert shown["mlflow"] == own, json.dumps(shown, indent=1)
    rank = _rank(outcome)
    if loop.failing_rank is not None and workers > 1:
        assert rank == f"rank {loop.failing_rank} of {workers}", shown["summary"]
    assert shown["summary"] == (f"{own} ({rank})" if rank else own), shown["summary"]
    assert f"FAILED{f' on {rank}' if rank else ''}: {own}" in console, console[-3000:]
    text = shown["error.txt"]
    assert own in text, text[-3000:]
    assert f"(raised by {rank})" in text if rank else "(raised by rank" not in text, text
    frames = text if not rank or rank.startswith("rank 0 ") else text.split(own, 1)[1]
    assert f"{loop.file or loop.name}.py" in frames, text[-3000:]  # that rank's own frames
    assert "PeerFailed" not in text.split(own, 1)[0].splitlines()[-1], text[-3000:]


def _rank(outcome: Outcome) -> str:
    """The rank the summary names as the one that raised ("rank 1 of 2"), or ""."""
    rank = outcome.shown["summary"].rpartition(" (")[2].rstrip(")")
    return rank if rank.startswith("rank ") else ""


@pytest.mark.timeout(300)
def test_reports_from_rank_1_only_fail_the_inline_trial_naming_rank_1(tmp_path: Path,
                                                                      ray_cluster) -> None:
    """Rank 0 returns without reporting while rank 1 waits in its report: Ray Train's barrier
    waits forever there (not run: it would hang); the inline trial fails at once, with rank 1
    named and Ray Train's rule."""
    loop = Loop("rank1_reports", "loss", ("loss", "epoch"))
    outcome = run_sweeps(loop, 2, "auto", tmp_path)
    assert outcome.error == ("ReportMismatch", (
        "rank 1 called ray.train.report (its report 1), but rank 0's loop returned without "
        "making it: every rank must call ray.train.report as often as rank 0 (Ray Train's "
        "rule; a Train run waits for it forever, or RAY_TRAIN_COLLECTIVE_TIMEOUT_S)"))
    assert outcome.shown["summary"].endswith("(rank 1 of 2)"), outcome.shown
    assert outcome.shown["mlflow"].startswith("ReportMismatch: rank 1 called"), outcome.shown
