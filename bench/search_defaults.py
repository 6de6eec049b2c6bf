"""python -m bench.search_efficiency --defaults [--seeds 0 1 2 3 4] [--experiments ...]
[--contenders default random previous] [--no-hydra] [--keep DIR]

Does the default search beat random search on the built-in experiments? Every built-in
experiment that trains in minutes on 2 CPUs (``digits``, ``digits_cnn``, ``digits_data``, and
``hf_text`` with 1,000 training reviews), each exactly as it ships (its ``search.num_samples``,
``scheduler.max_t``, ASHA, workers), one sweep per contender and seed:

* **default**: the experiment's own search (``search=tpe`` with the defaults of
  ``sweeps.search.defaults``: start-up trials by the sweep's size, trial 1 runs
  ``experiment.params``);
* **random**: ``search=random``, the same trials and scheduler (the baseline);
* **previous**: TPE as it was before those defaults (``search.n_startup_trials=4
  search.params_first=false``);
* **Hydra's Optuna sweeper** on ``digits`` (``bench.search_efficiency.run_hydra``: TPE, no
  pruning, the same MLP, data and trials, every trial to ``max_t``), unless ``--no-hydra``.

Target, per experiment: the median over seeds of random's best value. Per contender: the median
best and its spread (lowest, highest), and the medians of the epochs and of the seconds until a
report first reaches the target (a seed that never does counts as infinite), each as a ratio to
random's. **Goal**: the default's median best is at least random's, and its epochs ratio at
most 0.5. Each sweep runs in its own process under the machine's Ray lock
(``bench.search_efficiency.sweep_in_process``). Writes ``bench/results/search_defaults.json``
and prints the markdown table of ``docs/search.md``.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.search_efficiency import (
    LOCK,
    RESULTS,
    _median,
    reach,
    reports_of,
    run_hydra,
    sweep_in_process,
)

# experiment -> overrides that make it small enough (none: as it ships)
EXPERIMENTS: dict[str, list[str]] = {
    "digits": [], "digits_cnn": [], "digits_data": [],
    "hf_text": ["experiment.params.n_train=1000"],
}
CONTENDERS: dict[str, list[str]] = {
    "default": [],
    "random": ["search=random"],
    "previous": ["search.n_startup_trials=4", "search.params_first=false"],
}
BASELINE = "random"
HYDRA = "Hydra Optuna sweeper"
SEEDS = [0, 1, 2, 3, 4]


def sweep_overrides(experiment: str, contender: str, seed: int, storage: Path) -> list[str]:
    """``+experiment=NAME`` first (``_sweep_child`` reads it), then the sweep's overrides."""
    return [f"+experiment={experiment}", *EXPERIMENTS[experiment], *CONTENDERS[contender],
            f"sweep.seed={seed}", f"sweep.dir={storage / f'{experiment}-{contender}-s{seed}'}",
            f"tracking.uri=sqlite:///{storage / 'mlflow.db'}"]


def _sweep_child(out: str, overrides: list[str]) -> None:
    """In the sweep's own process: ``run_sweep`` of ``+experiment=NAME`` and the rest."""
    from sweeps import compose, run_sweep

    experiment = overrides[0].partition("=")[2]
    cfg = compose(experiment, overrides[1:])
    start = time.time()
    run_sweep(cfg)
    Path(out).write_text(json.dumps({"start": start, "end": time.time()}))


def run_one(experiment: str, contender: str, seed: int, storage: Path,
            lock: str | None) -> dict[str, Any]:
    """One sweep in its own process: its timing and its reports (time since its start)."""
    from sweeps.search.schedulers import decision_log

    name = f"{experiment}-{contender}-s{seed}"
    timing = sweep_in_process("bench.search_defaults", storage, name,
                              sweep_overrides(experiment, contender, seed, storage), lock)
    records = list(decision_log(storage / name).records())
    return {**timing, "reports": reports_of(records, timing["start"])}


