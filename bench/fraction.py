"""python -m bench.fraction [--trials 2] [--sizes 5x2.0 6x5.0] [--workers 2]

Fraction of sweep wall time spent in training steps, for trials of a given training compute
(``EPOCHSxSECONDS`` per size: 5x2.0 is ~10 s a trial), for ``sweeps`` and for the plain Ray Tune +
Train script of ``bench.overhead`` (the baseline), same trainable and trials, ``--workers`` Train
workers per trial, same Ray instance. The ratio is sweeps' fraction over plain's.
``python -m bench`` adds the ~1 s size from the overhead benchmark's runs (its trials train ~1 s
each). Writes ``bench/results/fraction.json`` (``fraction_workers1.json`` for ``--workers 1``).

**Slots.** The fraction is training seconds / (wall seconds x trial slots), where the slots are
how many trials the side can run at once on the 2 CPUs: the plain script 1
(``max_concurrent_trials=1``, its trial driver holds a CPU), sweeps ``min(trials, 2 // workers)``
(its driver holds none). With 2 workers both sides run one trial at a time and this is plain
training / wall; with 1 worker sweeps runs two at once, and dividing by its 2 slots keeps the
fraction a share of the capacity (it cannot pass 1) rather than crediting it twice.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from bench.overhead import RESULTS, run_plain, run_sweeps

CPUS = 2  # the private Ray instance's, as bench.overhead starts it


def slots(side: str, trials: int, workers: int) -> int:
    """Trials the side runs at once (see the module docstring)."""
    return 1 if side == "plain" else max(1, min(trials, CPUS // workers))


def _row(epochs: int, epoch_s: float, plain: dict[str, float],
         sweeps: dict[str, float]) -> dict[str, Any]:
    for run in (plain, sweeps):
        run["fraction"] = run["training_s"] / (run["wall_s"] * run.get("slots", 1))
    return {"epochs": epochs, "epoch_s": epoch_s, "trial_training_s": epochs * epoch_s,
            "plain": plain, "sweeps": sweeps, "ratio": sweeps["fraction"] / plain["fraction"]}


def measure(sizes: list[tuple[int, float]], trials: int,
            workers: int = 2) -> list[dict[str, Any]]:
    """One row per (epochs, epoch_s), in the connected Ray instance (or a new one)."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as storage:
            for epochs, epoch_s in sizes:
                runs = {}
                for label, run in (("plain", run_plain), ("sweeps", run_sweeps)):
                    wall, training = run(trials, epochs, epoch_s, storage, workers=workers)
                    runs[label] = {"wall_s": wall, "training_s": training,
                                   "slots": slots(label, trials, workers)}
                rows.append(_row(epochs, epoch_s, runs["plain"], runs["sweeps"]))
    finally:
        if started:
            ray.shutdown()
    return rows


def from_overhead(result: dict[str, Any]) -> dict[str, Any]:
    """The row of the overhead benchmark's trials (medians of its repeats)."""
    m = result["median"]
    trials, workers = result["trials"], result.get("workers", 2)
    return _row(result["epochs"], result["epoch_s"],
                {**{k: m["plain"][k] for k in ("wall_s", "training_s")},
                 "slots": slots("plain", trials, workers)},
                {**{k: m["sweeps"][k] for k in ("wall_s", "training_s")},
                 "slots": slots("sweeps", trials, workers)})


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'training per trial':>19} {'plain Ray':>10} {'sweeps':>8} {'sweeps/plain':>13}"]
    for r in rows:
        lines.append(f"{r['trial_training_s']:>17.1f} s {100 * r['plain']['fraction']:>9.1f}% "
                     f"{100 * r['sweeps']['fraction']:>7.1f}% {r['ratio']:>13.2f}")
    return "\n".join(lines)


def _size(text: str) -> tuple[int, float]:
    epochs, seconds = text.lower().split("x")
    return int(epochs), float(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--sizes", type=_size, nargs="+", default=[(5, 2.0), (6, 5.0)])
    parser.add_argument("--workers", type=int, default=2, help="Train workers per trial")
    args = parser.parse_args()
    rows = measure(args.sizes, args.trials, args.workers)
    for row in rows:
        row["workers"] = args.workers
    RESULTS.mkdir(exist_ok=True)
    name = "fraction.json" if args.workers == 2 else f"fraction_workers{args.workers}.json"
    (RESULTS / name).write_text(json.dumps(rows, indent=2) + "\n")
    print(format_rows(rows))


if __name__ == "__main__":
    main()
