"""python -m bench.state_save [--storage s3|local] [--trials 16] [--epochs 6] [--epoch-s 0.3]

What saving Tune's experiment state costs the sweep's driver: one sweep of ``--trials``
trials of ``bench.workload:train`` (random search, no early stopping, 1 worker each, MLflow
on SQLite), its ``sweep.dir`` on moto's S3 server on loopback (``--storage s3``, a real
endpoint in its own process, as the tests use) or on local disk. Every save is timed in the
driver: the periodic ones (Tune's ``TUNE_GLOBAL_CHECKPOINT_S``, routed through
``sweeps._ray.tune_state.save_experiment_state``) and the save before each new trial (the
scheduler's), since Tune's loop waits for both. Prints the sweep's wall and each kind's
count, total and median; writes ``bench/results/state_save_<storage>.json``. Compare code
versions by running each from its own checkout (``PYTHONPATH``), alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.overhead import RESULTS


def _timed(times: list[float], fn: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            times.append(time.perf_counter() - start)
    return timed


def measure(storage: str, trials: int, epochs: int, epoch_s: float) -> dict[str, Any]:
    """The sweep, in a private Ray instance of 2 CPUs (and a moto server for ``s3``)."""
    import ray

    import sweeps._ray.tune_state as tune_adapter
    import sweeps.search.scheduler_log as schedulers
    from sweeps import compose, run_sweep
    from tests.conftest import MotoS3

    times: dict[str, list[float]] = {"periodic": [], "before_trial": []}
    save = tune_adapter.save_experiment_state
    # the take-over's saves look the function up in its module; the scheduler imported it
    tune_adapter.save_experiment_state = _timed(times["periodic"], save)
    schedulers.save_experiment_state = _timed(times["before_trial"], save)
    server = None
    try:
        with tempfile.TemporaryDirectory() as work:
            sweep_dir = f"{work}/sweep"
            if storage == "s3":
                server = MotoS3(Path(work))
                server.start()
                os.environ.update(server.env)
                sweep_dir = f"s3://{MotoS3.BUCKET}/bench/{uuid.uuid4().hex[:8]}"
            cfg = compose("digits", [
                "experiment.trainable=bench.workload:train",
                f"+experiment.params.epoch_s={epoch_s}", "experiment.metric=score",
                "experiment.mode=max", "search=random", "scheduler=none",
                f"search.num_samples={trials}", f"scheduler.max_t={epochs}",
                f"sweep.dir={sweep_dir}", "scaling.num_workers=1",
                f"tracking.uri=sqlite:///{work}/mlflow.db"])
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            try:
                start = time.perf_counter()
                result = run_sweep(cfg)
                wall = time.perf_counter() - start
            finally:
                ray.shutdown()
    finally:
        tune_adapter.save_experiment_state = save
        schedulers.save_experiment_state = save
        if server is not None:
            server.stop()
    return {"storage": storage, "trials": trials, "epochs": epochs, "epoch_s": epoch_s,
            "trials_done": len(result.results), "wall_s": wall,
            **{kind: {"count": len(t), "total_s": sum(t),
                      "median_ms": 1e3 * statistics.median(t) if t else None}
               for kind, t in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", choices=("s3", "local"), default="s3")
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--epoch-s", type=float, default=0.3)
    args = parser.parse_args()
    result = measure(args.storage, args.trials, args.epochs, args.epoch_s)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"state_save_{args.storage}.json").write_text(json.dumps(result, indent=2))
    print(f"{result['trials_done']} trials on {args.storage}: {result['wall_s']:.1f} s")
    for kind in ("periodic", "before_trial"):
        r = result[kind]
        median = "-" if r["median_ms"] is None else f"{r['median_ms']:.0f} ms"
        print(f"  {kind:<13} {r['count']:>3} saves, {r['total_s']:.2f} s, median {median}")


if __name__ == "__main__":
    main()
