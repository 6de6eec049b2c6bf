"""python -m bench [--quick]

Runs the benchmarks in one private Ray instance (2 CPUs), prints their tables and writes
``bench/results/latest.json``. Every figure is a ratio against a baseline measured in the same
run (medians of repeated runs):

1. orchestration overhead per trial, sweeps vs a plain Ray Tune + Train script
   (``bench.overhead``);
2. fraction of sweep wall time spent training, for ~1 s (from 1.), ~10 s and ~30 s trials,
   sweeps vs the same plain script (``bench.fraction``);
3. report latency, our poll interval vs Ray's default (``bench.report_latency``);
4. search efficiency: epochs and seconds for TPE+ASHA, and for Hydra's Optuna sweeper, to reach
   the best score of a full-budget random search (``bench.search_efficiency``).

``--quick`` runs each once with tiny sizes (what the smoke test does). Not run by the test
suite's default command; ``tests/integration/test_bench.py`` runs ``--quick``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench import fraction, overhead, report_latency, search_efficiency

SIZES = {
    "full": {"overhead": {"trials": 3, "epochs": 3, "epoch_s": 0.3, "repeats": 3},
             "fraction": {"sizes": [(5, 2.0), (6, 5.0)], "trials": 2},
             "latency": {"intervals": [2.0, 0.1, 0.05, 0.03], "reports": 10},
             "search": {"trials": 12, "epochs": 9, "seed": 0}},
    "quick": {"overhead": {"trials": 1, "epochs": 1, "epoch_s": 0.1, "repeats": 1},
              "fraction": {"sizes": [(1, 0.5)], "trials": 1},
              "latency": {"intervals": [2.0, 0.1], "reports": 3},
              "search": {"trials": 2, "epochs": 2, "seed": 0}},
}


def run(quick: bool = False) -> dict[str, Any]:
    """Every benchmark, in one Ray instance this function starts and shuts down."""
    import ray

    sizes = SIZES["quick" if quick else "full"]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    result: dict[str, Any] = {}
    try:
        result["overhead"] = overhead.measure(**sizes["overhead"])
        result["fraction"] = ([fraction.from_overhead(result["overhead"])]
                              + fraction.measure(**sizes["fraction"]))
        result["report_latency"] = report_latency.measure_all(**sizes["latency"])
        result["search_efficiency"] = search_efficiency.measure(**sizes["search"])
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
    print(f"\n(all benchmarks: {result['seconds']:.0f} s)")
    if not args.quick:
        report_latency.RESULTS.mkdir(exist_ok=True)
        (report_latency.RESULTS / "latest.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
