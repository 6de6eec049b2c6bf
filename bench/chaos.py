"""python -m bench.chaos [--seeds 1 2 3 4 5 6] [--trials 20] [--max-t 4] [--keep DIR]

A digits sweep in an empty directory (the default MLflow store, ``mlflow.db`` there, made by the
sweep), its driver and its Ray killed with ``kill -9`` (the OOM killer, a preempted node) at
seeded moments from the first second on, then the same command run to its end. Each seed kills
its starts in turn at one of these moments, the first at ``store`` (the store is made in the
first start), the last at ``end``, the others drawn:

- ``start``: 0.2-3 s after the command (imports, config, before Ray starts);
- ``store``: 0-0.4 s after MLflow's store (or its temporary file) appears: its creation;
- ``trial``: 0-2 s after this start's first judged report: mid-trial;
- ``trial_end``: 0-0.2 s after this start's first trial end (a STOP in the decision log);
- ``end``: 0-1 s after the summary is written: the summary, plots, model logging and
  registration.

A moment that does not come before the sweep ends is recorded as missed. After the last run:

1. it exited 0;
2. every trial is once in ``summary.csv`` (``--trials`` of them);
3. one MLflow run per trial and one parent, none RUNNING;
4. no epoch step logged twice in any trial's ``val_acc`` history;
5. the registered model's newest version comes from the best trial's run (``best.json``);
6. the decision log replays: ASHA's rungs rebuilt from ``state/scheduler.jsonl`` alone take
   every logged decision again.

Writes ``bench/results/chaos.json`` (seeds, each kill's phase and moment, what it left behind,
each invariant) and prints a line per kill. ``tests/integration/test_chaos.py`` runs one short
seed of the same code in the slow layer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
MIDDLE = ["start", "trial", "trial_end", "trial"]
MARK = f"SWEEPS_CHAOS={uuid.uuid4().hex}"  # in the environment of what this run starts


def plan(rng: random.Random, kills: int) -> list[str]:
    """The phase of each kill: ``store`` first, ``end`` last, the rest drawn.

    Example:
        >>> plan(random.Random(1), 4)[0], plan(random.Random(1), 4)[-1]
        ('store', 'end')
    """
    middle = [rng.choice(MIDDLE) for _ in range(max(0, kills - 2))]
    return ["store", *middle, "end"][:kills]


def command(work: Path, trials: int, max_t: int, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "sweeps", "+experiment=digits",
            f"search.num_samples={trials}", f"scheduler.max_t={max_t}",
            "scaling.num_workers=1", f"sweep.dir={work / 'sweep'}", *extra]


def start(work: Path, argv: list[str], run: int) -> tuple[subprocess.Popen, Path]:
    out = work / f"run{run}.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": "",
           MARK.partition("=")[0]: MARK.partition("=")[2]}
    with out.open("w") as f:  # its own process group: the driver and the Ray it starts
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return proc, out


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def trigger(phase: str, work: Path, began: float, rng: random.Random):
    """A function that is true once the moment of ``phase`` has come in this start."""
    log, summary = work / "sweep" / "state" / "scheduler.jsonl", work / "sweep" / "summary.csv"
    seen, began_wall = len(_lines(log)), time.time()
    delay = {"start": rng.uniform(0.2, 3.0), "store": rng.uniform(0.0, 0.4),
             "trial": rng.uniform(0.0, 2.0), "trial_end": rng.uniform(0.0, 0.2),
             "end": rng.uniform(0.0, 1.0)}[phase]
    since: list[float] = []

    def came() -> bool:
        if not since:
            if phase == "start":
                since.append(began)
            elif phase == "store" and (any(work.glob(".mlflow.db.creating-*"))
                                       or (work / "mlflow.db").exists()):
                since.append(time.monotonic())
            elif phase in ("trial", "trial_end"):
                new = _lines(log)[seen:]
                if (new if phase == "trial" else [r for r in new if '"STOP"' in r]):
                    since.append(time.monotonic())
            elif phase == "end" and summary.exists() and summary.stat().st_mtime > began_wall:
                since.append(time.monotonic())
        return bool(since) and time.monotonic() - since[0] >= delay

    return came, delay


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the driver's process group (it and its Ray), then what outlives it: the trial
    processes of the dead raylet (own groups), once orphans; only processes this run started
    (``MARK`` in their environment)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)
    deadline = time.monotonic() + 30
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in _ours():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _ours() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and MARK.encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def run_seed(seed: int, work: Path, trials: int, max_t: int, kills: int,
             phases: list[str] | None = None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """One chaos run in the empty directory ``work``: its kills (at ``phases``, else a
    seeded ``plan``) and invariants; ``extra``: more overrides of the sweep's command."""
    rng = random.Random(seed)
    argv, done, runs = command(work, trials, max_t, extra), [], 0
    for phase in phases or plan(rng, kills):
        runs += 1
        began = time.monotonic()
        proc, _ = start(work, argv, runs)
        came, delay = trigger(phase, work, began, rng)
        while proc.poll() is None and not came():
            time.sleep(0.05)
        if proc.poll() is not None:  # the sweep ended before the moment came
            done.append({"phase": phase, "delay_s": round(delay, 3), "killed": False,
                         "rc": proc.returncode})
            break
        at = time.monotonic() - began
        kill_group(proc)
        done.append({"phase": phase, "delay_s": round(delay, 3), "killed": True,
                     "at_s": round(at, 2),
                     "store": (work / "mlflow.db").exists(),
                     "decisions": len(_lines(work / "sweep" / "state" / "scheduler.jsonl"))})
        print(f"seed {seed}: kill {len(done)} in {phase} at {at:.1f} s", flush=True)
    creations = len(list(work.glob(".mlflow.db.creating-*")))  # left by killed creations
    runs += 1
    proc, out = start(work, argv, runs)
    try:
        rc = proc.wait(1800)
    finally:
        kill_group(proc)  # nothing may outlive it; none should
    return {"seed": seed, "kills": done, "runs": runs, "rc": rc, "creations_killed": creations,
            "invariants": invariants(work, trials, max_t, rc), "last_console": out.read_text()}


