"""python -m bench.checkpoint_cost [--state-mib 1024] [--epochs 3] [--epoch-s 1] [--repeats 3]
[--sides plain,default,train]

What a checkpoint of a big model costs: one trial whose loop (``train_func``, written as Ray
Train's docs write one) saves a ``--state-mib`` state dict with ``torch.save`` into a temporary
directory and reports it every epoch, run as a plain Ray Train ``TorchTrainer`` (1 worker,
``RunConfig(storage_path=...)``), as a 1-trial sweep with the default backend (inline), and as a
1-trial sweep with ``trial.executor=train``. Each side in its own process and Ray instance, the
sides alternating, ``--repeats`` times. The loop times its own ``torch.save`` and each
``ray.train.report`` call (how long the report held the loop: Train persists the checkpoint
to storage inside it); the side times its whole wall. Medians; JSON in
``bench/results/checkpoint_cost.json``. A sweep's wall also covers what a plain Train run does
not do: MLflow (the best checkpoint's files logged to the trial's run) and the sweep's state.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIDES = ("plain", "default", "train")


def train_func(config: dict[str, Any]) -> None:
    """Ray's docs' loop shape: train, save to a temporary directory, report with it."""
    import ray.train
    import torch
    from ray.train import Checkpoint

    state = {"weights": torch.randn(int(config["state_mib"]) * 2**20 // 4)}
    timings = []
    for epoch in range(int(config["epochs"])):
        time.sleep(float(config["epoch_s"]))  # the training
        with tempfile.TemporaryDirectory() as d:
            began = time.perf_counter()
            torch.save({"model": state, "epoch": epoch}, os.path.join(d, "model.pt"))
            saved = time.perf_counter()
            ray.train.report({"score": float(epoch), "epoch": epoch},
                             checkpoint=Checkpoint.from_directory(d))
            timings.append({"save_s": saved - began, "report_s": time.perf_counter() - saved})
    with open(config["timings"], "w") as f:  # after the last report: the trial's own record
        json.dump(timings, f)


def _plain(spec: dict[str, Any], storage: str) -> None:
    import ray
    from ray import train
    from ray.train.torch import TorchTrainer

    ray.init()
    try:
        TorchTrainer(train_func, train_loop_config=spec,
                     scaling_config=train.ScalingConfig(num_workers=1),
                     run_config=train.RunConfig(name="plain", storage_path=storage)).fit()
    finally:
        ray.shutdown()


def _sweeps(side: str, spec: dict[str, Any], storage: str) -> None:
    from sweeps import compose, run_sweep

    cfg = compose("digits", [
        "experiment.trainable=bench.checkpoint_cost:train_func", "experiment.metric=score",
        "experiment.mode=max", "experiment.search_space={}", "search=random", "scheduler=none",
        "search.num_samples=1", f"scheduler.max_t={spec['epochs']}",
        "scaling.num_workers=1", f"sweep.dir={storage}/sweep",
        f"tracking.uri=sqlite:///{storage}/mlflow.db",
        *(f"+experiment.params.{k}={v}" for k, v in spec.items()),
        *(["trial.executor=train"] if side == "train" else [])])
    run_sweep(cfg)


def run_side(side: str, spec: dict[str, Any]) -> dict[str, Any]:
    """One side in a fresh process: its wall, and the loop's save and report times."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    with tempfile.TemporaryDirectory() as tmp:
        spec = {**spec, "timings": f"{tmp}/timings.json"}
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bench.checkpoint_cost", "--side", side,
                        "--spec", json.dumps(spec), "--storage", tmp], cwd=ROOT, env=env,
                       check=True, timeout=1800)
        wall = time.perf_counter() - began
        timings = json.loads(Path(spec["timings"]).read_text())
    return {"wall_s": wall, "save_s": [t["save_s"] for t in timings],
            "report_s": [t["report_s"] for t in timings]}


def measure(spec: dict[str, Any], sides: list[str], repeats: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(repeats):
        for side in sides:
            runs[side].append(run_side(side, spec))
            print(f"bench.checkpoint_cost: {side}: {json.dumps(runs[side][-1])}", flush=True)
    median = {side: {"wall_s": statistics.median(r["wall_s"] for r in rs),
                     "report_s": statistics.median(x for r in rs for x in r["report_s"]),
                     "save_s": statistics.median(x for r in rs for x in r["save_s"])}
              for side, rs in runs.items()}
    if "plain" in median:
        for side in median:
            median[side]["wall_vs_plain"] = median[side]["wall_s"] / median["plain"]["wall_s"]
            median[side]["report_vs_plain"] = (median[side]["report_s"]
                                               / median["plain"]["report_s"])
    return {"spec": spec, "repeats": repeats, "runs": runs, "median": median}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{'side':<10} {'wall s':>8} {'save s':>8} {'report s':>9} {'wall/plain':>11} "
             f"{'report/plain':>13}"]
    for side, m in result["median"].items():
        lines.append(f"{side:<10} {m['wall_s']:>8.2f} {m['save_s']:>8.2f} {m['report_s']:>9.2f} "
                     f"{m.get('wall_vs_plain', float('nan')):>11.2f} "
                     f"{m.get('report_vs_plain', float('nan')):>13.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state-mib", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--epoch-s", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--out", type=Path,
                        default=ROOT / "bench" / "results" / "checkpoint_cost.json")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--storage", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        spec = json.loads(args.spec)
        _plain(spec, args.storage) if args.side == "plain" else _sweeps(args.side, spec,
                                                                        args.storage)
        return
    spec = {"state_mib": args.state_mib, "epochs": args.epochs, "epoch_s": args.epoch_s}
    result = measure(spec, [s for s in args.sides.split(",") if s], args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(format_table(result))


if __name__ == "__main__":
    main()
