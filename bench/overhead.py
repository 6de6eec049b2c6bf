"""python -m bench.overhead [--workers 2] [--trials 3] [--epochs 3] [--epoch-s 0.3] [--repeats 3]
[--executor inline|train|auto] [--set KEY=VALUE ...] [--no-phases]

Orchestration overhead per trial: wall time not spent in training steps, divided by trials,
for ``sweeps`` and for a plain Ray Tune + Ray Train script written the way Ray's docs show
(a Train V2 driver function per trial, ``TuneReportCallback``, default settings), with the same
trainable (``bench.workload:train``), the same trials, ``--workers`` Train workers per trial,
in the same Ray instance, alternating, ``--repeats`` times. Training time is the sum of every
epoch's ``epoch_time_s``. Reports medians and the ratio sweeps / plain; writes
``bench/results/overhead.json``.

On 2 cores the plain script runs one trial at a time: its trial driver takes Tune's default
1 CPU, so its workers share the other (0.5 CPU each for 2, 1 CPU for 1) and
``max_concurrent_trials=1`` (as the docs advise; without both it never starts a worker).
sweeps' driver takes no CPU and its workers 1 each, so with 1 worker two trials run at once.
``--executor`` passes ``trial.executor`` to sweeps (left at its default when not given).

**Phases** (unless ``--no-phases``): each trial's timeline from Ray's state API (which needs
the dashboard, so the private Ray instance starts with ``include_dashboard=True``; with
``--no-phases`` it does not) and from the stamps the loop reports, cut into the phases of
``bench.phases``: trial actor start, Train controller start, worker start (processes and
imports), loop entry (process group), the loop's set-up to its first report, reports, teardown
and, for sweeps, MLflow tracking (polled every 0.25 s from a thread of this process); plus the
sweep's own head (call -> first trial), tail (last trial -> return) and gap between trials,
and per actor class the seconds waiting for a process and importing. Medians over every trial
of every repeat, under ``phases.<plain|sweeps>``; each run's trials under ``runs``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps.trial.backends import AUTO, BACKENDS

RESULTS = Path(__file__).resolve().parent / "results"
STAMPS = ("pid", "t_proc_start", "t_loop_entry", "t_report", "epoch_time_s", "epoch")


@dataclass
class Run:
    """One sweep of either side: when it was called, how long it took, what it reported."""

    called: float  # time.time() at the call
    wall: float
    results: Any  # Tune's ResultGrid
    tracked: dict[str, float] = field(default_factory=dict)  # trial -> seen FINISHED

    @property
    def training(self) -> float:
        return sum(r.get("epoch_time_s") or 0.0 for rows in self.rows().values() for r in rows)

    def rows(self) -> dict[str, list[dict[str, Any]]]:
        """Trial id -> its reports (the stamps and Tune's ``pid``), in order."""
        out: dict[str, list[dict[str, Any]]] = {}
        for result in self.results:
            frame = result.metrics_dataframe
            if frame is None or "trial_id" not in frame:
                continue
            keep = [k for k in STAMPS if k in frame]
            for record in frame[["trial_id", *keep]].to_dict("records"):
                out.setdefault(str(record.pop("trial_id")), []).append(record)
        return out


def _plain(trials: int, epochs: int, epoch_s: float, storage: str, workers: int = 2) -> Run:
    """The docs pattern: Tuner over a driver function that runs a TorchTrainer."""
    from ray import train, tune
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from bench.workload import train as train_fn_per_worker

    def train_driver_fn(config: dict[str, Any]) -> None:
        trainer = TorchTrainer(
            train_fn_per_worker, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=workers,
                                               resources_per_worker={"CPU": 1.0 / workers}),
            run_config=train.RunConfig(name=f"train-{tune.get_context().get_trial_id()}",
                                       storage_path=storage, callbacks=[TuneReportCallback()]))
        trainer.fit()

    space = {"lr": tune.loguniform(1e-3, 0.3), "epoch_s": epoch_s, "epochs": epochs}
    tuner = tune.Tuner(train_driver_fn, param_space=space,
                       # The docs' advice: the trial drivers' CPUs would otherwise starve
                       # the workers (on 2 cores two drivers take both and nothing runs).
                       tune_config=tune.TuneConfig(num_samples=trials, max_concurrent_trials=1),
                       run_config=tune.RunConfig(storage_path=storage, name="plain",
                                                 verbose=0))
    called, start = time.time(), time.perf_counter()
    results = tuner.fit()
    return Run(called, time.perf_counter() - start, results)


