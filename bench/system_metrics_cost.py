"""python -m bench.system_metrics_cost WORKERS EPOCH_S PAIRS   (measured: 2 1.0 4)

The cost of ``tracking.system_metrics`` per trial: ``bench.overhead``'s sweeps side (3 trials of
``bench.workload:train``, 3 epochs, the default executor, SQLite MLflow), on vs off in
alternating pairs (the order flips each pair) in one private Ray instance of 2 CPUs. Writes
``bench/results/system_metrics_cost_workers<WORKERS>.json``: every run, the medians, the ratio
on / off of the overhead per trial (wall not spent training) and the median pair difference.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from typing import Any

from bench.overhead import RESULTS, _sweeps

KEYS = ("wall_s", "training_s", "overhead_per_trial_s")


def measure(workers: int, epoch_s: float, pairs: int, trials: int = 3,
            epochs: int = 3) -> dict[str, Any]:
    import ray

    runs: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as storage:
            for i in range(pairs):
                for label in ("on", "off") if i % 2 == 0 else ("off", "on"):
                    on = str(label == "on").lower()
                    run = _sweeps(trials, epochs, epoch_s, storage, True, workers, None, False,
                                  (f"tracking.system_metrics={on}",))
                    training = run.training
                    runs[label].append({"wall_s": run.wall, "training_s": training,
                                        "overhead_per_trial_s": (run.wall - training) / trials})
    finally:
        ray.shutdown()
    med = {label: {k: statistics.median(r[k] for r in rs) for k in KEYS}
           for label, rs in runs.items()}
    diffs = [a["overhead_per_trial_s"] - b["overhead_per_trial_s"]
             for a, b in zip(runs["on"], runs["off"], strict=True)]
    return {"command": f"python -m bench.system_metrics_cost {workers} {epoch_s} {pairs}",
            "workers": workers, "trials": trials, "epochs": epochs, "epoch_s": epoch_s,
            "pairs": pairs, "runs": runs, "median": med,
            "ratio_overhead_on_off": med["on"]["overhead_per_trial_s"]
            / med["off"]["overhead_per_trial_s"],
            "ratio_wall_on_off": med["on"]["wall_s"] / med["off"]["wall_s"],
            "median_pair_diff_overhead_per_trial_s": statistics.median(diffs)}


def main() -> None:
    workers, epoch_s, pairs = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    result = measure(workers, epoch_s, pairs)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"system_metrics_cost_workers{workers}.json").write_text(
        json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
