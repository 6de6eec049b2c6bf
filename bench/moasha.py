"""python -m bench.moasha [--seeds 0 1 2] [--trials 12] [--epochs 6] [--workers 1] [--keep DIR]
[--no-lock]

MO-ASHA against no early stopping on the built-in multi-objective experiment
(``+experiment=digits_multiobjective``: ``val_acc`` max, ``n_params`` min, its search space
and searcher), each with the same ``--trials`` trials of at most ``--epochs`` epochs
(``scheduler.max_t``), ``--workers`` workers per trial and each of ``--seeds``
(``sweep.seed``):

1. **none**: ``scheduler=none``, every trial trains every epoch;
2. **asha**: ``scheduler=asha`` (MO-ASHA, ``sweeps.search.moasha``: promotion by non-dominated
   sort, the experiment's ``grace_period`` 1 and ``reduction_factor`` 3), the same trials;
3. **asha_2x**: MO-ASHA with twice the trials, for a number of epochs near what **none**
   trains (what early stopping is for: more configurations for the compute; measured 1.2x).

Per sweep: the **hypervolume** of its final Pareto front (``pareto.json``, the summary's: each
trial's values from the report where its ``val_acc`` was best), the **epochs** it trained
(judged reports in ``state/scheduler.jsonl``) and its wall seconds (``run_sweep``'s, Ray's start
included). Hypervolume is taken in a normalised minimisation space, both axes in [0, 1]:
``1 - val_acc`` and ``(log10(n_params) - 2.5) / 3.5`` (``n_params`` from 10^2.5 = 316 to 10^6,
the search space's 610 to 826,378 inside it), reference point (1, 1): the area of the unit
square that the front dominates (1.0 would be a perfect model of ~316 parameters; a front of
one trial with val_acc 0.9 and 5,000 parameters scores 0.9 * (1 - 0.34) = 0.59).

Each sweep runs in its own process under ``flock /tmp/sweeps-ray.lock`` (``--no-lock`` when the
caller holds it), its own ``sweep.dir`` and one SQLite MLflow file, under a temporary directory
(``--keep`` keeps them). ``--workers 1`` (the experiment says 2) lets two trials run at once on
2 CPUs, which keeps the 9 sweeps of the default size under 15 minutes there; the JSON says
which sizes ran. Writes ``bench/results/moasha.json`` and prints the markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.search_efficiency import sweep_in_process

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
LOCK = "/tmp/sweeps-ray.lock"
EXPERIMENT = "digits_multiobjective"
CONTENDERS = {"none": ("none", 1), "asha": ("asha", 1), "asha_2x": ("asha", 2)}  # scheduler,
# trials as a multiple of --trials
LOG10_PARAMS = (2.5, 6.0)  # the normalisation box of log10(n_params)
REFERENCE = (1.0, 1.0)


def normalised(val_acc: float, n_params: float) -> tuple[float, float]:
    """A trial's point in the minimisation space the hypervolume is measured in, clipped to
    the unit square.

    Example:
        >>> normalised(0.9, 10 ** 4.25)
        (0.09999999999999998, 0.5)
    """
    lo, hi = LOG10_PARAMS
    size = (math.log10(max(n_params, 1.0)) - lo) / (hi - lo)
    return min(max(1 - val_acc, 0.0), 1.0), min(max(size, 0.0), 1.0)


def hypervolume(points: list[tuple[float, float]], ref: tuple[float, float] = REFERENCE
                ) -> float:
    """The area dominated by ``points`` (both coordinates minimised) and bounded by ``ref``.

    Example:
        >>> hypervolume([(0.5, 0.5)]), hypervolume([(0.2, 0.6), (0.6, 0.2)])
        (0.25, 0.48)
    """
    inside = sorted((x, y) for x, y in points if x < ref[0] and y < ref[1])
    area, ceiling = 0.0, ref[1]
    for x, y in inside:  # by x ascending: each point adds the strip below the best y so far
        if y < ceiling:
            area += (ref[0] - x) * (ceiling - y)
            ceiling = y
    return round(area, 12)


def _child(out: str, overrides: list[str]) -> None:
    """In the sweep's own process: run it, write when it started and ended to ``out``."""
    from sweeps import compose, run_sweep

    cfg = compose(EXPERIMENT, overrides)
    start = time.time()
    run_sweep(cfg)
    Path(out).write_text(json.dumps({"start": start, "end": time.time()}))


