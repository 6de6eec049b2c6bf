"""python -m bench.scale [--trials 200] [--epoch-s 0.05] [--window 50] [--warmup 2] [--executor X]

A long sweep: ``--trials`` one-epoch trials of the tiny MLP of ``bench.workload:train``, one
Train worker each (``scaling.num_workers=1``; ``search=random scheduler=none
scheduler.max_t=1``), MLflow tracking on (SQLite in a temporary directory), in a private Ray
instance of 2 CPUs with the dashboard (Ray's state API gives each trial's start and end:
``bench.timeline``). Does anything grow with the number of trials? Three figures, each with
its target:

1. **per-trial overhead** (trial wall from Tune asking for its actor, or a reused actor's
   reset, to its end, minus the epoch's training): median of the last ``--window`` trials
   over the median of the first ``--window`` (in start order; the window shrinks to half the
   trials for short runs). Target <= 1.2. The same with each trial's **wait** added: from the
   end that freed its slot (its reused actor's previous trial, else the latest trial end
   before it started) to its start, which is the driver's own time between trials (Tune's
   loop, the searcher, sweeps' callbacks): a driver that slows down as trials pile up shows
   there, not in the trial's span.
2. **driver memory**: this process's RSS (psutil) right before ``run_sweep`` and right after
   it returns, and the peak from a thread sampling every 0.2 s. Target: growth < 200 MB.
   A sweep's driver imports Tune, MLflow, torch and matplotlib once (about 450 MB on its
   first sweep, whatever its size), so a ``--warmup`` sweep of a few trials runs first in
   this process and the growth is counted from after it (``cold_start`` is before it).
3. **MLflow lag**: how long after the last trial ended every trial's run was in MLflow and
   FINISHED, polled from a thread through ``mlflow.MlflowClient`` every 0.25 s
   (``bench.mlflow_watch``; it keeps polling up to 10 s after the sweep returns).
   Target < 5 s.

``--executor`` passes ``trial.executor`` (left at its default, ``auto``, when not given).
Writes ``bench/results/scale.json`` and prints a table. 200 trials take about 200 x the
per-trial overhead / 2 (two trials run at once).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from typing import Any

from bench.overhead import RESULTS, Run, sweeps_config
from sweeps.trial.backends import AUTO, BACKENDS

TARGETS = {"overhead_ratio": 1.2, "overhead_with_wait_ratio": 1.2, "rss_growth_mb": 200.0,
           "mlflow_lag_s": 5.0}
MB = 1024 * 1024


class RssSampler:
    """Peak RSS of this process, sampled from a daemon thread."""

    def __init__(self, interval_s: float = 0.2) -> None:
        import psutil

        self._process, self.interval_s = psutil.Process(), interval_s
        self.start = self.peak = self.rss()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-rss", daemon=True)
        self._thread.start()

    def rss(self) -> int:
        return self._process.memory_info().rss

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, self.rss())
            self.samples += 1

    def stop(self) -> int:
        """Stop sampling; the RSS now."""
        self._stop.set()
        self._thread.join(timeout=5)
        end = self.rss()
        self.peak = max(self.peak, end)
        return end


def window_ratio(overheads: list[float], window: int) -> dict[str, Any]:
    """Median of the last ``window`` values over the median of the first ``window`` (the
    window is at most half the values, so the two never overlap).

    Example:
        >>> window_ratio([1.0, 1.0, 1.2, 2.0, 2.0, 2.2], 50)
        {'window': 3, 'first_median_s': 1.0, 'last_median_s': 2.0, 'ratio': 2.0}
    """
    window = max(1, min(window, len(overheads) // 2))
    if len(overheads) < 2:
        return {"window": window, "first_median_s": None, "last_median_s": None, "ratio": None}
    first = statistics.median(overheads[:window])
    last = statistics.median(overheads[-window:])
    return {"window": window, "first_median_s": first, "last_median_s": last,
            "ratio": last / first if first > 0 else None}


def waits(trials: list[dict[str, Any]]) -> list[float | None]:
    """Per trial (``start``, ``end``, ``actor``, ``fresh``: its actor was started for it),
    seconds from the trial end that freed its slot to its start: a reused actor's previous
    trial's end, else the latest end of any trial before its start (None: none had ended).

    Example:
        >>> waits([{"start": 0.0, "end": 5.0, "actor": "a", "fresh": True},
        ...        {"start": 0.5, "end": 6.0, "actor": "b", "fresh": True},
        ...        {"start": 5.25, "end": 7.0, "actor": "a", "fresh": False},
        ...        {"start": 7.5, "end": 9.0, "actor": "c", "fresh": True}])
        [None, None, 0.25, 0.5]
    """
    out: list[float | None] = []
    for trial in trials:
        if trial["fresh"]:
            before = [t["end"] for t in trials if t["end"] <= trial["start"]]
        else:
            before = [t["end"] for t in trials if t["actor"] == trial["actor"]
                      and t["end"] <= trial["start"]]
        out.append(trial["start"] - max(before) if before else None)
    return out


def measure(trials: int, epoch_s: float, window: int = 50, executor: str | None = None,
            warmup: int = 2) -> dict[str, Any]:
    """The sweep (after a ``warmup`` one), in the connected Ray instance (or a private one
    with the dashboard)."""
    import ray

    from bench.mlflow_watch import RunWatcher
    from bench.overhead import state_api_up
    from bench.timeline import actors_since, trial_timelines
    from sweeps import run_sweep

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=True, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as storage:
            cold_start = RssSampler().stop()
            if warmup:
                run_sweep(sweeps_config(warmup, 1, epoch_s, storage, workers=1,
                                        executor=executor)[0])
            cfg, uri, experiment = sweeps_config(trials, 1, epoch_s, storage, workers=1,
                                                 executor=executor)
            rss = RssSampler()
            called, start = time.time(), time.perf_counter()
            watcher = RunWatcher(uri, experiment, since=called).start()
            try:
                result = run_sweep(cfg)
            finally:
                wall = time.perf_counter() - start
                rss_end = rss.stop()
            deadline = time.monotonic() + 10.0
            while watcher.complete_at(trials) is None and time.monotonic() < deadline:
                time.sleep(0.25)
            watcher.stop()
            run = Run(called, wall, result.results, dict(watcher.finished))
            rows = run.rows()
            timelines = (trial_timelines(rows, actors_since(called - 1.0), run.tracked)
                         if state_api_up() else {})
    finally:
        if started:
            ray.shutdown()
    return summarize(trials, epoch_s, window, executor, run, rows, timelines, watcher,
                     {"cold_start": cold_start, "start": rss.start, "end": rss_end,
                      "peak": rss.peak, "samples": rss.samples, "warmup_trials": warmup})


def summarize(trials: int, epoch_s: float, window: int, executor: str | None, run: Run,
              rows: dict[str, list[dict[str, Any]]], timelines: dict[str, dict[str, Any]],
              watcher: Any, rss: dict[str, Any]) -> dict[str, Any]:
    """The JSON of ``python -m bench.scale``."""
    per_trial = []
    for trial_id, t in timelines.items():
        e = t["events"]
        if e["start"] is None or e["end"] is None:
            continue
        training = sum(r.get("epoch_time_s") or 0.0 for r in rows.get(trial_id, []))
        actor = t.get("actor") or {}
        per_trial.append({"trial_id": trial_id, "start_s": e["start"] - run.called,
                          "end_s": e["end"] - run.called, "training_s": training,
                          "overhead_s": e["end"] - e["start"] - training,
                          "actor": actor.get("id"),
                          "fresh": actor.get("requested") == e["start"]})
    per_trial.sort(key=lambda p: p["start_s"])
    spans = [{"start": p["start_s"], "end": p["end_s"], "actor": p["actor"],
              "fresh": p["fresh"]} for p in per_trial]
    for p, wait in zip(per_trial, waits(spans), strict=True):
        p["wait_s"] = wait
        p["overhead_with_wait_s"] = p["overhead_s"] + (wait or 0.0)
    overhead = window_ratio([p["overhead_s"] for p in per_trial], window)
    with_wait = window_ratio([p["overhead_with_wait_s"] for p in per_trial], window)
    last_end = max((p["end_s"] for p in per_trial), default=None)
    complete = watcher.complete_at(trials)
    lags = [watcher.finished[t] - watcher.end_time[t] for t in watcher.finished]
    mlflow = {"runs_expected": trials,
              "finished": sum(s == "FINISHED" for s in watcher.status.values()),
              "ended_otherwise": sum(s != "FINISHED" for s in watcher.status.values()),
              "complete_s": None if complete is None else complete - run.called,
              "complete_after_last_trial_s": (None if complete is None or last_end is None
                                              else complete - run.called - last_end),
              "median_lag_s": statistics.median(lags) if lags else None,
              "polls": watcher.polls, "poll_errors": watcher.errors[:5]}
    rss_mb = {"cold_start": rss["cold_start"] / MB, "warmup_trials": rss["warmup_trials"],
              "start": rss["start"] / MB, "end": rss["end"] / MB, "peak": rss["peak"] / MB,
              "growth": (rss["end"] - rss["start"]) / MB,
              "peak_growth": (rss["peak"] - rss["start"]) / MB, "samples": rss["samples"]}
    lag = mlflow["complete_after_last_trial_s"]
    return {
        "trials": trials, "epoch_s": epoch_s, "workers": 1, "executor": executor,
        "wall_s": run.wall, "training_s": run.training, "trials_timed": len(per_trial),
        "last_trial_end_s": last_end, "overhead": overhead,
        "overhead_with_wait": with_wait, "rss_mb": rss_mb,
        "mlflow": mlflow, "targets": TARGETS,
        "met": {"overhead_ratio": overhead["ratio"] is not None
                and overhead["ratio"] <= TARGETS["overhead_ratio"],
                "overhead_with_wait_ratio": with_wait["ratio"] is not None
                and with_wait["ratio"] <= TARGETS["overhead_with_wait_ratio"],
                "rss_growth_mb": rss_mb["growth"] < TARGETS["rss_growth_mb"],
                "mlflow_lag_s": lag is not None and lag < TARGETS["mlflow_lag_s"]},
        "per_trial": per_trial}


def _num(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.2f}{unit}"


def format_table(result: dict[str, Any]) -> str:
    o, r, m, met = result["overhead"], result["rss_mb"], result["mlflow"], result["met"]
    ow = result["overhead_with_wait"]
    t = result["targets"]

    def ok(key: str) -> str:
        return "ok" if met[key] else "MISSED"

    w = o["window"]
    return "\n".join([
        f"{result['trials']} trials ({result['trials_timed']} timed), 1 worker, "
        f"{result['epoch_s']} s training each: {result['wall_s']:.0f} s",
        f"{'':<42} {'value':>10} {'target':>9}",
        f"{'per-trial overhead, first ' + str(w) + ' (median s)':<42} "
        f"{_num(o['first_median_s']):>10}",
        f"{'per-trial overhead, last ' + str(w) + ' (median s)':<42} "
        f"{_num(o['last_median_s']):>10}",
        f"{'  last / first':<42} {_num(o['ratio']):>10} {'<= ' + str(t['overhead_ratio']):>9} "
        f"{ok('overhead_ratio')}",
        f"{'  with the wait before each: first, last':<42} "
        f"{_num(ow['first_median_s'])} -> {_num(ow['last_median_s'])}",
        f"{'  last / first':<42} {_num(ow['ratio']):>10} "
        f"{'<= ' + str(t['overhead_with_wait_ratio']):>9} {ok('overhead_with_wait_ratio')}",
        f"{'driver RSS (MB): cold, after warm-up, end':<42} "
        f"{r['cold_start']:.0f} -> {r['start']:.0f} -> {r['end']:.0f}",
        f"{'  growth (peak growth) (MB)':<42} {r['growth']:>10.1f} "
        f"{'< ' + str(int(t['rss_growth_mb'])):>9} {ok('rss_growth_mb')} "
        f"(peak {r['peak_growth']:.1f})",
        f"{'MLflow complete after the last trial (s)':<42} "
        f"{_num(m['complete_after_last_trial_s']):>10} {'< ' + str(t['mlflow_lag_s']):>9} "
        f"{ok('mlflow_lag_s')} ({m['finished']}/{m['runs_expected']} FINISHED)",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--epoch-s", type=float, default=0.05)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=2,
                        help="trials of a sweep run first, so one-time imports are not growth")
    parser.add_argument("--executor", choices=[AUTO, *BACKENDS], default=None,
                        help="trial.executor (default: not passed)")
    args = parser.parse_args()
    result = measure(args.trials, args.epoch_s, args.window, args.executor, args.warmup)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale.json").write_text(json.dumps(result, indent=2))
    print(format_table(result))


if __name__ == "__main__":
    main()
