"""python -m bench.overhead [--trials 3] [--epochs 3] [--epoch-s 0.3] [--repeats 3]

Orchestration overhead per trial: wall time not spent in training steps, divided by trials,
for ``sweeps`` and for a plain Ray Tune + Ray Train script written the way Ray's docs show
(a Train V2 driver function per trial, ``TuneReportCallback``, default settings), with the same
trainable (``bench.workload:train``), the same trials, in the same Ray instance, alternating,
``--repeats`` times. Training time is the sum of every epoch's ``epoch_time_s``. Reports
medians and the ratio sweeps / plain; writes ``bench/results/overhead.json``.

On 2 cores both run one trial at a time: the plain script's trial driver takes Tune's default
1 CPU, so its two workers get 0.5 CPU each and ``max_concurrent_trials=1`` (as the docs advise;
without both it never starts a worker); sweeps' driver takes no CPU and its workers 1 each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _training_seconds(results: Any) -> float:
    total = 0.0
    for result in results:
        frame = result.metrics_dataframe
        if frame is not None and "epoch_time_s" in frame:
            total += float(frame["epoch_time_s"].sum())
    return total


def run_plain(trials: int, epochs: int, epoch_s: float, storage: str) -> tuple[float, float]:
    """The docs pattern: Tuner over a driver function that runs a TorchTrainer."""
    from ray import train, tune
    from ray.train.torch import TorchTrainer
    from ray.tune.integration.ray_train import TuneReportCallback

    from bench.workload import train as train_fn_per_worker

    def train_driver_fn(config: dict[str, Any]) -> None:
        trainer = TorchTrainer(
            train_fn_per_worker, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=2,
                                               resources_per_worker={"CPU": 0.5}),
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
    start = time.perf_counter()
    results = tuner.fit()
    return time.perf_counter() - start, _training_seconds(results)


def run_sweeps(trials: int, epochs: int, epoch_s: float, storage: str,
               tracking: bool = True) -> tuple[float, float]:
    """The product, as `python -m sweeps` runs it (MLflow tracking on, by default)."""
    from sweeps import compose, run_sweep

    name = f"sweeps-{time.monotonic_ns()}"
    cfg = compose("digits", [
        "experiment.trainable=bench.workload:train", f"+experiment.params.epoch_s={epoch_s}",
        "experiment.metric=score", "experiment.mode=max",
        "search=random", "scheduler=none", f"search.num_samples={trials}",
        f"scheduler.max_t={epochs}", f"sweep.dir={storage}/{name}",
        f"tracking.enabled={str(tracking).lower()}",
        f"tracking.uri=sqlite:///{storage}/mlflow.db"])
    start = time.perf_counter()
    result = run_sweep(cfg)
    return time.perf_counter() - start, _training_seconds(result.results)


def measure(trials: int, epochs: int, epoch_s: float, repeats: int) -> dict[str, Any]:
    """Both, alternating, in one Ray instance; medians of ``repeats`` runs each."""
    import ray

    runs: dict[str, list[dict[str, float]]] = {"plain": [], "sweeps": []}
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as storage:
            for _ in range(repeats):
                for label, run in (("plain", run_plain), ("sweeps", run_sweeps)):
                    wall, training = run(trials, epochs, epoch_s, storage)
                    runs[label].append({"wall_s": wall, "training_s": training,
                                        "overhead_per_trial_s": (wall - training) / trials})
    finally:
        if started:
            ray.shutdown()
    medians = {label: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
               for label, rs in runs.items()}
    return {"trials": trials, "epochs": epochs, "epoch_s": epoch_s, "repeats": repeats,
            "runs": runs, "median": medians,
            "ratio_overhead": medians["sweeps"]["overhead_per_trial_s"]
            / medians["plain"]["overhead_per_trial_s"]}


def format_table(result: dict[str, Any]) -> str:
    m = result["median"]
    rows = [("overhead per trial (s)", "overhead_per_trial_s"), ("sweep wall (s)", "wall_s"),
            ("training (s)", "training_s")]
    lines = [f"{'median of ' + str(result['repeats']):<24} {'plain Ray':>10} {'sweeps':>10} "
             f"{'sweeps/plain':>13}"]
    for label, key in rows:
        lines.append(f"{label:<24} {m['plain'][key]:>10.2f} {m['sweeps'][key]:>10.2f} "
                     f"{m['sweeps'][key] / m['plain'][key]:>13.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epoch-s", type=float, default=0.3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    result = measure(args.trials, args.epochs, args.epoch_s, args.repeats)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "overhead.json").write_text(json.dumps(result, indent=2))
    print(format_table(result))


if __name__ == "__main__":
    main()