def sweeps_config(trials: int, epochs: int, epoch_s: float, storage: str, tracking: bool = True,
                  workers: int = 2, executor: str | None = None,
                  overrides: tuple[str, ...] = ()) -> tuple[Any, str, str]:
    """(config, MLflow URI, MLflow experiment) of a sweep of ``bench.workload:train`` trials:
    random search, no early stopping, SQLite MLflow in ``storage``, then ``overrides``."""
    from sweeps import compose

    name = f"sweeps-{time.monotonic_ns()}"
    uri = f"sqlite:///{storage}/mlflow.db"
    cfg = compose("digits", [
        "experiment.trainable=bench.workload:train", f"+experiment.params.epoch_s={epoch_s}",
        "experiment.metric=score", "experiment.mode=max",
        "search=random", "scheduler=none", f"search.num_samples={trials}",
        f"scheduler.max_t={epochs}", f"sweep.dir={storage}/{name}",
        f"scaling.num_workers={workers}", f"tracking.enabled={str(tracking).lower()}",
        f"tracking.uri={uri}", *([f"trial.executor={executor}"] if executor else []), *overrides])
    return cfg, uri, cfg.tracking.experiment_name or cfg.experiment.name


def _sweeps(trials: int, epochs: int, epoch_s: float, storage: str, tracking: bool = True,
            workers: int = 2, executor: str | None = None, watch: bool = False,
            overrides: tuple[str, ...] = ()) -> Run:
    """The product, as `python -m sweeps` runs it (MLflow tracking on, by default)."""
    from sweeps import run_sweep

    cfg, uri, experiment = sweeps_config(trials, epochs, epoch_s, storage, tracking, workers,
                                         executor, overrides)
    watcher = None
    called, start = time.time(), time.perf_counter()
    if watch and tracking:
        from bench.mlflow_watch import RunWatcher

        watcher = RunWatcher(uri, experiment, since=called).start()
    try:
        result = run_sweep(cfg)
    finally:
        wall = time.perf_counter() - start
        if watcher is not None:
            watcher.stop()
    return Run(called, wall, result.results, dict(watcher.finished) if watcher else {})


def run_plain(trials: int, epochs: int, epoch_s: float, storage: str,
              workers: int = 2) -> tuple[float, float]:
    """(wall seconds, training seconds) of the plain script (``bench.fraction`` uses it)."""
    run = _plain(trials, epochs, epoch_s, storage, workers)
    return run.wall, run.training


def run_sweeps(trials: int, epochs: int, epoch_s: float, storage: str, tracking: bool = True,
               workers: int = 2, executor: str | None = None) -> tuple[float, float]:
    """(wall seconds, training seconds) of a sweep (``bench.fraction`` uses it)."""
    run = _sweeps(trials, epochs, epoch_s, storage, tracking, workers, executor)
    return run.wall, run.training


def breakdown(run: Run) -> dict[str, Any]:
    """The run's trials cut into phases (``bench.phases``), from Ray's state API; times in
    ``events`` and ``actors`` are seconds since the sweep was called."""
    from bench.phases import EVENTS, phases, sweep_phases
    from bench.timeline import actors_since, trial_timelines

    timelines = trial_timelines(run.rows(), actors_since(run.called - 1.0), run.tracked)

    def rel(t: float | None) -> float | None:
        return None if t is None else t - run.called

    trials = []
    for trial_id, t in sorted(timelines.items(),
                              key=lambda kv: kv[1]["events"]["start"] or float("inf")):
        events = t["events"]
        # The processes this trial started: its actor (unless reused from an earlier trial)
        # and every actor created under it.
        own = list(t["children"])
        if t["actor"] is not None and t["actor"]["requested"] == events["start"]:
            own.insert(0, t["actor"])
        trials.append({
            "trial_id": trial_id, "phases": phases(events),
            "events": {k: rel(v) if k in (*EVENTS, "tracked", "proc_start") else v
                       for k, v in events.items()},
            "actors": [{"cls": a["cls"], **{k: rel(a[k]) for k in
                                            ("requested", "running", "ready", "exited")}}
                       for a in own]})
    return {"trials": trials, "sweep": sweep_phases(run.called, run.called + run.wall,
                                                    [t["events"] for t in timelines.values()])}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's phases over every trial of every repeat (medians), the sweep's head, tail
    and gap (medians over repeats), processes per trial, and the per-actor-class breakdown."""
    from bench.phases import actor_breakdown, median_phases

    trials = [t for r in runs for t in r.get("trials", [])]
    if not trials:
        return {}
    out: dict[str, Any] = median_phases([t["phases"] for t in trials])
    for key in ("head", "tail", "gap"):
        values = [r["sweep"][key] for r in runs if r["sweep"].get(key) is not None]
        out[key] = statistics.median(values) if values else None
    out["processes"] = statistics.median(len(t["actors"]) for t in trials)
    out["actors"] = actor_breakdown([t["actors"] for t in trials])
    return out


def state_api_up() -> bool:
    """Whether Ray's state API answers (it needs the dashboard)."""
    try:
        from ray.util.state import list_nodes

        list_nodes(limit=1, timeout=10, raise_on_missing_output=False)
        return True
    except Exception:
        return False


