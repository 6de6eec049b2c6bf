"""python -m bench.search_efficiency [--seeds 0 1 2] [--trials 6] [--epochs 6] [--workers 1]
[--contenders ...] [--hydra] [--keep] [--no-lock]
python -m bench.search_efficiency --defaults ...   (bench/search_defaults.py: every built-in
experiment, the default search against random search; its docstring)

Search efficiency on the built-in CNN experiment (``+experiment=digits_cnn``: its search space
of lr, channels, blocks and weight_decay), every contender with the same budget of
``--trials`` trials x ``--epochs`` epochs (``scheduler.max_t``), ``--workers`` Train workers per
trial (``scaling.num_workers``; 1 lets two trials run at once on 2 CPUs) and each of
``--seeds`` (``sweep.seed``):

1. **random, full budget** (the baseline): ``search=random scheduler=none``, every trial trains
   every epoch;
2. **TPE + ASHA** (the default): ``search=tpe scheduler=asha``;
3. **CMA-ES**: ``search=optuna search.sampler._target_=optuna.samplers.CmaEsSampler
   scheduler=none`` (it samples the choice param ``channels`` at random);
4. **PBT**: ``search=random scheduler=pbt scheduler.perturbation_interval=2
   scheduler.quantile_fraction=0.25``; ``scheduler.mutate`` is left at its default (the float
   params, lr and weight_decay).

**Target rule:** the target is the median, over the seeds, of the random contender's best
reported ``val_acc`` (so random itself misses it on about half the seeds). For each contender
and seed: the epochs trained and the wall seconds (from the call of ``run_sweep``, Ray's start
included) until a reported ``val_acc`` first reaches the target, and the totals. Reports are
read off ``state/scheduler.jsonl`` in time order; "epochs trained" counts reports, not the
largest epoch (after a PBT exploit a trial's clock jumps to its donor's epoch, and a trial's
closing record repeating its last report is not counted again). A seed that never reaches the
target counts as not reached (an infinite value for the median), so a median is "not
reached" when at least half the seeds missed. Per contender: the MEDIAN over seeds of
epochs-to-target and of seconds-to-target, and each as a ratio to random's median of the same
run (below 1: fewer epochs or seconds than random needed).

Each sweep runs in its own process under ``flock /tmp/sweeps-ray.lock`` (one Ray instance on
the machine at a time; other Ray users can interleave between sweeps; ``--no-lock`` when the
caller already holds the lock), with its own ``sweep.dir`` and one SQLite MLflow file shared
by all sweeps, under a temporary directory (``--keep`` keeps it). Default sizes: 3 seeds x 4
contenders = 12 sweeps of 6 trials x 6 epochs, 1 worker per trial: about 20 minutes on 2 CPUs.
Writes ``bench/results/search_efficiency.json`` (sizes, target, per-contender medians under
``rows``, every seed under ``per_seed``) and prints the markdown table.

``--hydra`` adds the earlier comparison on the digits MLP (``+experiment=digits``), which
``python -m bench`` runs through ``measure()``, with **Hydra's Optuna sweeper** (TPE, no
pruning, basic launcher: one process per trial, no Ray) from its own virtual environment
(hydra-optuna-sweeper needs optuna<3), created on first use under ``bench/.venv-hydra-optuna``.
It trains the same MLP on the same data with the same global batch, epoch for epoch
(``bench/hydra_optuna/app.py``), against random (full budget) and TPE+ASHA on the first seed;
its ratios are to the whole random search's epochs and seconds. It goes under ``mlp_hydra``.
``--hydra-only`` runs that comparison alone, once per seed, with ``--workers`` Train workers per
sweeps trial, and writes the medians over seeds (each contender's search wall, time to target,
and sweeps TPE+ASHA's wall over Hydra's) to ``bench/results/hydra_optuna_workers<N>.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.venvs import venv_python

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
HYDRA_VENV = ROOT / "bench" / ".venv-hydra-optuna"
# Pinned: the versions the baseline was measured with (hydra-optuna-sweeper needs optuna<3).
HYDRA_REQUIREMENTS = ["optuna==2.10.1", "hydra-optuna-sweeper==1.3.0"]

Report = tuple[float, str, int, float]  # (seconds since start, trial, epoch, val_acc)


def run_sweeps(search: str, scheduler: str, trials: int, epochs: int, seed: int,
               storage: str, workers: int | None = None) -> list[Report]:
    """One sweep of the digits experiment (its own 2 workers per trial unless ``workers``);
    its reports, in time order."""
    from sweeps import compose, run_sweep
    from sweeps.search.schedulers import decision_log

    sweep_dir = Path(storage) / f"{search}-{scheduler}"
    cfg = compose("digits", [f"search={search}", f"scheduler={scheduler}",
                             f"search.num_samples={trials}", f"scheduler.max_t={epochs}",
                             f"sweep.seed={seed}", f"sweep.dir={sweep_dir}",
                             f"tracking.uri=sqlite:///{storage}/mlflow.db",
                             *([f"scaling.num_workers={workers}"] if workers else [])])
    start = time.time()
    run_sweep(cfg)
    return _first_reports((r["t"] - start, r["trial"], int(r["epoch"]), float(r["value"]))
                          for r in decision_log(sweep_dir).records()
                          if r.get("value") is not None and "t" in r)


def _first_reports(reports: Any) -> list[Report]:
    """Each (trial, epoch) once (a trial's last result is also logged when it ends), by time."""
    seen: dict[tuple[str, int], Report] = {}
    for report in sorted(reports):
        seen.setdefault((report[1], report[2]), report)
    return sorted(seen.values())


def hydra_python() -> Path:
    """The baseline's interpreter: a venv holding optuna<3 and hydra-optuna-sweeper, that
    borrows torch, scikit-learn, numpy, scipy, hydra-core and SQLAlchemy from this environment
    (``bench.venvs``: one numpy for torch, scikit-learn and optuna); created once, reused. An
    old-style venv (made with ``--system-site-packages``) is made again."""
    return venv_python(HYDRA_VENV, HYDRA_REQUIREMENTS, _IMPORT_CHECK)


# The baseline must get optuna 2.x from its own site-packages, torch from this environment.
_IMPORT_CHECK = """
import optuna, sklearn, torch
from hydra_plugins.hydra_optuna_sweeper import optuna_sweeper
assert optuna.__version__.startswith("2."), optuna.__file__
"""


def run_hydra(trials: int, epochs: int, seed: int, storage: str) -> list[Report]:
    """Hydra's Optuna sweeper over the same space (``bench/hydra_optuna``); its reports."""
    python = hydra_python()
    log = Path(storage) / "hydra_epochs.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HYDRA_BENCH_DIR": f"{storage}/hydra"}
    start = time.time()
    proc = subprocess.run(
        [str(python), str(ROOT / "bench" / "hydra_optuna" / "app.py"), "--multirun",
         f"log={log}", f"epochs={epochs}", f"seed={seed}", f"hydra.sweeper.n_trials={trials}",
         f"hydra.sweeper.sampler.seed={seed}"],
        env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the Hydra Optuna sweeper failed:\n{proc.stdout}\n{proc.stderr}")
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    return _first_reports((r["t"] - start, str(r["trial"]), r["epoch"], r["val_acc"])
                          for r in rows)


def reach(reports: list[Report], target: float) -> dict[str, Any]:
    """Epochs and seconds until a report first reaches ``target``; the totals; the best."""
    out: dict[str, Any] = {"epochs_total": len(reports),
                           "seconds_total": reports[-1][0] if reports else 0.0,
                           "trials": len({r[1] for r in reports}),
                           "best": max((r[3] for r in reports), default=None),
                           "epochs_to_target": None, "seconds_to_target": None}
    for i, (t, _, _, value) in enumerate(reports, 1):
        if value >= target - 1e-12:
            out.update(epochs_to_target=i, seconds_to_target=t)
            break
    return out


def measure(trials: int, epochs: int, seed: int, hydra: bool = True,
            workers: int | None = None) -> dict[str, Any]:
    """All contenders on one problem: the sweeps ones in the connected Ray instance, or each
    in its own as ``python -m sweeps`` starts one (Ray's start then counts in its seconds, as
    the Hydra sweeper's process start counts in its). Each row also gets ``wall_s``, from the
    call to its return (sweeps: summary, plots and MLflow's end included)."""
    walls: dict[str, float] = {}

    def timed(name: str, run: Any, *args: Any) -> list[Report]:
        start = time.time()
        reports = run(*args)
        walls[name] = time.time() - start
        return reports

    with tempfile.TemporaryDirectory() as storage:
        random_reports = timed("random (full budget)", run_sweeps, "random", "none", trials,
                               epochs, seed, storage, workers)
        tpe_reports = timed("sweeps TPE+ASHA", run_sweeps, "tpe", "asha", trials, epochs, seed,
                            storage, workers)
        hydra_reports = (timed("Hydra Optuna sweeper", run_hydra, trials, epochs, seed, storage)
                         if hydra else None)
    target = max(r[3] for r in random_reports)
    rows = {"random (full budget)": reach(random_reports, target),
            "sweeps TPE+ASHA": reach(tpe_reports, target)}
    if hydra_reports is not None:
        rows["Hydra Optuna sweeper"] = reach(hydra_reports, target)
    base = rows["random (full budget)"]
    for name, row in rows.items():
        row["wall_s"] = walls[name]
        # Against the whole random search (its full budget: what it took to find the target).
        row["epochs_ratio"] = (row["epochs_to_target"] / base["epochs_total"]
                               if row["epochs_to_target"] else None)
        row["seconds_ratio"] = (row["seconds_to_target"] / base["seconds_total"]
                                if row["seconds_to_target"] else None)
    return {"trials": trials, "epochs": epochs, "seed": seed, "workers": workers or 2,
            "target_val_acc": target, "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    def num(value: Any, fmt: str) -> str:
        return "not reached" if value is None else format(value, fmt)

    lines = [f"target: val_acc {result['target_val_acc']:.4f} (best of random, "
             f"{result['trials']} trials x {result['epochs']} epochs)",
             f"{'':<22} {'epochs to target':>17} {'ratio':>6} {'s to target':>12} {'ratio':>6} "
             f"{'epochs':>7} {'best':>7}"]
    for name, r in result["rows"].items():
        lines.append(f"{name:<22} {num(r['epochs_to_target'], 'd'):>17} "
                     f"{num(r['epochs_ratio'], '.2f'):>6} {num(r['seconds_to_target'], '.1f'):>12} "
                     f"{num(r['seconds_ratio'], '.2f'):>6} {r['epochs_total']:>7} "
                     f"{r['best']:>7.4f}")
    return "\n".join(lines)


# The CNN comparison (the module docstring): one sweep per contender and seed, each in its own
# process under the machine's Ray lock.

EXPERIMENT = "digits_cnn"
LOCK = "/tmp/sweeps-ray.lock"
BASELINE = "random"
# key -> (row name, the sweep's overrides); the row names of measure() kept for the same sweeps
CONTENDERS: dict[str, tuple[str, list[str]]] = {
    "tpe_asha": ("sweeps TPE+ASHA", ["search=tpe", "scheduler=asha"]),
    "cmaes": ("CMA-ES", ["search=optuna",
                         "search.sampler._target_=optuna.samplers.CmaEsSampler",
                         "scheduler=none"]),
    "random": ("random (full budget)", ["search=random", "scheduler=none"]),
    "pbt": ("PBT", ["search=random", "scheduler=pbt", "scheduler.perturbation_interval=2",
                    "scheduler.quantile_fraction=0.25"]),
}
DEFAULTS = {"seeds": [0, 1, 2], "trials": 6, "epochs": 6, "workers": 1}


def sweep_overrides(contender: str, seed: int, trials: int, epochs: int, workers: int,
                    storage: str | Path) -> list[str]:
    """The Hydra overrides of one sweep of ``contender`` (its own dir, the shared MLflow file)."""
    return [*CONTENDERS[contender][1], f"search.num_samples={trials}",
            f"scheduler.max_t={epochs}", f"scaling.num_workers={workers}", f"sweep.seed={seed}",
            f"sweep.dir={Path(storage) / f'{contender}-s{seed}'}",
            f"tracking.uri=sqlite:///{Path(storage) / 'mlflow.db'}"]


def _sweep_child(overrides: list[str], out: str) -> None:
    """In the sweep's own process: run it (Ray started and stopped by ``run_sweep``) and write
    when it started and ended to ``out``."""
    from sweeps import compose, run_sweep

    cfg = compose(EXPERIMENT, overrides)
    start = time.time()
    run_sweep(cfg)
    Path(out).write_text(json.dumps({"start": start, "end": time.time()}))


def run_one(contender: str, seed: int, trials: int, epochs: int, workers: int,
            storage: str | Path, lock: str | None = LOCK) -> dict[str, Any]:
    """One sweep in a new process (under ``flock lock`` unless ``lock`` is None); its timing
    and its records from ``state/scheduler.jsonl``."""
    from sweeps.search.schedulers import decision_log

    overrides = sweep_overrides(contender, seed, trials, epochs, workers, storage)
    timing = sweep_in_process("bench.search_efficiency", Path(storage), f"{contender}-s{seed}",
                              overrides, lock)
    return {**timing, "records": list(decision_log(Path(storage) / f"{contender}-s{seed}")
                                      .records())}


def sweep_in_process(module: str, storage: Path, name: str, overrides: list[str],
                     lock: str | None) -> dict[str, float]:
    """``python -m <module> _sweep <storage>/<name>.timing.json <overrides>`` in a new process
    (under ``flock lock`` unless None), its output in ``<name>.log``; the timing it wrote
    (``{"start", "end"}``). ``RuntimeError`` with the log's tail if it failed."""
    out, log = storage / f"{name}.timing.json", storage / f"{name}.log"
    cmd = [sys.executable, "-m", module, "_sweep", str(out), *overrides]
    if lock:
        cmd = ["flock", lock, *cmd]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    with log.open("w") as f:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"sweep {name} failed ({proc.returncode}); {' '.join(overrides)}:"
                           f"\n{tail}")
    return json.loads(out.read_text())


def reports_of(records: list[dict[str, Any]], start: float) -> list[Report]:
    """Every report of a decision log, in time order, each epoch trained counted once.

    A record with an ``epoch`` and a ``value`` is a report (PBT's PAUSE records included); a
    trial's closing record (``end``) counts only when it is not the repeat of that trial's
    last report. The same (trial, epoch) may come twice from PBT (an exploited trial continues
    from its donor's epoch, maybe an earlier one): both count, each was trained.
    """
    out: list[Report] = []
    last: dict[str, Any] = {}
    for r in records:
        if r.get("value") is None or r.get("epoch") is None or "t" not in r:
            continue
        trial, epoch = str(r["trial"]), float(r["epoch"])
        if r.get("end") and last.get(trial) == epoch:
            continue
        last[trial] = epoch
        out.append((r["t"] - start, trial, int(epoch), float(r["value"])))
    return sorted(out, key=lambda rep: rep[0])


def _median(values: list[float | None]) -> float | None:
    """Median with None (not reached) as +infinity; None when the median is infinite."""
    import statistics

    if not values:
        return None
    med = statistics.median(math.inf if v is None else v for v in values)
    return None if math.isinf(med) else med


def summarize(runs: dict[str, dict[int, dict[str, Any]]], *, trials: int, epochs: int,
              workers: int) -> dict[str, Any]:
    """The result: the target (median over seeds of random's best), per contender and seed
    what ``reach`` says, and per contender the medians and their ratios to random's."""
    seeds = sorted(next(iter(runs.values())))
    reports = {c: {s: reports_of(run["records"], run["start"]) for s, run in by_seed.items()}
               for c, by_seed in runs.items()}
    bests = [max(r[3] for r in reports[BASELINE][s]) for s in seeds]
    target = _median(bests)
    assert target is not None
    per_seed: dict[str, dict[str, Any]] = {}
    for c, by_seed in runs.items():
        per_seed[CONTENDERS[c][0]] = rows = {}
        for s in seeds:
            row = reach(reports[c][s], target)
            row["seconds_total"] = by_seed[s]["end"] - by_seed[s]["start"]  # run_sweep's wall
            row["exploits"] = sum(1 for r in by_seed[s]["records"] if r.get("exploit"))
            rows[str(s)] = row
    summary: dict[str, dict[str, Any]] = {}
    for name, rows in per_seed.items():
        seed_rows = list(rows.values())
        summary[name] = {
            "reached": sum(r["epochs_to_target"] is not None for r in seed_rows),
            "seeds": len(seed_rows),
            "epochs_to_target": _median([r["epochs_to_target"] for r in seed_rows]),
            "seconds_to_target": _median([r["seconds_to_target"] for r in seed_rows]),
            "epochs_total": _median([r["epochs_total"] for r in seed_rows]),
            "seconds_total": _median([r["seconds_total"] for r in seed_rows]),
            "best": _median([r["best"] for r in seed_rows]),
            "exploits": sum(r["exploits"] for r in seed_rows)}
    base = summary[CONTENDERS[BASELINE][0]]
    for row in summary.values():
        for key, ratio in (("epochs_to_target", "epochs_ratio"),
                           ("seconds_to_target", "seconds_ratio")):
            row[ratio] = (row[key] / base[key] if row[key] is not None and base[key]
                          else None)
    return {"experiment": EXPERIMENT, "seeds": seeds, "trials": trials, "epochs": epochs,
            "workers": workers, "sweeps": len(runs) * len(seeds),
            "target_rule": "median over seeds of the random contender's best val_acc",
            "random_best_per_seed": dict(zip(map(str, seeds), bests, strict=True)),
            "target_val_acc": target, "rows": summary, "per_seed": per_seed}


def compare(seeds: list[int], trials: int, epochs: int, workers: int,
            contenders: list[str] | None = None, lock: str | None = LOCK,
            storage: str | Path | None = None, progress: Any = None) -> dict[str, Any]:
    """Every contender (random always) on every seed, one locked sweep process each; the
    summary. ``storage``: where the sweeps go (default: a temporary directory, removed)."""
    names = [c for c in CONTENDERS if c in (contenders or CONTENDERS) or c == BASELINE]
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(storage or tmp)
        where.mkdir(parents=True, exist_ok=True)
        runs: dict[str, dict[int, dict[str, Any]]] = {c: {} for c in names}
        start = time.time()
        for seed in seeds:  # seed by seed: a cut run still has whole seeds
            for c in names:
                runs[c][seed] = run_one(c, seed, trials, epochs, workers, where, lock)
                if progress:
                    progress(f"{c} seed {seed}: {runs[c][seed]['end'] - runs[c][seed]['start']:.0f}"
                             f" s ({time.time() - start:.0f} s in all)")
        result = summarize(runs, trials=trials, epochs=epochs, workers=workers)
    result["wall_s"] = time.time() - start
    return result


def format_markdown(result: dict[str, Any]) -> str:
    """The summary table (medians over seeds, ratios to random's) and the per-seed table."""
    def num(value: Any, fmt: str) -> str:
        return "not reached" if value is None else format(value, fmt)

    seeds = result["seeds"]
    lines = [f"digits_cnn, {result['trials']} trials x {result['epochs']} epochs, "
             f"{result['workers']} worker(s) per trial, seeds {', '.join(map(str, seeds))}; "
             f"target val_acc {result['target_val_acc']:.4f} (median over seeds of random's "
             f"best: {', '.join(f'{v:.4f}' for v in result['random_best_per_seed'].values())})",
             "",
             "| contender | reached | epochs to target (median) | ratio | s to target (median) "
             "| ratio | epochs trained | sweep s | best val_acc |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, r in result["rows"].items():
        lines.append(f"| {name} | {r['reached']}/{r['seeds']} | "
                     f"{num(r['epochs_to_target'], 'g')} | {num(r['epochs_ratio'], '.2f')} | "
                     f"{num(r['seconds_to_target'], '.0f')} | {num(r['seconds_ratio'], '.2f')} | "
                     f"{r['epochs_total']:g} | {r['seconds_total']:.0f} | {r['best']:.4f} |")
    lines += ["", "| contender | seed | epochs to target | s to target | epochs trained "
              "| sweep s | best val_acc | PBT exploits |", "|---|---|---|---|---|---|---|---|"]
    for name, rows in result["per_seed"].items():
        for seed, r in rows.items():
            lines.append(f"| {name} | {seed} | {num(r['epochs_to_target'], 'd')} | "
                         f"{num(r['seconds_to_target'], '.0f')} | {r['epochs_total']} | "
                         f"{r['seconds_total']:.0f} | {r['best']:.4f} | {r['exploits']} |")
    return "\n".join(lines)


def _legacy_child(out: str, trials: int, epochs: int, seed: int, workers: int = 0) -> None:
    """In its own (locked) process: ``measure()`` with the Hydra sweeper, to ``out``."""
    Path(out).write_text(json.dumps(measure(trials, epochs, seed, hydra=True,
                                            workers=workers or None)))


def run_legacy(trials: int, epochs: int, seed: int, lock: str | None = LOCK,
               workers: int | None = None) -> dict[str, Any]:
    """The MLP comparison with Hydra's Optuna sweeper (``measure``), in a locked process;
    sweeps' trials with the experiment's 2 workers unless ``workers``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "legacy.json"
        cmd = [sys.executable, "-m", "bench.search_efficiency", "_legacy", str(out),
               str(trials), str(epochs), str(seed), str(workers or 0)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
        subprocess.run(["flock", lock, *cmd] if lock else cmd, cwd=ROOT, env=env, check=True)
        return json.loads(out.read_text())


def hydra_ratios(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds of each MLP contender's search wall (``seconds_total``: the call to
    its last report), whole wall (``wall_s``: the call to its return) and time to target, and
    sweeps TPE+ASHA's over Hydra's for both walls."""
    def med(name: str, key: str) -> float | None:
        values = [r["rows"][name][key] for r in per_seed]
        return None if None in values else statistics.median(values)

    names = list(per_seed[0]["rows"])
    out: dict[str, Any] = {name: {key: med(name, key) for key in
                                  ("seconds_total", "seconds_to_target", "epochs_total", "best")}
                           for name in names}
    for name in names:
        out[name]["wall_s"] = statistics.median(r["rows"][name]["wall_s"] for r in per_seed)
    out["call_wall_ratio_tpe_asha_to_hydra"] = statistics.median(
        r["rows"]["sweeps TPE+ASHA"]["wall_s"] / r["rows"]["Hydra Optuna sweeper"]["wall_s"]
        for r in per_seed)
    out["wall_ratio_tpe_asha_to_hydra"] = statistics.median(
        r["rows"]["sweeps TPE+ASHA"]["seconds_total"]
        / r["rows"]["Hydra Optuna sweeper"]["seconds_total"] for r in per_seed)
    return out


def _hydra_only(seeds: list[int], trials: int, epochs: int, lock: str | None,
                workers: int) -> None:
    per_seed = []
    for seed in seeds:
        per_seed.append(run_legacy(trials, epochs, seed, lock, workers))
        print(f"\nseed {seed}\n" + format_table(per_seed[-1]), flush=True)
    result = {"trials": trials, "epochs": epochs, "workers": workers, "seeds": seeds,
              "per_seed": per_seed,
              "median": hydra_ratios(per_seed)}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"hydra_optuna_workers{workers}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print("\nmedian over seeds: " + json.dumps(result["median"], indent=2))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if "--defaults" in argv:  # the built-in experiments' default search against random's
        from bench.search_defaults import main as defaults_main

        return defaults_main([a for a in argv if a != "--defaults"])
    if argv[:1] == ["_sweep"]:  # one sweep, in the process run_one starts
        return _sweep_child(argv[2:], argv[1])
    if argv[:1] == ["_legacy"]:
        return _legacy_child(argv[1], *map(int, argv[2:6]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=DEFAULTS["seeds"])
    parser.add_argument("--seed", type=int, help="one seed (same as --seeds N)")
    parser.add_argument("--trials", type=int, default=DEFAULTS["trials"])
    parser.add_argument("--epochs", type=int, default=DEFAULTS["epochs"])
    parser.add_argument("--workers", type=int, default=DEFAULTS["workers"],
                        help="Train workers per trial (scaling.num_workers)")
    parser.add_argument("--contenders", nargs="+", choices=list(CONTENDERS),
                        default=list(CONTENDERS), help="random always runs (the baseline)")
    parser.add_argument("--hydra", action="store_true",
                        help="also the MLP comparison with Hydra's Optuna sweeper (first seed)")
    parser.add_argument("--hydra-only", action="store_true",
                        help="only the MLP comparison with Hydra's Optuna sweeper, per seed; "
                             "writes bench/results/hydra_optuna_workers<N>.json")
    parser.add_argument("--keep", metavar="DIR", help="put the sweeps in DIR and keep them")
    parser.add_argument("--no-lock", action="store_true",
                        help=f"do not take {LOCK} per sweep (the caller holds it)")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else args.seeds
    lock = None if args.no_lock else LOCK
    if args.hydra_only:
        return _hydra_only(seeds, args.trials, args.epochs, lock, args.workers)
    result = compare(seeds, args.trials, args.epochs, args.workers, args.contenders, lock,
                     args.keep, progress=lambda line: print(line, flush=True))
    if args.hydra:
        result["mlp_hydra"] = run_legacy(args.trials, args.epochs, seeds[0], lock)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "search_efficiency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(format_markdown(result))
    if args.hydra:
        print("\nMLP, with Hydra's Optuna sweeper\n" + format_table(result["mlp_hydra"]))
    print(f"\n({result['sweeps']} sweeps: {result['wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
