"""Ray-free: what ``python -m bench.overhead`` and ``python -m bench.scale`` make of timestamps.

The phase arithmetic (``bench.phases``), the tables with phases absent (the inline executor
starts no Train controller or workers), a ResultGrid's reports, the first/last window ratio
and the MLflow watcher against a real SQLite store.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pandas as pd
import pytest

from bench import phases as ph
from bench.overhead import PHASE_ROWS, Run, format_table, summarize
from bench.scale import format_table as scale_table
from bench.scale import summarize as scale_summary
from bench.scale import waits, window_ratio


def _actor(cls: str, requested: float, running: float, ready: float, **extra) -> dict:
    return {"cls": cls, "requested": requested, "running": running, "ready": ready, **extra}


TRAIN_RUN = [_actor("_QueueActor", 3.0, 3.5, 3.7), _actor("TrainController", 3.1, 3.6, 6.0),
             _actor("SynchronizationActor", 6.1, 6.8, 7.5),
             _actor("RayTrainWorker", 6.1, 7.0, 8.0), _actor("RayTrainWorker", 6.1, 7.2, 8.5)]
ROWS = [{"t_loop_entry": 10.0, "t_report": 12.5, "t_proc_start": 6.9, "epoch_time_s": 1.0},
        {"t_loop_entry": 10.0, "t_report": 14.0, "t_proc_start": 6.9, "epoch_time_s": 1.2},
        {"t_loop_entry": 10.0, "t_report": 15.5, "t_proc_start": 6.9, "epoch_time_s": 1.4}]


def test_a_train_run_trial_is_cut_into_every_phase_that_adds_up_to_its_span() -> None:
    span = {"start": 0.0, "actor_ready": 2.0, "end": 17.0}
    events = ph.trial_events(span, TRAIN_RUN, list(reversed(ROWS)), tracked=17.3)
    assert (events["controller_asked"], events["controller_ready"]) == (3.1, 6.0)
    assert events["workers_ready"] == 8.5  # the last worker up
    assert (events["first_report"], events["last_report"], events["proc_start"]) == (
        12.5, 15.5, 6.9)
    got = ph.phases(events)
    assert got == pytest.approx({
        "trial_actor_start": 2.0, "driver_setup": 1.1, "controller_start": 2.9,
        "worker_start": 2.5,
        "loop_entry": 1.5, "first_report": 1.5, "reports": 0.4, "teardown": 1.5,
        "tracking": 0.3})
    training = sum(r["epoch_time_s"] for r in ROWS)
    assert sum(v for k, v in got.items() if k != ph.TRACKING) == pytest.approx(
        span["end"] - span["start"] - training)


@pytest.mark.parametrize(("children", "absent"), [
    ([], {"driver_setup", "controller_start", "worker_start"}),  # inline: no Train run
    (TRAIN_RUN[:2], {"worker_start"}),  # a controller whose workers never came up
])
def test_a_missing_event_leaves_its_phase_absent_and_the_next_counts_from_before(
        children: list[dict], absent: set[str]) -> None:
    span = {"start": 0.0, "actor_ready": 2.0, "end": 17.0}
    got = ph.phases(ph.trial_events(span, children, ROWS))
    assert {k for k, v in got.items() if v is None} == absent | {"tracking"}
    last_before_loop = 6.0 if children else 2.0
    assert got["loop_entry"] == pytest.approx(10.0 - last_before_loop)


def test_a_trial_without_events_or_reports_has_every_phase_absent() -> None:
    empty = {"start": None, "actor_ready": None, "end": None}
    got = ph.phases(ph.trial_events(empty, [], []))
    assert set(got.values()) == {None}
    assert ph.median_phases([got])["overhead"] == 0.0


def test_a_reused_actor_is_split_into_its_trials_at_each_reset() -> None:
    actor = {"requested": 0.0, "ready": 2.0}
    calls = [{"method": "__ray_ready__", "requested": 0.0, "end": 2.0},
             {"method": "train", "requested": 2.0, "end": 5.0},
             {"method": "reset", "requested": 5.5, "end": 5.6},
             {"method": "train", "requested": 5.6, "end": 7.0},
             {"method": "train", "requested": 7.0, "end": None},  # never recorded: ignored
             {"method": "stop", "requested": 7.1, "end": 7.2}]
    spans = ph.split_actor(actor, list(reversed(calls)), 3)
    assert spans == [{"start": 0.0, "actor_ready": 2.0, "end": 5.0},
                     {"start": 5.5, "actor_ready": 5.6, "end": 7.2},
                     {"start": None, "actor_ready": None, "end": None}]  # more trials than seen


def test_medians_count_an_absent_phase_as_zero_unless_absent_everywhere() -> None:
    trials = [{"trial_actor_start": 2.0, "controller_start": None, "tracking": 0.5},
              {"trial_actor_start": None, "controller_start": None, "tracking": 0.7},
              {"trial_actor_start": None, "controller_start": None, "tracking": None}]
    got = ph.median_phases(trials)
    assert got["trial_actor_start"] == 0.0  # reused actors start nothing
    assert got["controller_start"] is None
    assert got["tracking"] == 0.5
    assert got["overhead"] == 0.0  # tracking is not part of a trial's span


def test_actor_breakdown_and_sweep_phases() -> None:
    got = ph.actor_breakdown([TRAIN_RUN, TRAIN_RUN[:2]])
    assert got["RayTrainWorker"] == {"count": 1.0, "launch_s": pytest.approx(1.0),
                                     "init_s": pytest.approx(1.15)}
    assert got["TrainController"]["count"] == 1.0
    assert ph.sweep_phases(0.0, 30.0, [{"start": 5.0, "end": 20.0},
                                       {"start": 3.0, "end": 12.0},
                                       {"start": None, "end": None}]) == {
        "head": 3.0, "tail": 10.0, "gap": -7.0}  # overlapping trials: a negative gap
    assert ph.sweep_phases(0.0, 1.0, []) == {"head": None, "tail": None, "gap": None}


def _run_entry(children: list[dict], overhead: float) -> dict:
    span = {"start": 0.0, "actor_ready": 2.0, "end": 17.0}
    events = ph.trial_events(span, children, ROWS)
    return {"wall_s": 20.0, "training_s": 3.6, "overhead_per_trial_s": overhead,
            "sweep": {"head": 1.0, "tail": 2.0, "gap": None},
            "trials": [{"trial_id": "a", "phases": ph.phases(events), "events": events,
                        "actors": [{"cls": "ImplicitFunc", "requested": 0.0, "running": 0.8,
                                    "ready": 2.0, "exited": 18.0}, *children]}]}


def test_the_overhead_table_prints_absent_phases_as_dashes() -> None:
    runs = {"plain": [_run_entry(TRAIN_RUN, 16.4)], "sweeps": [_run_entry([], 12.0)]}
    result = {"repeats": 1, "runs": runs,
              "median": {side: {k: rs[0][k] for k in ("wall_s", "training_s",
                                                        "overhead_per_trial_s")}
                         for side, rs in runs.items()},
              "phases": {side: summarize(rs) for side, rs in runs.items()}}
    assert result["phases"]["sweeps"]["controller_start"] is None
    assert result["phases"]["plain"]["processes"] == 6
    assert result["phases"]["sweeps"]["gap"] is None
    table = format_table(result)
    assert len(table.splitlines()) == 4 + 1 + len(PHASE_ROWS) + 2  # totals, phases, actors
    controller = next(ln for ln in table.splitlines() if "controller start" in ln)
    assert controller.split()[-3:] == ["2.90", "-", "-2.90"]
    assert "RayTrainWorker x2" in table
    no_phases = {**result, "phases": {"plain": {}, "sweeps": {}}}
    assert len(format_table(no_phases).splitlines()) == 4


def test_run_rows_group_a_result_grids_reports_by_trial() -> None:
    frame = pd.DataFrame([{"trial_id": "t1", "pid": 7, "epoch": 1, "epoch_time_s": 0.5,
                           "t_report": 3.0, "score": 0.9},
                          {"trial_id": "t1", "pid": 7, "epoch": 2, "epoch_time_s": 0.25,
                           "t_report": 4.0, "score": 0.95}])
    grid = [SimpleNamespace(metrics_dataframe=frame), SimpleNamespace(metrics_dataframe=None)]
    run = Run(called=0.0, wall=5.0, results=grid)
    assert run.rows() == {"t1": [{"pid": 7, "t_report": 3.0, "epoch_time_s": 0.5, "epoch": 1},
                                 {"pid": 7, "t_report": 4.0, "epoch_time_s": 0.25,
                                  "epoch": 2}]}
    assert run.training == 0.75


@pytest.mark.parametrize(("values", "window", "expected"), [
    ([1.0, 1.0, 1.0, 2.0, 2.0, 2.0], 50, (3, 1.0, 2.0, 2.0)),
    ([1.0, 9.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.2], 3, (3, 1.0, 1.1, 1.1)),
    ([4.0], 50, (1, None, None, None)),
    ([0.0, 0.0, 1.0, 1.0], 2, (2, 0.0, 1.0, None)),  # no ratio to a zero
])
def test_window_ratio(values: list[float], window: int, expected: tuple) -> None:
    got = window_ratio(values, window)
    assert (got["window"], got["first_median_s"], got["last_median_s"], got["ratio"]) == expected


def test_waits_run_from_the_end_that_freed_the_slot() -> None:
    trials = [{"start": 0.0, "end": 4.0, "actor": "a", "fresh": True},
              {"start": 0.2, "end": 3.0, "actor": "b", "fresh": True},
              {"start": 3.1, "end": 6.0, "actor": "b", "fresh": False},  # reused b
              {"start": 4.4, "end": 8.0, "actor": "a", "fresh": False},  # not after b's end
              {"start": 9.0, "end": 10.0, "actor": "c", "fresh": True}]  # a new process
    assert waits(trials) == pytest.approx([None, None, 0.1, 0.4, 1.0])


def test_scale_summary_sets_each_target_and_survives_missing_timelines() -> None:
    actors = {"a": {"id": "a", "requested": 100.0}, "b": {"id": "b", "requested": 101.0}}
    timelines = {f"t{i}": {"events": {"start": 100.0 + i, "end": 101.5 + i},
                           "actor": actors["ab"[i % 2]]} for i in range(4)}
    timelines["lost"] = {"events": {"start": None, "end": None}, "actor": None}
    rows = {f"t{i}": [{"epoch_time_s": 0.5}] for i in range(4)}
    watcher = SimpleNamespace(
        finished={f"t{i}": 106.0 for i in range(4)}, status={f"t{i}": "FINISHED" for i in range(4)},
        end_time={f"t{i}": 105.0 for i in range(4)}, polls=9, errors=[],
        complete_at=lambda n: 106.0 if n <= 4 else None)
    run = Run(called=100.0, wall=8.0, results=[])
    rss = {"cold_start": 100 * 2**20, "start": 500 * 2**20, "end": 520 * 2**20,
           "peak": 530 * 2**20, "samples": 40, "warmup_trials": 2}
    got = scale_summary(4, 0.5, 50, None, run, rows, timelines, watcher, rss)
    assert got["trials_timed"] == 4
    assert got["overhead"]["ratio"] == pytest.approx(1.0)
    assert [p["fresh"] for p in got["per_trial"]] == [True, True, False, False]
    assert [p["wait_s"] for p in got["per_trial"]] == [None, None, 0.5, 0.5]
    assert got["overhead_with_wait"]["ratio"] == pytest.approx(1.5 / 1.0)
    assert got["last_trial_end_s"] == pytest.approx(4.5)
    assert got["mlflow"]["complete_after_last_trial_s"] == pytest.approx(1.5)
    assert got["mlflow"]["median_lag_s"] == pytest.approx(1.0)
    assert (got["rss_mb"]["growth"], got["rss_mb"]["peak_growth"]) == (20.0, 30.0)
    assert got["met"] == {"overhead_ratio": True, "overhead_with_wait_ratio": False,
                          "rss_growth_mb": True, "mlflow_lag_s": True}
    assert scale_table(got).count("MISSED") == 1
    incomplete = scale_summary(5, 0.5, 50, None, run, rows, timelines, watcher, rss)
    assert incomplete["mlflow"]["complete_after_last_trial_s"] is None
    assert incomplete["met"]["mlflow_lag_s"] is False
    assert scale_table(incomplete).count("MISSED") == 2


def test_the_mlflow_watcher_sees_trial_runs_end_and_ignores_older_ones(tmp_path) -> None:
    from mlflow import MlflowClient

    from bench.mlflow_watch import RunWatcher

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    eid = client.create_experiment("bench")
    old = client.create_run(eid, tags={"sweeps.role": "trial", "sweeps.trial_id": "old"})
    client.set_terminated(old.info.run_id, "FINISHED", end_time=int(time.time() * 1000) - 60_000)
    since = time.time()
    watcher = RunWatcher(uri, "bench", since=since, interval_s=0.05).start()
    runs = {t: client.create_run(eid, tags={"sweeps.role": "trial", "sweeps.trial_id": t})
            for t in ("a", "b")}
    parent = client.create_run(eid, tags={"sweeps.role": "parent"})
    client.set_terminated(parent.info.run_id, "FINISHED")
    client.set_terminated(runs["a"].info.run_id, "FINISHED")
    deadline = time.monotonic() + 10
    while "a" not in watcher.finished and time.monotonic() < deadline:
        time.sleep(0.05)
    assert watcher.complete_at(2) is None
    client.set_terminated(runs["b"].info.run_id, "FAILED")
    watcher.stop()
    assert set(watcher.finished) == {"a", "b"}
    assert watcher.status == {"a": "FINISHED", "b": "FAILED"}
    assert watcher.complete_at(1) == watcher.finished["a"] >= since
    assert watcher.complete_at(2) is None  # b did not finish
    assert watcher.errors == []
