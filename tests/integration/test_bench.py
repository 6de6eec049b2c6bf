"""Smoke test: every benchmark runs once with tiny sizes, so `python -m bench` keeps working.

Not a performance assertion (timings are the benchmarks' job, as ratios, never a test's).
The tests that start Ray are ``slow``; the ones of the benchmarks' arithmetic are not.
"""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_bench_quick_runs_every_benchmark(monkeypatch) -> None:
    import ray

    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # Ray workers import bench.workload

    from bench.__main__ import run

    if ray.is_initialized():  # the benchmarks start (and stop) their own instance
        ray.shutdown()
    result = run(quick=True)
    overhead = result["overhead"]["median"]
    for side in ("plain", "sweeps"):
        assert overhead[side]["wall_s"] > overhead[side]["training_s"] > 0
    _check_phases(result["overhead"])
    _check_scale(result["scale"], trials=4)
    assert [r["poll_interval_s"] for r in result["report_latency"]] == [2.0, 0.1]
    assert all(r["median_s"] > 0 for r in result["report_latency"])
    # The ~1 s row comes from the overhead runs, then one measured size.
    assert [r["trial_training_s"] for r in result["fraction"]] == [0.1, 0.5]
    assert all(0 < r[side]["fraction"] < 1 for r in result["fraction"]
               for side in ("plain", "sweeps"))
    search = result["search_efficiency"]
    rows = search["rows"]
    assert list(rows) == ["random (full budget)", "sweeps TPE+ASHA", "Hydra Optuna sweeper"]
    full_budget = search["trials"] * search["epochs"]
    # Random and Hydra's sweeper prune nothing: every trial trained every epoch.
    assert rows["random (full budget)"]["epochs_total"] == full_budget
    assert rows["Hydra Optuna sweeper"]["epochs_total"] == full_budget
    assert rows["random (full budget)"]["best"] == search["target_val_acc"]
    assert 1 <= rows["random (full budget)"]["epochs_to_target"] <= full_budget
    assert 1 <= rows["sweeps TPE+ASHA"]["epochs_total"] <= full_budget
    assert not ray.is_initialized()


def _check_phases(result: dict) -> None:
    """Every trial of both sides was found in Ray's state API and cut into phases that add up
    to its span less its training; the plain script's trials start a Train run."""
    from bench.phases import PHASES, TRACKING

    assert result["workers"] == 2 and result["executor"] is None
    assert result["phases_measured"] is True
    for side in ("plain", "sweeps"):
        summary = result["phases"][side]
        assert set(PHASES) | {TRACKING, "overhead", "head", "tail", "processes"} <= set(summary)
        for run in result["runs"][side]:
            assert len(run["trials"]) == result["trials"]
            for trial in run["trials"]:
                events, phases = trial["events"], trial["phases"]
                assert None not in (events["start"], events["actor_ready"], events["end"],
                                    events["loop_entry"], events["first_report"])
                assert phases["trial_actor_start"] > 0
                span = events["end"] - events["start"]
                training = events["training_first"] + events["training_rest"]
                assert sum(v or 0.0 for k, v in phases.items() if k != TRACKING) == (
                    pytest.approx(span - training, abs=1e-6))
                assert {a["cls"] for a in trial["actors"]} >= {"ImplicitFunc"}
    plain = result["phases"]["plain"]
    assert plain["controller_start"] > 0 and plain["worker_start"] > 0
    assert plain["actors"]["RayTrainWorker"]["count"] == 2
    assert plain[TRACKING] is None  # the plain script tracks nothing
    assert result["phases"]["sweeps"][TRACKING] is not None  # its MLflow runs were seen


def _check_scale(result: dict, trials: int) -> None:
    assert result["trials"] == result["trials_timed"] == trials
    assert result["overhead"]["window"] == trials // 2
    assert result["overhead"]["ratio"] > 0
    assert result["mlflow"]["finished"] == trials
    assert result["mlflow"]["complete_after_last_trial_s"] is not None
    assert 0 < result["rss_mb"]["start"] <= result["rss_mb"]["peak"]
    assert set(result["met"]) == set(result["targets"])
    assert len(result["per_trial"]) == trials


def _log(*reports: tuple) -> list[dict]:
    """Decision-log records from (t, trial, epoch, value[, extra fields])."""
    return [{"trial": r[1], "epoch": r[2], "value": r[3], "t": 100.0 + r[0],
             **(r[4] if len(r) > 4 else {})} for r in reports]


