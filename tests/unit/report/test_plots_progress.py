"""Plots from a sweep's table and histories; the live view on a terminal and in a pipe."""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

from sweeps.protocol import CLOCK_KEY
from sweeps.report.plots import NotEnoughTrials, plot_sweep
from sweeps.report.progress import ProgressLines
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import decision_log
from sweeps.search.space import parse_space

PARAMS, _ = parse_space({"lr": "tag(log, interval(1e-4, 0.5))", "hidden": "choice(32, 64)",
                         "depth": "range(1, 3)"})


def _sweep(n: int) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    rng = np.random.default_rng(0)
    rows, histories = [], {}
    for i in range(n):
        epochs = 9 if i % 2 == 0 else 1
        curve = np.cumsum(rng.uniform(0, 0.1, epochs))
        tid = f"t{i}"
        histories[tid] = pd.DataFrame({"epoch": range(1, epochs + 1), "val_acc": curve,
                                       "trial_id": tid})
        rows.append({"trial_id": tid, "lr": 10 ** rng.uniform(-4, -0.3),
                     "hidden": [32, 64][i % 2], "depth": 1 + i % 3, "val_acc": curve.max(),
                     "epochs": epochs, "status": "completed" if epochs == 9 else "stopped"})
    return pd.DataFrame(rows), histories


