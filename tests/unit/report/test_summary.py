"""The end-of-sweep summary picks a best checkpoint that is on disk."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from sweeps.report.summary import summarize
from sweeps.search.outcome import Objective, Verdict


@dataclass
class Finished:
    """What ``summarize`` reads of a Tune result: its history, config, path and error."""

    metrics_dataframe: pd.DataFrame
    path: str
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    error: Exception | None = None


def _history(tmp_path: Path, scores: list[float], kept: set[int]) -> pd.DataFrame:
    rows = []
    for epoch, score in enumerate(scores, 1):
        ckpt = tmp_path / "train" / "t1" / f"checkpoint_epoch_{epoch:04d}"
        if epoch in kept:
            ckpt.mkdir(parents=True)
        rows.append({"epoch": epoch, "score": score, "checkpoint_path": str(ckpt)})
    return pd.DataFrame(rows)


def test_tied_best_scores_pick_the_latest_kept_checkpoint(tmp_path) -> None:
    # Train kept 2 checkpoints by score; of the three tied at 1.0 it deleted the oldest.
    history = _history(tmp_path, [0.5, 1.0, 1.0, 1.0], kept={3, 4})
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 4), [])
    assert summary.best["epoch"] == 4
    assert Path(summary.best["checkpoint"]).is_dir()
    assert summary.table.iloc[0]["score"] == 1.0


def test_a_deleted_best_checkpoint_falls_back_to_the_best_kept_one(tmp_path) -> None:
    history = _history(tmp_path, [0.9, 0.7, 0.8], kept={2, 3})  # epoch 1's deleted by hand
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 3), [])
    assert (summary.best["epoch"], summary.best["value"]) == (3, 0.8)
    assert summary.table.iloc[0]["score"] == 0.9  # the trial's score is still its best epoch


def test_a_loop_without_checkpoints_still_has_a_best_trial(tmp_path) -> None:
    history = pd.DataFrame({"epoch": [0, 1, 2], "score": [0.5, float("nan"), 0.7]})
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 3), [])
    assert summary.best["value"] == 0.7 and summary.best["checkpoint"] is None
    assert summary.table.iloc[0]["status"] == "completed"


def test_all_nan_metrics_score_nan_without_crashing(tmp_path) -> None:
    history = pd.DataFrame({"epoch": [1, 2], "score": [float("nan"), float("nan")]})
    summary = summarize([Finished(history, str(tmp_path / "t1"), metrics={"trial_id": "t1"})],
                        Objective("score", "max", 3), [])
    assert summary.best is None and pd.isna(summary.table.iloc[0]["score"])


# -- multi-objective: the Pareto column, section and file ----------------------------------

def _trial(tmp_path: Path, tid: str, acc: list[float], size: list, loss: list[float],
           lr: float) -> Finished:
    history = pd.DataFrame({"epoch": range(1, len(acc) + 1), "val_acc": acc, "n_params": size,
                            "val_loss": loss, "trial_id": tid})
    return Finished(history, str(tmp_path / tid), config={"lr": lr}, metrics={"trial_id": tid})


def _multi(tmp_path: Path) -> list[Finished]:
    return [
        # best val_acc at epoch 2: its val_loss there (0.4) is taken, not its best (0.1)
        _trial(tmp_path, "big", [0.90, 0.97, 0.95], [80000] * 3, [0.5, 0.4, 0.1], 0.1),
        _trial(tmp_path, "small", [0.70, 0.80, 0.85], [600] * 3, [0.9, 0.8, 0.7], 0.2),
        _trial(tmp_path, "worse", [0.60, 0.75, 0.70], [5000] * 3, [0.9, 0.8, 0.7], 0.3),
        _trial(tmp_path, "no_size", [0.99, 0.99, 0.99], [None] * 3, [0.1] * 3, 0.4),
    ]


MULTI = {"val_acc": "max", "n_params": "min"}


def test_multi_objective_summary_has_a_pareto_column_and_front(tmp_path) -> None:
    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"], None, MULTI)
    table = summary.table.set_index("trial_id")
    assert list(summary.table.columns) == ["trial_id", "lr", "val_acc", "n_params", "epochs",
                                           "status", "pareto"]
    assert table["pareto"].to_dict() == {"no_size": False, "big": True, "small": True,
                                         "worse": False}
    assert summary.table["pareto"].dtype == bool
    assert (table.loc["big", "val_acc"], table.loc["big", "n_params"]) == (0.97, 80000)
    assert math.isnan(table.loc["no_size", "n_params"])
    assert summary.pareto.members == ("big", "small") and summary.pareto.params == ("lr",)
    assert summary.best["trial_id"] == "no_size"  # the primary still picks the best trial


def test_every_objective_is_read_at_the_report_where_the_primary_was_best(tmp_path) -> None:
    three = {**MULTI, "val_loss": "min"}
    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"], None, three)
    table = summary.table.set_index("trial_id")
    assert table.loc["big", "val_loss"] == 0.4  # epoch 2's, where val_acc peaked
    assert table.loc["small", "val_loss"] == 0.7


def test_written_summary_of_a_multi_objective_sweep_has_the_front(tmp_path) -> None:
    from sweeps.report.summary import pareto_json, write_summary

    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"], None, MULTI)
    write_summary(summary, tmp_path)
    written = pd.read_csv(tmp_path / "summary.csv").set_index("trial_id")
    assert written["pareto"].to_dict()["big"] and not written["pareto"].to_dict()["worse"]
    assert pd.read_parquet(tmp_path / "summary.parquet")["pareto"].sum() == 2
    front = json.loads(pareto_json(tmp_path).read_text())
    assert front["objectives"] == MULTI and (front["size"], front["trials"]) == (2, 4)
    assert front["members"][0] == {"trial_id": "big", "values": {"val_acc": 0.97,
                                                                "n_params": 80000},
                                   "params": {"lr": 0.1}}
    # the same directory summarized single-objective: no stale front is left behind
    write_summary(summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"]), tmp_path)
    assert not pareto_json(tmp_path).exists()


@pytest.mark.parametrize("metrics", [None, {}, {"val_acc": "max"}])
def test_zero_or_one_objective_changes_nothing(tmp_path, metrics) -> None:
    plain = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"])
    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"], None, metrics)
    assert summary.pareto is None and "pareto" not in summary.table
    pd.testing.assert_frame_equal(summary.table, plain.table)
    assert list(summary.table.columns) == ["trial_id", "lr", "val_acc", "epochs", "status"]


def test_console_prints_the_pareto_section(tmp_path, capsys) -> None:
    from sweeps import compose
    from sweeps.report.console import print_result
    from sweeps.report.result import SweepResult

    cfg = compose("digits_multiobjective")
    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"], None, MULTI)
    print_result(SweepResult(tmp_path, summary, None, {}), cfg)
    out = capsys.readouterr().out
    section = out[out.index("Pareto front"):].splitlines()
    assert section[0] == "Pareto front (val_acc max, n_params min): 2 of 4 trials"
    assert [ln.split()[0] for ln in section[2:4]] == ["big", "small"]
    assert "pareto front: " + str(tmp_path / "pareto.json") in out
    single = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"])
    print_result(SweepResult(tmp_path, single, None, {}), compose("digits"))
    assert "Pareto" not in capsys.readouterr().out


@pytest.mark.parametrize(("written", "switch", "shown"),
                         [(True, "true", True), (False, "true", False), (True, "false", False)])
def test_console_says_how_to_open_tensorboard(tmp_path, capsys, written, switch, shown) -> None:
    from sweeps import compose
    from sweeps.report.console import print_result
    from sweeps.report.result import SweepResult

    if written:
        (tmp_path / "tensorboard" / "t1").mkdir(parents=True)
    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"])
    print_result(SweepResult(tmp_path, summary, None, {}),
                 compose("digits", [f"tracking.tensorboard={switch}"]))
    line = f"  tensorboard: tensorboard --logdir {tmp_path / 'tensorboard'}\n"
    assert (line in capsys.readouterr().out) == shown


@pytest.mark.parametrize(("held", "logged", "line"), [
    ((0, "", ""), True, "  best model: logged to MLflow in the best trial's run and registered "
                        "as 'digits'"),
    ((0, "", ""), False, "  best model: not in MLflow: it refused the model (the warning above "
                         "says why)"),
    ((7, "MLflow cannot open /w/mlflow.db (duplicate column name: step)", "you move it aside"),
     False, "  best model: waiting in the journal (7 records): MLflow cannot open /w/mlflow.db "
            "(duplicate column name: step); they go to MLflow at the next start once you move "
            "it aside"),
])
def test_console_says_the_best_model_is_in_mlflow_only_when_it_is(tmp_path, capsys, held,
                                                                   logged, line) -> None:
    """Issue 50: "logged ... and registered" only when the sink logged it; records still in
    the journal are said to wait there, with why and what sends them."""
    from sweeps import compose
    from sweeps.report.console import print_result
    from sweeps.report.result import SweepResult
    from sweeps.tracking.target import TrackingTarget

    (tmp_path / "tracking").mkdir()
    summary = summarize(_multi(tmp_path), Objective("val_acc", "max", 3), ["lr"])
    # Not logged: the sink's model is the best trial's, but from another of its checkpoints
    # (a grown max_t's later epoch, say): that is no longer the best model.
    best = summary.best
    state = {"experiment_id": "1", "trials": {},
             "model_of": [best["trial_id"], f"{best['checkpoint']}-earlier"]}
    if logged:  # the checkpoint whose model the sink logged: the best one
        state.update(model_logged="models:/digits/1",
                     model_of=[best["trial_id"], best["checkpoint"]])
    (tmp_path / "tracking" / "runs.json").write_text(json.dumps(state))
    summary.best["model_form"] = "pytorch"
    target = TrackingTarget("sqlite:////w/mlflow.db", "default", "digits", "experiment.name")
    print_result(SweepResult(tmp_path, summary, None, {}, held, target), compose("digits"))
    out = capsys.readouterr().out.splitlines()
    assert line in out
    journal = tmp_path / "tracking" / "journal.jsonl"
    assert [ln for ln in out if ln.startswith("    not all there")] == (
        [f"    not all there: 7 records wait in {journal}"] if held[0] else [])


def test_a_tie_for_best_goes_to_the_same_trial_whatever_order_tune_gives(tmp_path) -> None:
    """Two trials reach the same best value (digits does, at 0.9554): the earlier epoch wins,
    then the smaller trial id, so a resumed sweep's end names the best its first end named
    (the chaos run of issue 50 registered one trial's model and named another best)."""
    trials = [_trial(tmp_path, "b", [0.5, 0.9], [1] * 2, [0.1] * 2, 0.1),
              _trial(tmp_path, "a", [0.5, 0.9], [1] * 2, [0.1] * 2, 0.2),
              _trial(tmp_path, "c", [0.9, 0.9], [1] * 2, [0.1] * 2, 0.3),
              _trial(tmp_path, "d", [0.2, 0.3], [1] * 2, [0.1] * 2, 0.4)]
    for order in (trials, trials[::-1], trials[1:] + trials[:1]):
        summary = summarize(order, Objective("val_acc", "max", 2), ["lr"])
        assert (summary.best["trial_id"], summary.best["epoch"]) == ("c", 1)
        assert list(summary.table["trial_id"]) == ["a", "b", "c", "d"]
    lowest = summarize(trials, Objective("val_acc", "min", 2), ["lr"])
    assert (lowest.best["trial_id"], lowest.best["epoch"]) == ("d", 1)


def test_a_trial_continued_on_a_later_start_keeps_its_best_epoch_from_an_earlier_one(
        tmp_path) -> None:
    """Issue 46: grown from max_t 3 to 5, a trial's Tune history holds epochs 4-5 only (Tune
    starts a fresh progress.csv for a trial without a Tune checkpoint); its best epoch, 3, is
    in its report log, and so is the checkpoint that is still kept."""
    from sweeps.protocol import CLOCK_KEY
    from sweeps.report.history import with_history
    from sweeps.trial import report_log

    run = tmp_path / "train" / "t1"
    ckpts = [run / f"checkpoint_epoch_{e:04d}" for e in range(1, 6)]
    for ckpt in ckpts[2:]:  # Train kept the best (3) and the newer ones
        ckpt.mkdir(parents=True)
    scores = [0.80, 0.90, 0.97, 0.95, 0.94]
    for epoch, (score, ckpt) in enumerate(zip(scores, ckpts, strict=True), 1):
        report_log.append(run, {"score": score, CLOCK_KEY: float(epoch)}, epoch, str(ckpt))
    listed = pd.DataFrame({"score": scores[3:], CLOCK_KEY: [4.0, 5.0], "trial_id": "t1",
                           "checkpoint_path": [str(c) for c in ckpts[3:]]})
    result = Finished(listed, str(tmp_path / "t1"), metrics={"trial_id": "t1"})
    objective = Objective("score", "max", 5)
    assert summarize([result], objective, []).best["epoch"] == 4  # what Tune alone shows
    whole = with_history([result], tmp_path)
    assert list(whole[0].metrics_dataframe[CLOCK_KEY]) == [1.0, 2.0, 3.0, 4.0, 5.0]
    summary = summarize(whole, objective, [])
    assert (summary.best["epoch"], summary.best["value"]) == (3, 0.97)
    assert summary.best["checkpoint"] == str(ckpts[2])
    assert summary.table.loc[0, "score"] == 0.97 and summary.table.loc[0, "epochs"] == 5
    assert whole[0].path == result.path  # the rest is Tune's result's
    complete = Finished(pd.DataFrame({"score": scores, CLOCK_KEY: [1.0, 2.0, 3.0, 4.0, 5.0],
                                      "checkpoint_path": [str(c) for c in ckpts]}),
                        str(tmp_path / "t1"), metrics={"trial_id": "t1"})
    assert with_history([complete], tmp_path)[0] is complete  # nothing missing: not read


def test_a_trial_the_budget_ended_while_tune_handed_it_a_process_is_not_another_trial(
        tmp_path) -> None:
    """Issue 46: with trials reusing processes, a trial the budget ended just as Tune gave it
    the process of a trial that had ended carries that process's last metrics (the other
    trial's id and config; Tune's defaults for a trial that never reported). The table listed
    the other trial twice (once as "never reported val_acc": the sweep exited 1)."""
    from sweeps.report.history import with_history

    done = _trial(tmp_path, "bb15c362", [0.7, 0.8, 0.9], [1] * 3, [0.5] * 3, 0.05)
    done.metrics["config"] = {"lr": 0.05}
    foreign = Finished(pd.DataFrame(), str(tmp_path / "f98d6eb9"), config={"lr": 0.05},
                       metrics={"trial_id": "bb15c362", "config": {"lr": 0.05}})
    verdicts = {"f98d6eb9": Verdict(0, budget="epochs")}
    summary = summarize(with_history([done, foreign], tmp_path),
                        Objective("val_acc", "max", 3), ["lr"], verdicts)
    rows = summary.table.set_index("trial_id")
    assert list(summary.table["trial_id"]) == ["bb15c362", "f98d6eb9"]
    assert rows.loc["f98d6eb9", "status"] == "not started" and pd.isna(rows.loc["f98d6eb9", "lr"])
    assert summary.failed == {} and summary.best["trial_id"] == "bb15c362"