def test_search_efficiency_counts_reports_and_takes_medians_over_seeds() -> None:
    """Ray-free: what ``python -m bench.search_efficiency`` makes of the sweeps' decision logs.

    Epochs trained are reports (a closing record repeating the last report is not one; PBT's
    PAUSE record and the epochs an exploited trial trains again are); the target is the median
    of random's bests; a seed that misses it is infinite for the median.
    """
    from bench.search_efficiency import CONTENDERS, reports_of, summarize

    end = {"end": True}
    pause = {"action": "PAUSE", "exploit": {"donor": "b", "donor_epoch": 1}}
    pbt = _log((1, "a", 1, 0.5), (2, "b", 1, 0.6), (3, "a", 2, 0.55, pause),
               (4, "b", 2, 0.7), (5, "a", 2, 0.8), (6, "a", 3, 0.85), (6.5, "a", 3, 0.85, end))
    reports = reports_of(pbt, start=100.0)
    assert [(r[1], r[2]) for r in reports] == [("a", 1), ("b", 1), ("a", 2), ("b", 2),
                                               ("a", 2), ("a", 3)]

    def run(*reports: tuple, records: list[dict] | None = None) -> dict:
        return {"start": 100.0, "end": 110.0, "records": records or _log(*reports)}

    runs = {  # random's bests 0.9, 0.8, 0.7: the target is 0.8
        "random": {0: run((1, "a", 1, 0.9)), 1: run((1, "a", 1, 0.5), (3, "a", 2, 0.8)),
                   2: run((2, "a", 1, 0.7))},
        "tpe_asha": {0: run((1, "a", 1, 0.85)), 1: run((1, "a", 1, 0.6)),
                     2: run((1, "a", 1, 0.6))},
        "pbt": {0: run(records=pbt), 1: run(records=pbt), 2: run((9, "a", 1, 0.95))},
    }
    result = summarize(runs, trials=2, epochs=3, workers=1)
    assert result["target_val_acc"] == 0.8
    random, tpe, pbt_row = (result["rows"][CONTENDERS[c][0]] for c in ("random", "tpe_asha",
                                                                       "pbt"))
    assert (random["reached"], random["epochs_to_target"], random["seconds_to_target"]) == (2, 2, 3)
    assert (tpe["reached"], tpe["epochs_to_target"], tpe["epochs_ratio"]) == (1, None, None)
    assert (pbt_row["reached"], pbt_row["epochs_to_target"], pbt_row["seconds_to_target"]) == (
        3, 5, 5)
    assert (pbt_row["epochs_ratio"], pbt_row["seconds_ratio"], pbt_row["exploits"]) == (
        2.5, 5 / 3, 2)
    assert result["per_seed"][CONTENDERS["pbt"][0]]["0"]["epochs_total"] == 6
    assert random["seconds_total"] == 10.0


@pytest.mark.slow
def test_search_efficiency_runs_each_sweep_in_its_own_process(tmp_path) -> None:
    """``compare`` at tiny size: random (always) and PBT, one seed, each sweep a process of its
    own (no lock taken: run the suite under ``flock /tmp/sweeps-ray.lock``); no Ray left here."""
    import ray

    from bench.search_efficiency import CONTENDERS, compare, format_markdown

    result = compare([0], trials=2, epochs=2, workers=1, contenders=["pbt"], lock=None,
                     storage=tmp_path / "sweeps")
    names = [CONTENDERS[c][0] for c in ("random", "pbt")]
    assert list(result["rows"]) == list(result["per_seed"]) == names
    random, pbt = (result["per_seed"][name]["0"] for name in names)
    assert random["epochs_total"] == pbt["epochs_total"] == 4  # every trial, every epoch
    assert random["best"] == result["target_val_acc"]
    assert 1 <= random["epochs_to_target"] <= 4
    assert result["rows"][names[0]]["epochs_ratio"] == 1.0
    assert (tmp_path / "sweeps" / "pbt-s0" / "state" / "scheduler.jsonl").is_file()
    assert "| PBT | 0 |" in format_markdown(result)
    assert not ray.is_initialized()


def _defaults_run(*reports: tuple) -> dict:
    """A sweep as ``bench.search_defaults.run_one`` returns it: reports (seconds, trial, epoch,
    value) since its start."""
    return {"start": 100.0, "end": 110.0, "reports": list(reports)}