def run_one(contender: str, seed: int, trials: int, epochs: int, workers: int,
            storage: Path, lock: str | None = LOCK) -> dict[str, Any]:
    """One sweep in a new process (under ``flock lock``); what ``summarize`` needs of it."""
    from sweeps.search.decisions import decision_log

    scheduler, times = CONTENDERS[contender]
    trials *= times
    name = f"{contender}-s{seed}"
    sweep_dir = storage / name
    overrides = [f"scheduler={scheduler}", f"search.num_samples={trials}",
                 f"scheduler.max_t={epochs}", f"scaling.num_workers={workers}",
                 f"sweep.seed={seed}", f"sweep.dir={sweep_dir}",
                 f"tracking.uri=sqlite:///{storage / 'mlflow.db'}"]
    timing = sweep_in_process("bench.moasha", storage, name, overrides, lock)
    front = json.loads((sweep_dir / "pareto.json").read_text())
    records = decision_log(sweep_dir).records()
    points = [normalised(m["values"]["val_acc"], m["values"]["n_params"])
              for m in front["members"]]
    stopped = {r["trial"] for r in records if r.get("action") == "STOP"
               and r.get("epoch", epochs) < epochs and not r.get("error")}
    return {"contender": contender, "scheduler": scheduler, "seed": seed,
            "hypervolume": hypervolume(points),
            "epochs": sum("action" in r for r in records),
            "seconds": round(timing["end"] - timing["start"], 1),
            "front_size": len(points), "trials": front["trials"], "stopped": len(stopped),
            "front": [m["values"] for m in front["members"]]}


def summarize(runs: list[dict[str, Any]], *, trials: int, epochs: int, workers: int,
              seeds: list[int]) -> dict[str, Any]:
    """Per contender: the means over seeds of hypervolume, epochs, seconds, front size and
    trials stopped; each MO-ASHA contender's hypervolume, epochs and seconds over none's."""
    rows = {}
    for c in CONTENDERS:
        mine = [r for r in runs if r.get("contender", r["scheduler"]) == c]
        if mine:
            rows[c] = {k: round(statistics.mean(r[k] for r in mine), 4)
                       for k in ("hypervolume", "epochs", "seconds", "front_size", "stopped")}
    ratios = {c: {k: round(rows[c][k] / rows["none"][k], 3)
                  for k in ("hypervolume", "epochs", "seconds") if rows["none"][k]}
              for c in rows if c != "none"}
    return {"experiment": EXPERIMENT, "trials": trials, "epochs": epochs, "workers": workers,
            "seeds": seeds,
            "sizes_note": "search.num_samples and scheduler.max_t are the experiment's (12, 6; "
                          "asha_2x: 24 trials); scaling.num_workers=1 instead of its 2, so two "
                          "trials run at once on 2 CPUs",
            "hypervolume_space": {"x": "1 - val_acc", "y": "(log10(n_params) - 2.5) / 3.5",
                                  "clipped_to": [0, 1], "reference_point": list(REFERENCE),
                                  "front": "pareto.json (each trial's best-val_acc report)"},
            "rows": rows, "over_none": ratios, "per_seed": runs}


def format_markdown(result: dict[str, Any]) -> str:
    """The table docs/experiments.md shows."""
    lines = ["| contender | hypervolume (mean) | epochs trained (mean) | wall s (mean) | "
             "front size | trials stopped early |", "|---|---|---|---|---|---|"]
    for s, row in result["rows"].items():
        lines.append(f"| {s} | {row['hypervolume']:.3f} | {row['epochs']:.1f} | "
                     f"{row['seconds']:.0f} | {row['front_size']:.1f} | {row['stopped']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_sweep"]:
        return _child(argv[1], argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--keep", metavar="DIR", help="put the sweeps in DIR and keep them")
    parser.add_argument("--no-lock", action="store_true", help=f"do not take {LOCK} per sweep")
    args = parser.parse_args(argv)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-moasha-") as tmp:
        storage = Path(args.keep or tmp)
        storage.mkdir(parents=True, exist_ok=True)
        runs = []
        for seed in args.seeds:
            for c in CONTENDERS:
                runs.append(run_one(c, seed, args.trials, args.epochs, args.workers, storage,
                                    None if args.no_lock else LOCK))
                r = runs[-1]
                print(f"{c} seed {seed}: hypervolume {r['hypervolume']:.3f}, {r['epochs']} "
                      f"epochs, {r['seconds']:.0f} s", flush=True)
    result = summarize(runs, trials=args.trials, epochs=args.epochs, workers=args.workers,
                       seeds=args.seeds)
    result["wall_s"] = round(time.time() - started, 1)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "moasha.json").write_text(json.dumps(result, indent=2) + "\n")
    print(format_markdown(result))
    print(f"\n({len(runs)} sweeps: {result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
