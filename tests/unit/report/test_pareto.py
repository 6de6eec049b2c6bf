"""The Pareto front: which trials, its summary section, its plot and its MLflow tags."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import pandas as pd
import pytest
from mlflow import MlflowClient

from sweeps.errors import ConfigError
from sweeps.report.pareto import (
    ParetoFront,
    format_pareto,
    front_of,
    pareto_front,
    pareto_plot,
    pareto_tags,
)
from sweeps.tracking.callback import MLflowTracking, TrackingSettings

NAN, INF = math.nan, math.inf
ACC_SIZE = {"acc": "max", "size": "min"}


def _rows(*points: tuple) -> list[dict]:
    return [dict(zip(("acc", "size", "loss"), p, strict=False)) for p in points]


@pytest.mark.parametrize(("rows", "objectives", "front"), [
    # directions: the same four points, each pair of directions picks its own corner
    (_rows((1, 1), (2, 2), (1, 2), (2, 1)), {"acc": "max", "size": "min"}, [3]),
    (_rows((1, 1), (2, 2), (1, 2), (2, 1)), {"acc": "max", "size": "max"}, [1]),
    (_rows((1, 1), (2, 2), (1, 2), (2, 1)), {"acc": "min", "size": "min"}, [0]),
    (_rows((1, 1), (2, 2), (1, 2), (2, 1)), {"acc": "min", "size": "max"}, [2]),
    # a trade-off: both ends and the knee are on it, the dominated middle is not
    (_rows((0.9, 100), (0.8, 10), (0.85, 50), (0.7, 20), (0.95, 1000)), ACC_SIZE, [0, 1, 2, 4]),
    # ties: equal points are all on the front; equal on one and worse on the other is not
    (_rows((0.9, 10), (0.9, 10), (0.8, 5)), ACC_SIZE, [0, 1, 2]),
    (_rows((0.9, 10), (0.9, 12)), ACC_SIZE, [0]),
    (_rows((0.9, 10), (0.8, 10)), ACC_SIZE, [0]),
    # NaN, inf, None, text and a missing metric: off the front, and they beat nobody
    (_rows((NAN, 1), (0.5, 10), (0.9, NAN)), ACC_SIZE, [1]),
    (_rows((INF, 1), (0.5, 10), (-INF, 1)), ACC_SIZE, [1]),
    (_rows((None, 1), ("high", 2), (0.5, 10)), ACC_SIZE, [2]),
    ([{"acc": 0.99}, {"acc": 0.5, "size": 10}, {"size": 1}], ACC_SIZE, [1]),
    (_rows((NAN, NAN), (NAN, 1)), ACC_SIZE, []),
    # one trial, none, all equal
    (_rows((0.5, 10)), ACC_SIZE, [0]),
    ([], ACC_SIZE, []),
    (_rows((0.5, 10), (0.5, 10), (0.5, 10)), ACC_SIZE, [0, 1, 2]),
    # ints and floats mix
    (_rows((1, 10), (0.5, 9.5)), ACC_SIZE, [0, 1]),
    # three objectives: dominated only when no worse on all three
    (_rows((0.9, 10, 0.3), (0.9, 10, 0.2), (0.8, 5, 0.5), (0.7, 20, 0.1), (0.7, 20, 0.4)),
     {"acc": "max", "size": "min", "loss": "min"}, [1, 2, 3]),
    # one objective: the best, ties included
    (_rows((0.9, 1), (0.7, 1), (0.9, 5)), {"acc": "max"}, [0, 2]),
])
def test_pareto_front(rows: list[dict], objectives: dict[str, str], front: list[int]) -> None:
    assert pareto_front(rows, objectives) == front


def test_a_data_frame_gives_its_row_labels() -> None:
    table = pd.DataFrame(_rows((0.9, 10), (0.1, 99), (0.8, 5)), index=[10, 11, 12])
    assert pareto_front(table, ACC_SIZE) == [10, 12]


def test_a_direction_that_is_not_min_or_max_says_how_to_fix_it() -> None:
    with pytest.raises(ConfigError, match=r"experiment.metrics.size: 'smallest'.*size: min"):
        pareto_front(_rows((1, 1)), {"acc": "max", "size": "smallest"})


TABLE = pd.DataFrame({
    "trial_id": ["a", "b", "c", "d", "e"], "lr": [0.1, 0.2, 0.3, 0.4, 0.5],
    "hidden": [64, 512, 8, 64, 32], "acc": [0.91, 0.97, 0.62, 0.80, NAN],
    "size": [5000, 80000, 600, 5000, 2000], "epochs": 6, "status": "completed"})


def test_front_of_orders_members_by_the_primary_then_the_others() -> None:
    front = front_of(TABLE, ACC_SIZE, ["lr", "hidden"])
    assert front.members == ("b", "a", "c")
    assert front.trial_ids == ("a", "b", "c", "d", "e")
    by_size_first = front_of(TABLE, {"size": "min", "acc": "max"})
    assert by_size_first.members == ("c", "a", "b")


def test_section_heading_counts_and_lists_members_with_values_and_params() -> None:
    text = format_pareto(TABLE, front_of(TABLE, ACC_SIZE, ["lr", "hidden"]))
    lines = text.splitlines()
    assert lines[0] == "Pareto front (acc max, size min): 3 of 5 trials"
    assert lines[1].split() == ["trial_id", "acc", "size", "lr", "hidden"]
    assert [ln.split()[0] for ln in lines[2:]] == ["b", "a", "c"]
    assert lines[2].split() == ["b", "0.97", "80000", "0.2", "512"]


def test_section_of_a_sweep_where_no_trial_reported_every_objective() -> None:
    table = TABLE.assign(size=NAN)
    text = format_pareto(table, front_of(table, ACC_SIZE))
    assert text == ("Pareto front (acc max, size min): 0 of 5 trials "
                    "(no trial reported every objective)")


@pytest.mark.parametrize("objectives", [
    ACC_SIZE, {"size": "min", "acc": "max"}, {"acc": "max", "size": "max"},
    {"acc": "max", "size": "min", "lr": "min"},
    {"acc": "max", "size": "min", "lr": "min", "hidden": "max"},
])
def test_plot_is_a_non_empty_png(tmp_path, objectives: dict[str, str]) -> None:
    path = pareto_plot(TABLE, objectives, tmp_path / "plots" / "pareto.png")
    assert path == tmp_path / "plots" / "pareto.png"
    assert path.stat().st_size > 5000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_needs_two_objectives(tmp_path) -> None:
    with pytest.raises(ValueError, match="2 or more objectives"):
        pareto_plot(TABLE, {"acc": "max"}, tmp_path / "p.png")


def test_tags_mark_every_trial_and_describe_the_front_for_the_parent() -> None:
    trials, parent = pareto_tags(front_of(TABLE, ACC_SIZE))
    assert {t: tags["sweeps.pareto"] for t, tags in trials.items()} == {
        "a": "true", "b": "true", "c": "true", "d": "false", "e": "false"}
    assert parent == {"sweeps.pareto_size": "3", "sweeps.pareto_objectives": "acc:max,size:min",
                      "sweeps.pareto_trials": "b,a,c"}


# -- MLflow, against a real SQLite store ---------------------------------------------------

@dataclass
class TrialRecord:  # the attributes of Tune's Trial the callback reads
    trial_id: str
    config: dict = field(default_factory=dict)
    last_result: dict = field(default_factory=dict)


def _tracked_sweep(tmp_path, uri: str, flush_timeout_s: float) -> tuple[MLflowTracking, int]:
    """Three trials journaled and the sweep finished with its front; returns records unsent."""
    tracking = MLflowTracking(TrackingSettings(
        uri=uri, experiment_name="mo", model_name=None, state_dir=str(tmp_path / "tracking"),
        max_epochs=2, scheduler="none", flush_timeout_s=flush_timeout_s, metric="acc"))
    tracking.start_sweep("mo", "uid-mo", {"a": 1}, {}, {})
    table = TABLE.iloc[:3]
    for row in table.itertuples():
        trial = TrialRecord(row.trial_id, {"lr": row.lr}, {"sweeps_epoch": 2})
        tracking.on_trial_start(0, [], trial)
        tracking.on_trial_result(0, [], trial, {"sweeps_step": 2, "acc": row.acc,
                                                "size": row.size})
        tracking.on_trial_complete(0, [], trial)
    summary_csv = tmp_path / "summary.csv"
    table.to_csv(summary_csv, index=False)
    front = ParetoFront(ACC_SIZE, ("b", "c"), ("a", "b", "c"))
    (tmp_path / "pareto.json").write_text(json.dumps({"size": 2}))
    return tracking, tracking.finish(summary_csv, None, pareto=front)


def _check_tags(uri: str) -> None:
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("mo").experiment_id])
    tags = {r.data.tags.get("sweeps.trial_id", "parent"): r.data.tags for r in runs}
    assert {t: tags[t]["sweeps.pareto"] for t in "abc"} == {"a": "false", "b": "true",
                                                           "c": "true"}
    assert {r.info.status for r in runs} == {"FINISHED"}
    parent = tags["parent"]
    assert (parent["sweeps.pareto_size"], parent["sweeps.pareto_objectives"],
            parent["sweeps.pareto_trials"]) == ("2", "acc:max,size:min", "b,c")
    parent_id = next(r.info.run_id for r in runs if "sweeps.trial_id" not in r.data.tags)
    assert {a.path for a in client.list_artifacts(parent_id)} >= {"pareto.json", "summary.csv"}


def test_front_members_runs_are_tagged_and_the_parent_has_the_front(tmp_path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _, unsent = _tracked_sweep(tmp_path, uri, flush_timeout_s=60)
    assert unsent == 0
    _check_tags(uri)


def test_tags_wait_in_the_journal_while_mlflow_is_unreachable_and_sync_sends_them(
        tmp_path) -> None:
    from sweeps.sync import sync

    (tmp_path / "not_a_dir").write_text("")  # a store that cannot open: unreachable
    down = f"sqlite:///{tmp_path / 'not_a_dir' / 'mlflow.db'}"
    tracking, unsent = _tracked_sweep(tmp_path, down, flush_timeout_s=1)
    pending = [r["op"] for _, r in tracking.journal.pending()]
    assert unsent == len(pending) and pending[-3:] == ["trial_tags", "artifacts", "sweep_end"]
    up = f"sqlite:///{tmp_path / 'mlflow.db'}"  # the server is back
    (tmp_path / "tracking" / "meta.json").write_text(json.dumps(
        {"uri": up, "experiment_name": "mo", "model_name": None}))
    assert sync(tmp_path, timeout_s=60) == 0
    _check_tags(up)
