"""python -m bench.mf [--seeds 0-29] [--tasks mfh3_good ...] [--budget 30] [--jobs 2]
[--out bench/results/mf.json]

Multi-fidelity Hartmann: sweeps' default search and scheduler against random search under the
same ASHA, Optuna's TPE with its Hyperband pruner, and DEHB, on mf-prior-bench's eight
Hartmann tasks (``bench.mf_loop``: ``mfh3_*`` and ``mfh6_*``, from ``good`` to ``terrible``
low fidelities), each contender with the same budget and seeds (``bench.mf_contenders`` says
how each one runs). A run is one task, contender and seed (``sweep.seed``, the sampler's seed,
and the benchmark's noise seed); one evaluation at a time; ``--jobs`` runs at once.

**Fidelity and budget.** An epoch is one fidelity step of the task, 1 to 100 (``max_t`` 100).
The budget is ``--budget`` full-fidelity evaluations' worth, 100 epochs each: 30 by default,
3,000 epochs. Every contender counts what it trains: an evaluation at fidelity ``f`` costs
``f`` epochs when it starts from scratch (DEHB), and a trial that goes on from its last report
(ASHA's promotions, Optuna's pruners) costs one epoch per epoch it trains, so a trial run to
epoch ``e`` costs ``e`` in all, not the sum of its rungs. Why 30: carps (automl/CARP-S) gives
its ``mfh3`` tasks 90 and its ``mfh6`` tasks 118 (``ceil(20 + 40 * sqrt(d))``,
``carps/configs/task/generate_tasks.ipynb``) and counts a multi-fidelity evaluation as
``fidelity / max_fidelity`` of one (``carps/optimizers/optimizer.py``, ``Optimizer._run``):
each evaluation pays its whole fidelity, with no credit for a continued trial. BOHB's paper
(Falkner et al., ICML 2018, section 1, "Strong Anytime Performance"), whose desiderata DEHB's
(Awad et al., IJCAI 2021, section 1) repeats, asks for good configurations within small budgets
because most practitioners can afford to fully evaluate only a handful of models; and sweeps'
built-in experiments are 8 trials of at most 9 epochs, 8 full evaluations' worth. 30 sits
between those and carps' budgets, a third of ``mfh3``'s; the curve (each tenth of the budget,
3 to 30 evaluations' worth) shows the smaller budgets too; ``--budget 90`` is carps' for ``mfh3``.

**Regret.** A contender's incumbent, at any point, is the best value it has seen at any
fidelity: what DEHB's ``get_incumbents`` returns (so what carps logs as DEHB's incumbent), and
what a sweep's best checkpoint holds. Its normalized regret is ``bench.mf_loop.regret``:
``(value - optimum) / (0 - optimum)`` in [0, 1], the optimum mf-prior-bench's at full
fidelity, 0 the Hartmann functions' upper bound. A value below full fidelity is never below the
configuration's true value on these tasks, so a low-fidelity incumbent is never flattered.
Per task and contender: the median and quartiles (q25, q75) over seeds of the regret once the
budget is spent, and ``curve``: the median regret after each tenth of the budget
(``checkpoints``, in epochs; before any value a run's regret is 1).

mf-prior-bench 1.10.0 and dehb 0.1.2 (pyproject's ``bench`` extra) require numpy<2, which this
project's environment is past (pandas 3.1 needs numpy 2): where they are not importable, this
command runs itself in ``bench/.venv-mf``, made on first use from that extra (``bench.venvs``:
its own numpy, the rest, sweeps' Optuna included, borrowed from this environment). Writes
``--out`` (``bench/results/mf.json``) and prints the markdown table of docs/search.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench.mf_contenders import CONTENDERS as RUNS
from bench.mf_contenders import Evaluations
from bench.mf_loop import TASKS, WORST, regret
from bench.venvs import venv_python

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
VENV = ROOT / "bench" / ".venv-mf"
CONTENDERS = tuple(RUNS)  # sweeps-default, random-asha, optuna-tpe-hyperband, dehb
MAX_FIDELITY = 100  # every task's highest fidelity: an evaluation's worth of epochs
CHECKPOINTS = 10  # the curve's points: each tenth of the budget
IMPORT_CHECK = "import mfpbench, dehb, optuna, numpy; assert numpy.__version__ < '2', numpy"
IN_VENV = "BENCH_MF_IN_VENV"  # set when this command runs itself in its venv


def seed_range(text: str) -> list[int]:
    """``--seeds``: ``A-B`` (both included) or one seed.

    Example:
        >>> seed_range("0-3"), seed_range("7")
        ([0, 1, 2, 3], [7])
    """
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def requirements() -> list[str]:
    """pyproject's ``bench`` extra: what the venv installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return list(project["optional-dependencies"]["bench"])


def _one(job: tuple[str, str, int, int]) -> tuple[str, str, int, Evaluations]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    task, contender, seed, budget = job
    return task, contender, seed, RUNS[contender](task, seed, budget)


def incumbent_regret(evaluations: Evaluations, spent: int, optimum: float) -> float:
    """The regret of the best value seen once ``spent`` epochs were (1 before any value).

    Example:
        >>> incumbent_regret([(1, -1.0), (3, -3.0), (4, -2.0)], 2, -4.0)
        0.75
        >>> incumbent_regret([(1, -1.0), (3, -3.0), (4, -2.0)], 4, -4.0)
        0.25
    """
    seen = [value for at, value in evaluations if at <= spent]
    return regret(min(seen), optimum) if seen else 1.0


