"""python -m bench.mlflow_store [--repeats 3] [--out bench/results/mlflow_store.json]

What a new SQLite MLflow store costs a sweep, and what the template of one saves
(``sweeps.tracking.sqlite_store``): MLflow makes a store by running all its migrations in the
file, which takes seconds of CPU in the driver, beside the first trial's start. Two sides,
alternating, ``--repeats`` times, each in a fresh process:

- ``migrate``: the cache holds no template (a fresh ``XDG_CACHE_HOME``): MLflow migrates;
- ``template``: the cache holds this MLflow version's template: the store is a copy of it.

Per side: ``open_client`` on a new store (the store alone), and the wall of a small sweep
(``+experiment=digits``, 2 trials x 2 epochs, 1 worker) tracked in a new store. Medians and the
per-pair ratios; JSON in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ("+experiment=digits", "search.num_samples=2", "scheduler.max_t=2",
         "scaling.num_workers=1", "sweep.seed=0")
OPEN = ("import time, sys; from sweeps.tracking.sqlite_store import open_client; "
        "t = time.perf_counter(); open_client(f'sqlite:///{sys.argv[1]}'); "
        "print(time.perf_counter() - t)")


def _run(args: list[str], cache: Path, cwd: Path) -> tuple[float, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, check=True)
    return time.perf_counter() - began, out.stdout


def _side(warm: Path | None, work: Path) -> dict[str, float]:
    """One measurement: with ``warm`` (a cache holding the template), or a fresh cache each."""
    here = Path(tempfile.mkdtemp(dir=work))
    _, said = _run([sys.executable, "-c", OPEN, str(here / "alone.db")],
                   warm or Path(tempfile.mkdtemp(dir=work)), here)
    wall, _ = _run([sys.executable, "-m", "sweeps", *SWEEP],
                   warm or Path(tempfile.mkdtemp(dir=work)), here)
    return {"store_s": float(said.strip().splitlines()[-1]), "sweep_wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path,
                        default=ROOT / "bench" / "results" / "mlflow_store.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mlflow-store-"))
    warm = work / "warm"
    _run([sys.executable, "-c", OPEN, str(work / "seed.db")], warm, work)  # keeps a template
    runs: dict[str, list[dict[str, float]]] = {"migrate": [], "template": []}
    for i in range(args.repeats):
        for side in ("migrate", "template") if i % 2 == 0 else ("template", "migrate"):
            runs[side].append(_side(warm if side == "template" else None, work))
            print(side, runs[side][-1], flush=True)
    median = {side: {k: statistics.median(r[k] for r in rows) for k in rows[0]}
              for side, rows in runs.items()}
    ratio = {k: statistics.median(t[k] / m[k] for t, m in zip(runs["template"], runs["migrate"],
                                                                strict=True))
             for k in median["migrate"]}
    record = {"command": " ".join(["python -m bench.mlflow_store", *sys.argv[1:]]),
              "sweep": list(SWEEP), "repeats": args.repeats, "cores": os.cpu_count(),
              "runs": runs, "median": median, "ratio_template_over_migrate": ratio}
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({"median": median, "ratio": ratio}, indent=2))


if __name__ == "__main__":
    main()
