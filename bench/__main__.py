"""python -m bench [--quick]

Runs the benchmarks in one private Ray instance (2 CPUs), prints their tables and writes
``bench/results/latest.json``. Every figure is a ratio against a baseline measured in the same
run (medians of repeated runs):

1. orchestration overhead per trial, sweeps vs a plain Ray Tune + Train script
   (``bench.overhead``);
2. report latency, our poll interval vs Ray's default (``bench.report_latency``).

``--quick`` runs each once with tiny sizes (what the smoke test does). Not run by the test
suite's default command; ``tests/integration/test_bench.py`` runs ``--quick``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench import overhead, report_latency

SIZES = {
    "full": {"overhead": {"trials": 3, "epochs": 3, "epoch_s": 0.3, "repeats": 3},
             "latency": {"intervals": [2.0, 0.5, 0.1], "reports": 10}},
    "quick": {"overhead": {"trials": 1, "epochs": 1, "epoch_s": 0.1, "repeats": 1},
              "latency": {"intervals": [2.0, 0.1], "reports": 3}},
}


def run(quick: bool = False) -> dict[str, Any]:
    """Every benchmark, in one Ray instance this function starts and shuts down."""
    import ray

    sizes = SIZES["quick" if quick else "full"]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    start = time.perf_counter()
    try:
        result = {"overhead": overhead.measure(**sizes["overhead"]),
                  "report_latency": report_latency.measure_all(**sizes["latency"])}
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
    print("\n2. report latency\n" + report_latency.format_rows(result["report_latency"]))
    print(f"\n(all benchmarks: {result['seconds']:.0f} s)")
    if not args.quick:
        report_latency.RESULTS.mkdir(exist_ok=True)
        (report_latency.RESULTS / "latest.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