def summarize(runs: dict[str, dict[str, dict[int, Evaluations]]], optima: dict[str, float],
              budget_epochs: int) -> dict[str, Any]:
    """Per task and contender: median and quartiles of the final regret, the curve, the
    regret per seed, and the most epochs any seed spent."""
    checkpoints = [round(budget_epochs * k / CHECKPOINTS) for k in range(1, CHECKPOINTS + 1)]
    tasks: dict[str, Any] = {}
    for task, by_contender in runs.items():
        rows = {}
        for contender, by_seed in by_contender.items():
            final = [incumbent_regret(ev, budget_epochs, optima[task]) for ev in by_seed.values()]
            q25, median, q75 = statistics.quantiles(final, n=4, method="inclusive")
            rows[contender] = {
                "median_regret": median, "q25": q25, "q75": q75,
                "curve": [statistics.median(incumbent_regret(ev, c, optima[task])
                                            for ev in by_seed.values()) for c in checkpoints],
                "regret_per_seed": dict(zip(map(str, by_seed), final, strict=True)),
                "spent_max": max((ev[-1][0] for ev in by_seed.values() if ev), default=0),
                "evaluations_median": statistics.median(len(ev) for ev in by_seed.values())}
        tasks[task] = {"optimum": optima[task], "worst": WORST, "contenders": rows}
    return {"checkpoints": checkpoints, "tasks": tasks}


def format_markdown(result: dict[str, Any]) -> str:
    """The table of docs/search.md: median regret (q25-q75) per task and contender, the
    lowest median per task in bold."""
    names = list(next(iter(result["tasks"].values()))["contenders"])
    lines = ["| task | " + " | ".join(f"`{n}`" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for task, row in result["tasks"].items():
        rows = row["contenders"]
        best = min(r["median_regret"] for r in rows.values())
        cells = []
        for name in names:
            r = rows[name]
            median = f"{r['median_regret']:.3f}"
            cells.append(f"{f'**{median}**' if r['median_regret'] == best else median} "
                         f"({r['q25']:.3f}-{r['q75']:.3f})")
        lines.append(f"| `{task}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gaps(result: dict[str, Any], ours: str = "sweeps-default") -> dict[str, dict[str, Any]]:
    """Per task: the best peer of ``ours`` and how far ``ours``' median regret is above its
    (negative: ``ours`` is ahead)."""
    out = {}
    for task, row in result["tasks"].items():
        peers = {n: r["median_regret"] for n, r in row["contenders"].items() if n != ours}
        if not peers or ours not in row["contenders"]:
            continue
        best = min(peers, key=peers.__getitem__)
        out[task] = {"best_peer": best,
                     "behind_by": row["contenders"][ours]["median_regret"] - peers[best]}
    return out


def run(seeds: list[int], tasks: list[str], budget: int, jobs: int,
        contenders: tuple[str, ...] = CONTENDERS) -> dict[str, Any]:
    """Every task, contender and seed, ``jobs`` at once; the summary."""
    from bench.mf_loop import optimum

    budget_epochs = budget * MAX_FIDELITY
    work = [(t, c, s, budget_epochs) for t in tasks for s in seeds for c in contenders]
    runs: dict[str, dict[str, dict[int, Evaluations]]] = {
        t: {c: {} for c in contenders} for t in tasks}
    start = time.time()
    with ProcessPoolExecutor(jobs) as pool:
        for task, contender, seed, evaluations in pool.map(_one, work):
            runs[task][contender][seed] = evaluations
    summary = summarize(runs, {t: optimum(t) for t in tasks}, budget_epochs)
    return {"seeds": seeds, "budget": budget, "budget_epochs": budget_epochs,
            "max_fidelity": MAX_FIDELITY, **summary, "wall_s": round(time.time() - start, 1),
            "jobs": jobs, "versions": _versions()}


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    # scipy and ConfigSpace too: a table made with the four above the same did not reproduce
    # TPE's and DEHB's values on another environment (random search's did)
    return {p: version(p) for p in ("mf-prior-bench", "dehb", "optuna", "numpy", "scipy",
                                    "ConfigSpace")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seed_range, default=seed_range("0-29"),
                        help="A-B, both included (default 0-29)")
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--budget", type=int, default=30,
                        help="full-fidelity evaluations' worth (100 epochs each)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS),
                        help="a subset (the table and the gaps need sweeps-default and a peer)")
    parser.add_argument("--out", default=str(RESULTS / "mf.json"))
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(args_list)
    if len(args.contenders) < len(CONTENDERS) and args.out == parser.get_default("out"):
        parser.error("--contenders with a subset needs --out (bench/results/mf.json is the table)")
    if not all(importlib.util.find_spec(m) for m in ("mfpbench", "dehb")):
        if os.environ.get(IN_VENV):
            raise RuntimeError(f"{VENV} cannot import mfpbench and dehb; delete it to remake it")
        python = venv_python(VENV, requirements(), IMPORT_CHECK)
        env = {**os.environ, "PYTHONPATH": str(ROOT), IN_VENV: "1"}
        return subprocess.run([str(python), "-m", "bench.mf", *args_list], cwd=ROOT,
                              env=env).returncode
    result = {"command": " ".join(["python -m bench.mf", *args_list]),
              **run(args.seeds, args.tasks, args.budget, args.jobs, tuple(args.contenders))}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(format_markdown(result))
    for task, gap in gaps(result).items():
        print(f"{task}: sweeps-default {gap['behind_by']:+.3f} against {gap['best_peer']}")
    print(f"{len(args.seeds)} seeds, budget {args.budget} x {MAX_FIDELITY} epochs, "
          f"{result['wall_s']:.0f} s with {args.jobs} jobs; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