def run_hydra_digits(seed: int, storage: Path, lock: str | None) -> dict[str, Any]:
    """Hydra's Optuna sweeper on the digits MLP with the experiment's trials and epochs."""
    from sweeps import compose

    cfg = compose("digits")
    where = storage / f"hydra-s{seed}"
    where.mkdir(parents=True, exist_ok=True)
    start = time.time()
    reports = run_hydra(cfg.search.num_samples, cfg.scheduler.max_t, seed, str(where))
    timing = {"start": start, "end": time.time()}
    (storage / f"hydra-s{seed}.timing.json").write_text(json.dumps(timing))
    return {**timing, "reports": reports}


def kept_runs(storages: list[Path], experiment: str) -> dict[str, dict[int, dict[str, Any]]]:
    """The sweeps of ``experiment`` that ``--keep`` left in ``storages`` (each contender's
    seeds that every contender finished), read as ``compare`` would have: for summarizing a
    benchmark run in parts (``--from``)."""
    from sweeps.search.schedulers import decision_log

    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for storage in storages:
        for timing_file in storage.glob(f"{experiment}-*-s*.timing.json"):
            name = timing_file.name.removesuffix(".timing.json")
            contender, _, seed = name.removeprefix(f"{experiment}-").rpartition("-s")
            if contender not in CONTENDERS:
                continue
            timing = json.loads(timing_file.read_text())
            runs.setdefault(contender, {})[int(seed)] = {
                **timing, "reports": reports_of(list(decision_log(storage / name).records()),
                                                timing["start"])}
        if experiment == "digits":
            for timing_file in storage.glob("hydra-s*.timing.json"):
                seed = int(timing_file.name.removesuffix(".timing.json").rpartition("-s")[2])
                log = storage / f"hydra-s{seed}" / "hydra_epochs.jsonl"
                rows = [json.loads(line) for line in log.read_text().splitlines()]
                runs.setdefault(HYDRA, {})[seed] = {**json.loads(timing_file.read_text()),
                                                    "reports": _hydra_reports(rows, timing_file)}
    common = set.intersection(*(set(by_seed) for by_seed in runs.values())) if runs else set()
    order = [c for c in (*CONTENDERS, HYDRA) if c in runs]  # as compare() lists them
    return {c: {s: runs[c][s] for s in sorted(common)} for c in order}


def _hydra_reports(rows: list[dict[str, Any]], timing_file: Path) -> list[Any]:
    from bench.search_efficiency import _first_reports

    start = json.loads(timing_file.read_text())["start"]
    return _first_reports((r["t"] - start, str(r["trial"]), r["epoch"], r["val_acc"])
                          for r in rows)


def summarize(experiment: str, runs: dict[str, dict[int, dict[str, Any]]]) -> dict[str, Any]:
    """Target (random's median best), per contender the medians, spread and ratios, and
    whether the default met the goal."""
    seeds = sorted(runs[BASELINE])
    bests = [max(r[3] for r in runs[BASELINE][s]["reports"]) for s in seeds]
    target = statistics.median(bests)
    rows: dict[str, Any] = {}
    for contender, by_seed in runs.items():
        per_seed = {}
        for s in seeds:
            row = reach(by_seed[s]["reports"], target)
            row["seconds_total"] = by_seed[s]["end"] - by_seed[s]["start"]
            per_seed[str(s)] = row
        values = list(per_seed.values())
        rows[contender] = {
            "best": statistics.median(r["best"] for r in values),
            "best_low": min(r["best"] for r in values),
            "best_high": max(r["best"] for r in values),
            "reached": sum(r["epochs_to_target"] is not None for r in values),
            "epochs_to_target": _median([r["epochs_to_target"] for r in values]),
            "seconds_to_target": _median([r["seconds_to_target"] for r in values]),
            "epochs_total": statistics.median(r["epochs_total"] for r in values),
            "seconds_total": statistics.median(r["seconds_total"] for r in values),
            "per_seed": per_seed}
    base = rows[BASELINE]
    for row in rows.values():
        for key, ratio in (("epochs_to_target", "epochs_ratio"),
                           ("seconds_to_target", "seconds_ratio")):
            row[ratio] = (row[key] / base[key] if row[key] is not None and base[key]
                          else None)
    default = rows.get("default")
    goal = None if default is None else {
        "best_at_least_random": default["best"] >= base["best"],
        "epochs_ratio_at_most_half": default["epochs_ratio"] is not None
        and default["epochs_ratio"] <= 0.5}
    return {"experiment": experiment, "overrides": EXPERIMENTS[experiment], "seeds": seeds,
            "target": target, "random_best_per_seed": bests, "rows": rows, "goal": goal}