def invariants(work: Path, trials: int, max_t: int, rc: int) -> dict[str, Any]:
    """The six checks of the module docstring, each True or what broke it."""
    import pandas as pd
    from mlflow import MlflowClient

    checks: dict[str, Any] = {"exit_0": rc == 0}
    root = work / "sweep"
    summary = pd.read_csv(root / "summary.csv", dtype={"trial_id": str})
    ids = list(summary["trial_id"])
    checks["each_trial_once"] = (len(ids) == trials and len(set(ids)) == trials) or ids
    client = MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("digits")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    children = [r for r in runs if r.data.tags.get("sweeps.role") == "trial"]
    parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    by_trial = sorted(r.data.tags["sweeps.trial_id"] for r in children)
    running = [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    checks["one_run_per_trial"] = ((by_trial == sorted(ids) and len(parents) == 1
                                    and not running)
                                   or {"trial_runs": len(by_trial), "parents": len(parents),
                                       "running": running})
    twice = {}
    for run in children:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_acc")]
        if len(steps) != len(set(steps)):
            twice[run.data.tags["sweeps.trial_id"]] = steps
    checks["no_step_twice"] = not twice or twice
    best = json.loads((root / "best.json").read_text())
    versions = client.search_model_versions("name='digits'")
    newest = max(versions, key=lambda v: int(v.version)) if versions else None
    best_run = next((r.info.run_id for r in children
                     if r.data.tags["sweeps.trial_id"] == best["trial_id"]), None)
    checks["model_from_best_trial"] = (newest is not None and newest.run_id == best_run
                                       and {v.run_id for v in versions} == {best_run}) or {
        "best_trial": best["trial_id"], "model_runs": [v.run_id for v in versions]}
    checks["decision_log_replays"] = replays(root, max_t)
    return checks


def replays(root: Path, max_t: int) -> Any:
    """ASHA's rungs rebuilt from the decision log alone (every record, trial ends included,
    as the scheduler replays it) take each logged decision again."""
    from sweeps.search.asha import AsyncHalving, logged_point, replay_record

    halving, differ = AsyncHalving(1, max_t, 3), []
    for record in map(json.loads, _lines(root / "state" / "scheduler.jsonl")):
        stop = replay_record(halving, record, logged_point(record, {"val_acc": "max"}))
        if stop is not None and "action" in record and stop != (record["action"] == "STOP"):
            differ.append((record["trial"], record["epoch"], record["action"]))
    return not differ or differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--max-t", type=int, default=4)
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS / "chaos.json")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="sweeps-chaos-"))
    results = []
    for seed in args.seeds:
        work = base / f"seed{seed}"
        work.mkdir(parents=True)
        result = run_seed(seed, work, args.trials, args.max_t, args.kills)
        result.pop("last_console")
        held = all(v is True for v in result["invariants"].values())
        print(f"seed {seed}: {sum(k['killed'] for k in result['kills'])} kills, "
              f"invariants {'held' if held else result['invariants']}", flush=True)
        results.append(result)
    kills = [k for r in results for k in r["kills"] if k["killed"]]
    report = {"command": "python -m bench.chaos " + " ".join(sys.argv[1:]),
              "trials": args.trials, "max_t": args.max_t, "kills_survived": len(kills),
              "kills_by_phase": {p: sum(k["phase"] == p for k in kills)
                                 for p in ("start", "store", "trial", "trial_end", "end")},
              "store_creations_killed": sum(r["creations_killed"] for r in results),
              "all_invariants_held": all(v is True for r in results
                                         for v in r["invariants"].values()),
              "seeds": results}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "seeds"}, indent=2))


if __name__ == "__main__":
    main()
