"""python -m bench.search_efficiency [--trials 12] [--epochs 9] [--seed 0] [--no-hydra]

Search efficiency on the built-in digits MLP (``+experiment=digits``: its search space, 2-worker
trials), same budget of trials for every contender:

1. **random, full budget** (the baseline): ``search=random scheduler=none``, every trial trains
   all ``--epochs``. Its best ``val_acc`` is the target.
2. **sweeps (TPE + ASHA)**: the default ``search=tpe scheduler=asha``.
3. **Hydra's Optuna sweeper** (TPE, no pruning, basic launcher: one process per trial, no Ray),
   from its own virtual environment (hydra-optuna-sweeper needs optuna<3), created on first use
   under ``bench/.venv-hydra-optuna``. It trains the same network on the same data with the same
   global batch, epoch for epoch (``bench/hydra_optuna/app.py``).

For each: epochs trained and wall seconds until a reported ``val_acc`` first reaches the target
(reports in time order; the sweeps runs read them off ``state/scheduler.jsonl``), the totals,
and both as ratios to the whole random search's epochs and seconds (the budget it spent to
find the target; the row of random shows when its own best came). Writes
``bench/results/search_efficiency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
HYDRA_VENV = ROOT / "bench" / ".venv-hydra-optuna"
# Pinned: the versions the baseline was measured with (hydra-optuna-sweeper needs optuna<3).
HYDRA_REQUIREMENTS = ["optuna==2.10.1", "hydra-optuna-sweeper==1.3.0"]
HYDRA_VENV_LAYOUT = 2  # 2: own venv + a .pth to this environment (1: --system-site-packages)

Report = tuple[float, str, int, float]  # (seconds since start, trial, epoch, val_acc)


def run_sweeps(search: str, scheduler: str, trials: int, epochs: int, seed: int,
               storage: str) -> list[Report]:
    """One sweep of the digits experiment; its reports, in time order."""
    from sweeps import compose, run_sweep
    from sweeps.search.schedulers import decision_log

    sweep_dir = Path(storage) / f"{search}-{scheduler}"
    cfg = compose("digits", [f"search={search}", f"scheduler={scheduler}",
                             f"search.num_samples={trials}", f"scheduler.max_t={epochs}",
                             f"sweep.seed={seed}", f"sweep.dir={sweep_dir}",
                             f"tracking.uri=sqlite:///{storage}/mlflow.db"])
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


def _parent_paths() -> list[str]:
    """This interpreter's site-packages (purelib, then platlib when it differs)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def _venv_marker() -> str:
    """What ``installed.txt`` must say for the baseline venv to be reused: the layout, the
    requirements and the environment it borrows from. An old-style venv (made with
    ``--system-site-packages``, whose ``installed.txt`` held the requirements only), a
    half-made one, or one made for another environment, is made again."""
    return "\n".join([f"layout: {HYDRA_VENV_LAYOUT}", *HYDRA_REQUIREMENTS,
                      *(f"borrows: {p}" for p in _parent_paths())]) + "\n"


def hydra_python() -> Path:
    """The baseline's interpreter: a venv holding optuna<3 and hydra-optuna-sweeper, that
    borrows torch and scikit-learn from this environment; created once, reused.

    Not ``venv --system-site-packages``: inside a venv that exposes the base interpreter's
    packages, not this venv's (``No module named 'torch'``). Instead a ``.pth`` file in the
    baseline's site-packages lists this environment's site-packages; ``site`` appends it to
    ``sys.path`` after the baseline's own, so its pinned packages come first. It is written
    before ``pip install``, so pip takes what this environment already has (numpy, scipy,
    hydra-core, SQLAlchemy) as installed and adds only what differs (optuna 2.x, the sweeper,
    cliff, cmaes): one numpy for torch, scikit-learn and optuna. Only the listed directories
    are added (their own ``.pth`` files are not run): run the app with ``PYTHONPATH`` set to
    the checkout, as ``run_hydra`` does.
    """
    python = HYDRA_VENV / "bin" / "python"
    ready = HYDRA_VENV / "installed.txt"  # written last: a half-made venv is made again
    marker = _venv_marker()
    if ready.is_file() and ready.read_text() == marker and python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(HYDRA_VENV)], check=True)
    site = subprocess.run([str(python), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "_bench_parent_env.pth").write_text("\n".join(_parent_paths()) + "\n")
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", *HYDRA_REQUIREMENTS],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"could not install {HYDRA_REQUIREMENTS} into {HYDRA_VENV} "
                           f"(needs PyPI):\n{pip.stderr[-2000:]}")
    check = subprocess.run([str(python), "-c", _IMPORT_CHECK], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"the baseline venv {HYDRA_VENV} cannot import what it needs:\n"
                           f"{check.stderr[-2000:]}")
    ready.write_text(marker)
    return python


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


def measure(trials: int, epochs: int, seed: int, hydra: bool = True) -> dict[str, Any]:
    """All contenders on one problem (sweeps ones in the connected or a new Ray instance)."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as storage:
            random_reports = run_sweeps("random", "none", trials, epochs, seed, storage)
            tpe_reports = run_sweeps("tpe", "asha", trials, epochs, seed, storage)
            hydra_reports = run_hydra(trials, epochs, seed, storage) if hydra else None
    finally:
        if started:
            ray.shutdown()
    target = max(r[3] for r in random_reports)
    rows = {"random (full budget)": reach(random_reports, target),
            "sweeps TPE+ASHA": reach(tpe_reports, target)}
    if hydra_reports is not None:
        rows["Hydra Optuna sweeper"] = reach(hydra_reports, target)
    base = rows["random (full budget)"]
    for row in rows.values():
        # Against the whole random search (its full budget: what it took to find the target).
        row["epochs_ratio"] = (row["epochs_to_target"] / base["epochs_total"]
                               if row["epochs_to_target"] else None)
        row["seconds_ratio"] = (row["seconds_to_target"] / base["seconds_total"]
                                if row["seconds_to_target"] else None)
    return {"trials": trials, "epochs": epochs, "seed": seed, "target_val_acc": target,
            "rows": rows}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-hydra", action="store_true", help="leave the Hydra baseline out")
    args = parser.parse_args()
    result = measure(args.trials, args.epochs, args.seed, hydra=not args.no_hydra)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "search_efficiency.json").write_text(json.dumps(result, indent=2) + "\n")
    print(format_table(result))


if __name__ == "__main__":
    main()
