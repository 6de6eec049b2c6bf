"""python -m bench.report_latency [--reports 10] [--intervals 2.0 0.5 0.1]

Cost of one metrics-only ``ray.train.report`` from a 2-worker TorchTrainer, for each Train
controller poll interval (``trial.poll_interval_s``, env ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``),
all in one Ray instance. Prints medians and the ratio to Ray's default (2.0 s, the baseline);
writes ``bench/results/report_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _loop(config: dict[str, Any]) -> None:
    import ray.train
    import torch

    torch.set_num_threads(1)
    a = torch.randn(256, 256)
    for i in range(config["reports"]):
        start = time.perf_counter()
        for _ in range(config["matmuls"]):  # fixed compute: slows down if polling steals CPU
            a = torch.tanh(a @ a)
        compute = time.perf_counter() - start
        start = time.perf_counter()
        ray.train.report({"i": i})
        took = time.perf_counter() - start
        if ray.train.get_context().get_world_rank() == 0:
            with open(config["out"], "a") as f:
                f.write(f"{took} {compute}\n")


def measure(interval: float, reports: int, storage: str) -> tuple[list[float], list[float]]:
    from ray.train import RunConfig, ScalingConfig

    from sweeps._ray.train import HEALTH_CHECK_ENV, trainer_class

    os.environ[HEALTH_CHECK_ENV] = str(interval)
    out = Path(storage) / f"lat_{interval}.txt"
    trainer = trainer_class()(
        _loop, train_loop_config={"reports": reports, "out": str(out), "matmuls": 400},
        scaling_config=ScalingConfig(num_workers=2, resources_per_worker={"CPU": 1}),
        run_config=RunConfig(name=f"lat_{interval}", storage_path=storage))
    trainer.fit()
    lines = [tuple(map(float, ln.split())) for ln in out.read_text().splitlines()][1:]
    return [r for r, _ in lines], [c for _, c in lines]  # first report includes warm-up


def measure_all(intervals: list[float], reports: int) -> list[dict[str, Any]]:
    """One row per poll interval (the first is the baseline), in the connected Ray instance."""
    rows = []
    with tempfile.TemporaryDirectory() as storage:
        for interval in intervals:
            samples, compute = measure(interval, reports, storage)
            rows.append({"poll_interval_s": interval, "median_s": statistics.median(samples),
                         "compute_median_s": statistics.median(compute),
                         "samples": samples, "compute": compute})
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    base, base_c = rows[0]["median_s"], rows[0]["compute_median_s"]
    lines = [f"{'poll interval':>14} {'report (median)':>16} {'ratio':>7} "
             f"{'fixed compute':>14} {'ratio':>7}"]
    for r in rows:
        lines.append(f"{r['poll_interval_s']:>12.2f} s {1000 * r['median_s']:>13.1f} ms "
                     f"{r['median_s'] / base:>7.3f} {1000 * r['compute_median_s']:>11.1f} ms "
                     f"{r['compute_median_s'] / base_c:>7.3f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=10)
    parser.add_argument("--intervals", type=float, nargs="+", default=[2.0, 0.5, 0.1])
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rows = measure_all(args.intervals, args.reports)
    finally:
        ray.shutdown()
    print(format_rows(rows))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "report_latency.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