def test_three_non_empty_pngs(tmp_path) -> None:
    table, histories = _sweep(6)
    paths = plot_sweep(table, histories, PARAMS, "val_acc", "t0", tmp_path / "plots")
    assert [p.name for p in paths] == ["learning_curves.png", "parallel_coordinates.png",
                                       "metric_vs_params.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000


def test_a_multi_objective_sweep_also_gets_a_pareto_png(tmp_path) -> None:
    from sweeps.report.pareto import front_of

    table, histories = _sweep(6)
    table["n_params"] = table["hidden"] * 100 * table["depth"]
    front = front_of(table, {"val_acc": "max", "n_params": "min"}, ["lr", "hidden", "depth"])
    paths = plot_sweep(table, histories, PARAMS, "val_acc", "t0", tmp_path / "plots", front)
    assert [p.name for p in paths] == ["learning_curves.png", "parallel_coordinates.png",
                                       "metric_vs_params.png", "pareto.png"]
    assert paths[-1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert paths[-1].stat().st_size > 10_000


@pytest.mark.parametrize("n", [0, 1])
def test_zero_or_one_trial_gives_a_clear_message_and_no_files(tmp_path, n: int) -> None:
    table, histories = _sweep(n)
    with pytest.raises(NotEnoughTrials, match=f"at least 2 trials .* this sweep has {n}"):
        plot_sweep(table, histories, PARAMS, "val_acc", None, tmp_path / "plots")
    assert not (tmp_path / "plots").exists()


@dataclass
class TrialRecord:
    trial_id: str
    last_result: dict = field(default_factory=dict)
    local_path: str = "/tmp/x"


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def _drive(view: ProgressLines) -> None:
    """Trial a is stopped by the scheduler at epoch 1 (its decision is in the log)."""
    decision_log(view.sweep_dir).append({"trial": "a", "epoch": 1, "value": 0.5,
                                         "action": "STOP"})
    view.on_trial_start(0, [], TrialRecord("a"))
    view.on_trial_result(0, [], TrialRecord("a"), {"val_acc": 0.5, CLOCK_KEY: 1})
    view.on_trial_complete(0, [], TrialRecord("a", {CLOCK_KEY: 1}))
    view.on_trial_start(0, [], TrialRecord("b"))


def test_piped_output_is_plain_lines(tmp_path) -> None:
    out = io.StringIO()
    _drive(ProgressLines(Objective("val_acc", "max", 9), 3, stream=out, sweep_dir=str(tmp_path)))
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text
    assert text.splitlines()[2].endswith("trial a stopped early at epoch 1 | best 0.5 (a)")


def test_terminal_gets_a_line_per_running_trial_and_a_bar_redrawn_in_place(tmp_path) -> None:
    out = FakeTTY()
    view = ProgressLines(Objective("val_acc", "max", 9), 3, stream=out, sweep_dir=str(tmp_path))
    _drive(view)
    view.on_trial_result(0, [], TrialRecord("b"), {"val_acc": 0.25, CLOCK_KEY: 2})
    view.on_trial_start(0, [], TrialRecord("c"))
    view.on_trial_complete(0, [], TrialRecord("c", {CLOCK_KEY: 4}))  # its loop returned early
    text = out.getvalue()
    last_block = text.rsplit("\x1b[J", 1)[1].splitlines()[1:]  # after c's permanent line
    assert last_block[0] == "  running b: epoch 2/9 val_acc=0.25"
    assert last_block[1].startswith(
        "  [#############.......] 2/3 done, 1 running, 0 pending, 1 stopped | best 0.5 | 0:00")
    assert "ETA" in last_block[1]
    assert "trial c completed (4 epochs)" in text  # not stopped: nothing stopped it
    # Finished trials are printed once, above the block; epochs are not printed as lines.
    permanent = [ln for ln in text.split("\x1b[J") if "stopped early" in ln]
    assert len(permanent) == 1
    assert "epoch 1/9 val_acc=0.5 | best" not in text


def test_a_resumed_sweep_counts_the_trials_it_kept_and_their_best(tmp_path) -> None:
    """Tune restores the trials an earlier run ended without an end hook: the lines start
    from them (done, stopped, best), and one whose end Tune's saved state missed (it reports
    its end again) is not counted twice. A trial the scheduler failed ended (STOP with its
    error); one whose loop raised has no end in the log and runs again."""
    log = decision_log(tmp_path)
    for record in ({"trial": "a", "epoch": 1, "metrics": {"val_acc": 0.9}, "action": "STOP"},
                   {"trial": "b", "epoch": 9, "metrics": {"val_acc": 0.7}, "end": True},
                   {"trial": "c", "epoch": 1, "metrics": {"val_acc": 0.95}},  # in flight
                   {"trial": "d", "epoch": 2, "value": None, "action": "STOP",  # as _fail logs
                    "error": "never reported val_acc", "metrics": {"loss": 0.3}},
                   {"trial": "e", "epoch": 1, "action": "STOP",  # NaN, screened as the worst
                    "metrics": {"val_acc": Objective("val_acc", "max", 9).worst()}}):
        log.append(record)
    out = FakeTTY()
    view = ProgressLines(Objective("val_acc", "max", 9), 6, stream=out, sweep_dir=str(tmp_path))
    view.kept(log.records())
    assert (view.done, view.stopped, view.best) == (4, 2, (0.9, "a"))
    assert "ETA" not in view.status_bar()  # nothing has ended in this run yet
    view.stream = io.StringIO()  # plain lines from here
    view.on_trial_start(0, [], TrialRecord("c"))
    view.on_trial_complete(0, [], TrialRecord("b", {CLOCK_KEY: 9}))  # b's end, again
    view.on_trial_error(0, [], TrialRecord("a"))  # a kept trial that errors when rerun
    view.on_trial_result(0, [], TrialRecord("c"), {"val_acc": 0.96, CLOCK_KEY: 2})
    view.on_trial_complete(0, [], TrialRecord("c", {CLOCK_KEY: 9}))
    lines = view.stream.getvalue().splitlines()
    assert lines[0].endswith("] 4/6 done | trial c started | best 0.9 (a)"), lines
    assert lines[1].endswith("] 4/6 done | trial b completed (9 epochs) | best 0.9 (a)"), lines
    assert lines[-1].endswith("] 5/6 done | trial c completed (9 epochs) | best 0.96 (c)")
    assert view.stopped == 2 and "ETA" in view.status_bar()  # c ended here: a pace to go by


@dataclass
class FailedTrial:
    """What Tune hands ``on_trial_recover``: the trial, its last result, its error so far."""

    trial_id: str
    error: BaseException | None
    last_result: dict = field(default_factory=dict)
    num_failures: int = 1
    max_failures: int = 1
    pickled_error_file: str | None = None  # where Tune writes it first (the trial's local dir)

    def get_pickled_error(self) -> BaseException | None:  # from the sweep dir, synced later
        return None if self.pickled_error_file else self.error


def _task_error() -> BaseException:
    from ray.exceptions import RayTaskError

    return RayTaskError("ImplicitFunc.train", "Traceback ...",
                        ValueError("loss exploded (lr=0.5)\nsecond line"))


def _node_lost() -> BaseException:
    from ray.exceptions import ActorUnavailableError

    return ActorUnavailableError("The actor is temporarily unavailable: Socket closed",
                                 b"\x00" * 16)


@pytest.mark.parametrize(
    ("error", "last", "expected"),
    [
        (_node_lost, {CLOCK_KEY: 5},
         "trial t1 failed: its driver's process or node died (ActorUnavailableError); "
         "retrying it from its last checkpoint (it had reached epoch 5), retry 1 of 1 "
         "(trial.max_retries)"),
        (_task_error, {}, "trial t1 failed: ValueError: loss exploded (lr=0.5); retrying it "
                          "from its last checkpoint, retry 1 of 1 (trial.max_retries)"),
        (lambda: None, {CLOCK_KEY: 2.0}, "trial t1 failed: its driver raised or died; retrying "
                                         "it from its last checkpoint (it had reached epoch 2)"),
    ],
)
@pytest.mark.parametrize("synced", [False, True])
def test_a_retried_trial_says_why_and_from_which_epoch(tmp_path, error, last, expected: str,
                                                       synced: bool) -> None:
    import cloudpickle

    out = io.StringIO()
    view = ProgressLines(Objective("val_acc", "max", 9), 3, stream=out, sweep_dir=str(tmp_path))
    trial = FailedTrial("t1", error(), last)
    if not synced and trial.error is not None:  # only in the trial's local directory so far
        trial.pickled_error_file = str(tmp_path / "error.pkl")
        (tmp_path / "error.pkl").write_bytes(cloudpickle.dumps(trial.error))
    view.on_trial_recover(0, [], trial)
    line = out.getvalue().splitlines()[-1]
    assert expected in line, line
    assert line.startswith("[") and "0/3 done" in line  # a plain line, like a trial's end


def test_a_note_is_a_permanent_line_above_the_block_on_a_terminal(tmp_path) -> None:
    out = FakeTTY()
    view = ProgressLines(Objective("val_acc", "max", 9), 3, stream=out, sweep_dir=str(tmp_path))
    view.on_trial_start(0, [], TrialRecord("b"))
    view.note("node 3faa0b12 joined the cluster (2 CPU)")
    text = out.getvalue()
    permanent, block = text.rsplit("\x1b[J", 1)[1].split("\n", 1)
    assert permanent.endswith("| node 3faa0b12 joined the cluster (2 CPU) | best -")
    assert block.startswith("  running b: starting")


def test_a_restarted_loop_is_said_once_at_its_next_report(tmp_path) -> None:
    from sweeps.protocol import FAILURE_KEY, RESTARTS_KEY

    out = io.StringIO()
    view = ProgressLines(Objective("val_acc", "max", 9), 3, stream=out, sweep_dir=str(tmp_path))
    line = ("rank 1 of 2 raised RuntimeError: boom after epoch 2; restarted from the checkpoint "
            "of epoch 2, attempt 2 of 3 (trial.max_failures)")
    view.on_trial_start(0, [], TrialRecord("a"))
    for epoch in (3, 4):
        view.on_trial_result(0, [], TrialRecord("a"), {"val_acc": 0.5, CLOCK_KEY: epoch,
                                                       RESTARTS_KEY: 1, FAILURE_KEY: line})
    view.on_trial_result(0, [], TrialRecord("a"), {"loss": 0.1})  # no metric, no clock
    assert out.getvalue().count(f"trial a {line}") == 1, out.getvalue()