def compare(seeds: list[int], experiments: list[str], contenders: list[str], hydra: bool,
            lock: str | None = LOCK, storage: str | Path | None = None,
            progress: Any = print) -> dict[str, Any]:
    """Every experiment, seed by seed, every contender (random always); the summaries."""
    names = [c for c in CONTENDERS if c in contenders or c == BASELINE]
    out: dict[str, Any] = {"seeds": seeds, "contenders": {c: CONTENDERS[c] for c in names},
                           "experiments": {}}
    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(storage or tmp)
        where.mkdir(parents=True, exist_ok=True)
        for experiment in experiments:
            runs: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in names}
            if hydra and experiment == "digits":
                runs[HYDRA] = {}
            for seed in seeds:
                for c in runs:
                    runs[c][seed] = (run_hydra_digits(seed, where, lock) if c == HYDRA else
                                     run_one(experiment, c, seed, where, lock))
                    progress(f"{experiment} {c} seed {seed}: "
                             f"{runs[c][seed]['end'] - runs[c][seed]['start']:.0f} s "
                             f"({time.time() - start:.0f} s in all)")
            out["experiments"][experiment] = summarize(experiment, runs)
    out["wall_s"] = time.time() - start
    return out


def format_markdown(result: dict[str, Any]) -> str:
    """One row per experiment and contender: medians over seeds, spread, ratios to random."""
    def num(value: Any, fmt: str) -> str:
        return "not reached" if value is None else format(value, fmt)

    lines = ["| experiment | search | best (median, low-high) | reached | epochs to target "
             "| ratio | s to target | ratio | epochs |", "|---|---|---|---|---|---|---|---|---|"]
    for experiment, summary in result["experiments"].items():
        for name, r in summary["rows"].items():
            lines.append(
                f"| {experiment} | {name} | {r['best']:.4f} ({r['best_low']:.4f}-"
                f"{r['best_high']:.4f}) | {r['reached']}/{len(summary['seeds'])} | "
                f"{num(r['epochs_to_target'], 'g')} | {num(r['epochs_ratio'], '.2f')} | "
                f"{num(r['seconds_to_target'], '.0f')} | {num(r['seconds_ratio'], '.2f')} | "
                f"{r['epochs_total']:g} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    import argparse

    if argv[:1] == ["_sweep"]:
        return _sweep_child(argv[1], argv[2:])
    parser = argparse.ArgumentParser(prog="python -m bench.search_efficiency --defaults")
    parser.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    parser.add_argument("--experiments", nargs="+", choices=list(EXPERIMENTS),
                        default=list(EXPERIMENTS))
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS),
                        default=list(CONTENDERS), help="random always runs (the baseline)")
    parser.add_argument("--no-hydra", action="store_true")
    parser.add_argument("--keep", metavar="DIR", help="put the sweeps in DIR and keep them")
    parser.add_argument("--no-lock", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "search_defaults.json"))
    parser.add_argument("--from", dest="kept", nargs="+", metavar="DIR",
                        help="run nothing: summarize the sweeps --keep left in these DIRs")
    args = parser.parse_args(argv)
    if args.kept:
        experiments = {e: summarize(e, runs) for e in args.experiments
                       if (runs := kept_runs([Path(d) for d in args.kept], e))}
        result = {"seeds": sorted({s for e in experiments.values() for s in e["seeds"]}),
                  "contenders": CONTENDERS, "experiments": experiments,
                  "from": args.kept}
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        return print(format_markdown(result))
    result = compare(args.seeds, args.experiments, args.contenders, not args.no_hydra,
                     None if args.no_lock else LOCK, args.keep,
                     progress=lambda line: print(line, flush=True))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(format_markdown(result))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