def test_search_defaults_target_ratios_and_goal() -> None:
    """Ray-free: what ``python -m bench.search_efficiency --defaults`` makes of 3 seeds' reports.

    Random's bests 0.9, 0.8, 0.7: the target is 0.8; a seed that misses it counts as infinite.
    """
    from bench.search_defaults import format_markdown, summarize

    random = {0: _defaults_run((1, "a", 1, 0.9)),
              1: _defaults_run((1, "a", 1, 0.5), (3, "a", 2, 0.8)),
              2: _defaults_run((2, "a", 1, 0.7))}
    runs = {
        "random": random,
        "default": {0: _defaults_run((1, "a", 1, 0.85)), 1: _defaults_run((1, "a", 1, 0.81)),
                    2: _defaults_run((1, "a", 1, 0.6), (2, "b", 1, 0.95))},
        "previous": {s: _defaults_run((1, "a", 1, 0.6)) for s in range(3)},
    }
    result = summarize("digits", runs)
    assert (result["target"], result["random_best_per_seed"], result["seeds"]) == (
        0.8, [0.9, 0.8, 0.7], [0, 1, 2])
    rows = result["rows"]
    base, default, previous = rows["random"], rows["default"], rows["previous"]
    assert (base["reached"], base["epochs_to_target"], base["seconds_to_target"]) == (2, 2, 3)
    assert (base["epochs_ratio"], base["seconds_ratio"], base["best"]) == (1.0, 1.0, 0.8)
    assert (default["reached"], default["epochs_to_target"], default["seconds_to_target"]) == (
        3, 1, 1)
    assert (default["epochs_ratio"], default["seconds_ratio"]) == (0.5, 1 / 3)
    assert (default["best"], default["best_low"], default["best_high"]) == (0.85, 0.81, 0.95)
    assert (default["epochs_total"], default["seconds_total"]) == (1, 10.0)
    assert default["per_seed"]["2"]["epochs_to_target"] == 2
    assert (previous["reached"], previous["epochs_to_target"], previous["epochs_ratio"]) == (
        0, None, None)
    assert result["goal"] == {"best_at_least_random": True, "epochs_ratio_at_most_half": True}
    table = format_markdown({"experiments": {"digits": result}}).splitlines()
    assert table[2:] == [
        "| digits | random | 0.8000 (0.7000-0.9000) | 2/3 | 2 | 1.00 | 3 | 1.00 | 1 |",
        "| digits | default | 0.8500 (0.8100-0.9500) | 3/3 | 1 | 0.50 | 1 | 0.33 | 1 |",
        "| digits | previous | 0.6000 (0.6000-0.6000) | 0/3 | not reached | not reached | "
        "not reached | not reached | 1 |"]

    runs["default"] = runs.pop("previous")  # below random's best, never reaching its target
    assert summarize("digits", runs)["goal"] == {"best_at_least_random": False,
                                                 "epochs_ratio_at_most_half": False}
    runs["default"] = {s: _defaults_run((1, "a", 1, 0.5), (2, "a", 2, 0.9)) for s in range(3)}
    assert summarize("digits", runs)["goal"] == {  # as good, but no faster than random
        "best_at_least_random": True, "epochs_ratio_at_most_half": False}
    del runs["default"]
    assert summarize("digits", runs)["goal"] is None


@pytest.mark.parametrize(("contender", "parsed"), [
    ("random/g1r3", (None, False, {"grace_period": 1, "reduction_factor": 3})),
    ("random+base/none", (None, True, None)),
    ("tpe4/g1r3", ({"n_startup_trials": 4}, False, {"grace_period": 1, "reduction_factor": 3})),
    ("tpe2+base/g1r3", ({"n_startup_trials": 2}, True,
                        {"grace_period": 1, "reduction_factor": 3})),
    ("tpe10+base/g2r4", ({"n_startup_trials": 10}, True,
                         {"grace_period": 2, "reduction_factor": 4})),
    ("tpe3/none", ({"n_startup_trials": 3}, False, None)),
])
def test_search_sim_parses_contenders(contender, parsed) -> None:
    from bench.search_sim import parse

    assert parse(contender) == parsed


def test_search_sim_runs_a_tiny_sweep_from_experiment_params() -> None:
    """Ray-free: 3 trials of digits (real training: 3 s on an idle 2-core machine, 25 s on a
    loaded one), trial 0 the experiment's own params (its first epoch is that config's first
    epoch), ASHA stopping some at rung 1."""
    from bench.search_sim import experiment, simulate

    reports = simulate("digits", "tpe2+base/g1r3", seed=0, samples=3)
    cfg, curve = experiment("digits")
    assert sorted({r[0] for r in reports}, key=int) == ["0", "1", "2"]
    for trial in ("0", "1", "2"):
        epochs = [r[1] for r in reports if r[0] == trial]
        assert epochs == list(range(1, len(epochs) + 1))
        assert len(epochs) in (1, 3, 9)  # ASHA g1r3 rungs, max_t 9
    assert len(reports) < 3 * cfg.scheduler.max_t  # ASHA stopped a trial at a rung
    assert reports[0][:2] == ("0", 1)
    assert reports[0][2] == next(curve(dict(cfg.experiment.params), 0, 0))