def measure(trials: int, epochs: int, epoch_s: float, repeats: int, workers: int = 2,
            executor: str | None = None, phases: bool = True,
            overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """Both, alternating, in one Ray instance; medians of ``repeats`` runs each.

    Starts a private Ray (2 CPUs; the dashboard when ``phases``) unless one is connected; a
    connected one without the dashboard measures no phases."""
    import ray

    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "sweeps": []}
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=phases, log_to_driver=False)
    try:
        phases = phases and state_api_up()
        with tempfile.TemporaryDirectory() as storage:
            for _ in range(repeats):
                for label in ("plain", "sweeps"):
                    run = (_plain(trials, epochs, epoch_s, storage, workers) if label == "plain"
                           else _sweeps(trials, epochs, epoch_s, storage, True, workers,
                                        executor, phases, overrides))
                    training = run.training
                    runs[label].append({"wall_s": run.wall, "training_s": training,
                                        "overhead_per_trial_s": (run.wall - training) / trials,
                                        **(breakdown(run) if phases else {})})
    finally:
        if started:
            ray.shutdown()
    keys = ("wall_s", "training_s", "overhead_per_trial_s")
    medians = {label: {k: statistics.median(r[k] for r in rs) for k in keys}
               for label, rs in runs.items()}
    return {"trials": trials, "epochs": epochs, "epoch_s": epoch_s, "repeats": repeats,
            "workers": workers, "executor": executor, "overrides": list(overrides),
            "phases_measured": phases,
            "runs": runs, "median": medians,
            "phases": {label: summarize(rs) for label, rs in runs.items()},
            "ratio_overhead": medians["sweeps"]["overhead_per_trial_s"]
            / medians["plain"]["overhead_per_trial_s"]}


PHASE_ROWS = [("trial actor start", "trial_actor_start"),
              ("trial fn -> controller asked", "driver_setup"),
              ("Train controller start", "controller_start"),
              ("worker processes + imports", "worker_start"),
              ("(process group) -> loop entry", "loop_entry"),
              ("loop set-up -> 1st report", "first_report"), ("reports", "reports"),
              ("last report -> trial end", "teardown"), ("= trial span - training", "overhead"),
              ("MLflow run finished after", "tracking"), ("sweep head (once)", "head"),
              ("sweep tail (once)", "tail"), ("gap between trials", "gap"),
              ("processes per trial", "processes")]


def _cell(value: float | None, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.2f}"


def format_table(result: dict[str, Any]) -> str:
    m = result["median"]
    rows = [("overhead per trial (s)", "overhead_per_trial_s"), ("sweep wall (s)", "wall_s"),
            ("training (s)", "training_s")]
    lines = [f"{'median of ' + str(result['repeats']):<28} {'plain Ray':>10} {'sweeps':>10} "
             f"{'sweeps/plain':>13}"]
    for label, key in rows:
        lines.append(f"{label:<28} {m['plain'][key]:>10.2f} {m['sweeps'][key]:>10.2f} "
                     f"{m['sweeps'][key] / m['plain'][key]:>13.3f}")
    phases = result.get("phases") or {}
    if not any(phases.values()):
        return "\n".join(lines)
    lines.append(f"{'per trial, median (s)':<28} {'plain Ray':>10} {'sweeps':>10} "
                 f"{'sweeps-plain':>13}")
    for label, key in PHASE_ROWS:
        plain, ours = (phases.get(side, {}).get(key) for side in ("plain", "sweeps"))
        diff = None if plain is None and ours is None else (ours or 0.0) - (plain or 0.0)
        lines.append(f"  {label:<26} {_cell(plain, 10)} {_cell(ours, 10)} {_cell(diff, 13)}")
    for side in ("plain", "sweeps"):
        actors = phases.get(side, {}).get("actors") or {}
        parts = [f"{cls} x{a['count']:g} {a['launch_s']:.1f}+{a['init_s']:.1f}"
                 for cls, a in sorted(actors.items(), key=lambda kv: -kv[1]["init_s"])]
        lines.append(f"  {side} processes (launch+imports s): " + ", ".join(parts))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, choices=(1, 2), default=2)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epoch-s", type=float, default=0.3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--executor", choices=[AUTO, *BACKENDS], default=None,
                        help="trial.executor for sweeps (default: not passed)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="an override of the sweeps side's config")
    parser.add_argument("--no-phases", action="store_true",
                        help="no dashboard, no state API, no MLflow polling: totals only")
    args = parser.parse_args()
    result = measure(args.trials, args.epochs, args.epoch_s, args.repeats, args.workers,
                     args.executor, not args.no_phases, tuple(args.set))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "overhead.json").write_text(json.dumps(result, indent=2))
    print(format_table(result))


if __name__ == "__main__":
    main()
