"""python -m bench [--quick]

Runs the benchmarks in one private Ray instance (2 CPUs, with the dashboard: the phase
breakdowns read Ray's state API), prints their tables and writes ``bench/results/latest.json``.
Every figure is a ratio against a baseline measured in the same run (medians of repeated runs):

1. orchestration overhead per trial, sweeps vs a plain Ray Tune + Train script, 2 workers per
   trial, and where each second of a trial goes (``bench.overhead``; the full size measures
   1 worker per trial too, where sweeps' default runs the loop in the trial process);
2. fraction of sweep wall time spent training, for ~1 s (from 1.), ~10 s and ~30 s trials,
   sweeps vs the same plain script (``bench.fraction``);
3. report latency, our poll interval vs Ray's default (``bench.report_latency``);
4. search efficiency: epochs and seconds for TPE+ASHA, and for Hydra's Optuna sweeper, to reach
   the best score of a full-budget random search (``bench.search_efficiency``);
5. scale: one sweep of 200 one-epoch 1-worker trials, per-trial overhead of the last 50 over
   the first 50, driver memory growth and MLflow's lag behind the last trial
   (``bench.scale``; no warm-up sweep here: the benchmarks before it have done the imports).

``--quick`` runs each once with tiny sizes (what the smoke test does). Not run by the test
suite's default command; ``tests/integration/test_bench.py`` runs ``--quick``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench import fraction, overhead, report_latency, scale, search_efficiency

SIZES = {
    "full": {"overhead": {"trials": 3, "epochs": 3, "epoch_s": 0.3, "repeats": 3},
             "overhead_1worker": {"trials": 3, "epochs": 3, "epoch_s": 0.3, "repeats": 3,
                                  "workers": 1},
             "fraction": {"sizes": [(5, 2.0), (6, 5.0)], "trials": 2},
             "latency": {"intervals": [2.0, 0.1, 0.05, 0.03], "reports": 10},
             "search": {"trials": 12, "epochs": 9, "seed": 0},
             "scale": {"trials": 200, "epoch_s": 0.05, "window": 50, "warmup": 0}},
    "quick": {"overhead": {"trials": 1, "epochs": 1, "epoch_s": 0.1, "repeats": 1},
              "fraction": {"sizes": [(1, 0.5)], "trials": 1},
              "latency": {"intervals": [2.0, 0.1], "reports": 3},
              "search": {"trials": 2, "epochs": 2, "seed": 0},
              "scale": {"trials": 4, "epoch_s": 0.05, "window": 50, "warmup": 0}},
}


def run(quick: bool = False) -> dict[str, Any]:
    """Every benchmark, in one Ray instance this function starts and shuts down."""
    import ray

    sizes = SIZES["quick" if quick else "full"]
    ray.init(num_cpus=2, include_dashboard=True, log_to_driver=False)
    start = time.perf_counter()
    result: dict[str, Any] = {}
    try:
        result["overhead"] = overhead.measure(**sizes["overhead"])
        result["fraction"] = ([fraction.from_overhead(result["overhead"])]
                              + fraction.measure(**sizes["fraction"]))
        result["report_latency"] = report_latency.measure_all(**sizes["latency"])
        result["search_efficiency"] = search_efficiency.measure(**sizes["search"])
        if "overhead_1worker" in sizes:
            result["overhead_1worker"] = overhead.measure(**sizes["overhead_1worker"])
        result["scale"] = scale.measure(**sizes["scale"])
    finally:
        ray.shutdown()
    result["seconds"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat")
    args = parser.parse_args()
    result = run(args.quick)
    print("\n1. orchestration overhead per trial\n" + overhead.format_table(result["overhead"]))
    print("\n2. fraction of sweep wall time spent training\n"
          + fraction.format_rows(result["fraction"]))
    print("\n3. report latency\n" + report_latency.format_rows(result["report_latency"]))
    print("\n4. search efficiency\n" + search_efficiency.format_table(result["search_efficiency"]))
    if "overhead_1worker" in result:
        print("\n1b. orchestration overhead per trial, 1 worker\n"
              + overhead.format_table(result["overhead_1worker"]))
    print("\n5. scale\n" + scale.format_table(result["scale"]))
    print(f"\n(all benchmarks: {result['seconds']:.0f} s)")
    if not args.quick:
        report_latency.RESULTS.mkdir(exist_ok=True)
        (report_latency.RESULTS / "latest.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
