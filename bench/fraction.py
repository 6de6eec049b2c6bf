"""python -m bench.fraction [--trials 2] [--sizes 5x2.0 6x5.0]

Fraction of sweep wall time spent in training steps, for trials of a given training compute
(``EPOCHSxSECONDS`` per size: 5x2.0 is ~10 s a trial), for ``sweeps`` and for the plain Ray Tune +
Train script of ``bench.overhead`` (the baseline), same trainable and trials, same Ray instance.
The ratio is sweeps' fraction over plain's. ``python -m bench`` adds the ~1 s size from the
overhead benchmark's runs (its trials train ~1 s each). Writes ``bench/results/fraction.json``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from typing import Any

from bench.overhead import RESULTS, run_plain, run_sweeps


def _row(epochs: int, epoch_s: float, plain: dict[str, float],
         sweeps: dict[str, float]) -> dict[str, Any]:
    for run in (plain, sweeps):
        run["fraction"] = run["training_s"] / run["wall_s"]
    return {"epochs": epochs, "epoch_s": epoch_s, "trial_training_s": epochs * epoch_s,
            "plain": plain, "sweeps": sweeps, "ratio": sweeps["fraction"] / plain["fraction"]}


def measure(sizes: list[tuple[int, float]], trials: int) -> list[dict[str, Any]]:
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
                    wall, training = run(trials, epochs, epoch_s, storage)
                    runs[label] = {"wall_s": wall, "training_s": training}
                rows.append(_row(epochs, epoch_s, runs["plain"], runs["sweeps"]))
    finally:
        if started:
            ray.shutdown()
    return rows


def from_overhead(result: dict[str, Any]) -> dict[str, Any]:
    """The row of the overhead benchmark's trials (medians of its repeats)."""
    m = result["median"]
    return _row(result["epochs"], result["epoch_s"],
                {k: m["plain"][k] for k in ("wall_s", "training_s")},
                {k: m["sweeps"][k] for k in ("wall_s", "training_s")})


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
    args = parser.parse_args()
    rows = measure(args.sizes, args.trials)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "fraction.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(format_rows(rows))


if __name__ == "__main__":
    main()
