"""python -m bench.checkpoint_cost SIZE_MB EPOCHS ROUNDS   (measured: 1024 3 3)

What a checkpoint of a model people train costs a trial: one worker saves a state dict of
SIZE_MB (float32) with ``torch.save`` every epoch and reports it with
``ray.train.report(..., checkpoint=Checkpoint.from_directory(tmp))``, as Ray Train's guide
writes it, for EPOCHS epochs, kept as the 2 best (``checkpoint.keep=2``, Train's
``num_to_keep``), on local storage. Three sides in one private Ray instance of 2 CPUs, their
order rotated each round: a plain ``TorchTrainer`` run; a one-trial sweep on the default
backend (inline); the same sweep with ``trial.executor=train``. Writes
``bench/results/checkpoint_cost.json``: every run (its wall, the loop's time in ``torch.save``
and in ``report``), the medians, and each side's ratio to the plain run's.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.overhead import RESULTS

SIDES = ("plain", "inline", "train")
KEYS = ("wall_s", "save_s", "report_s")
CONF = Path(__file__).resolve().parent.parent / "tests" / "conformance" / "conf"


def train_func(config: dict) -> None:
    """The loop: a state dict of ``size_mb``, saved and reported every epoch; what it spent
    appended to ``config["out"]`` (rank 0)."""
    import ray.train
    import torch

    state = {"weight": torch.ones(int(config["size_mb"] * (1 << 20) // 4))}
    spent = {"save_s": 0.0, "report_s": 0.0}
    for epoch in range(1, config["epochs"] + 1):
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            torch.save(state, os.path.join(tmp, "model.pt"))
            saved = time.perf_counter()
            ray.train.report({"loss": 1.0 / epoch, "epoch": epoch},
                             checkpoint=ray.train.Checkpoint.from_directory(tmp))
        spent["save_s"] += saved - start
        spent["report_s"] += time.perf_counter() - saved
    if ray.train.get_context().get_world_rank() == 0:
        Path(config["out"]).write_text(json.dumps(spent))


def _run(side: str, size_mb: float, epochs: int, tmp: Path) -> dict[str, float]:
    config = {"size_mb": size_mb, "epochs": epochs, "out": str(tmp / "spent.json")}
    start = time.perf_counter()
    if side == "plain":
        from ray.train import CheckpointConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchTrainer

        TorchTrainer(train_func, train_loop_config=config,
                     scaling_config=ScalingConfig(num_workers=1),
                     run_config=RunConfig(name="plain", storage_path=str(tmp / "storage"),
                                          checkpoint_config=CheckpointConfig(
                                              num_to_keep=2, checkpoint_score_attribute="loss",
                                              checkpoint_score_order="min"))).fit()
    else:
        from sweeps import compose, run_sweep

        run_sweep(compose("conformance", [
            "experiment.trainable=bench.checkpoint_cost:train_func", "scaling.num_workers=1",
            f"sweep.dir={tmp / 'sweep'}", f"trial.executor={'auto' if side == 'inline' else side}",
            "tracking.enabled=false", "checkpoint.keep=2",
            *[f"+experiment.params.{k}={json.dumps(v)}" for k, v in config.items()]],
            config_dir=CONF))
    wall = time.perf_counter() - start
    return {"wall_s": wall, **json.loads((tmp / "spent.json").read_text())}


def measure(size_mb: float, epochs: int, rounds: int) -> dict[str, Any]:
    import ray

    runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for i in range(rounds):
            for side in SIDES[i % 3:] + SIDES[:i % 3]:
                with tempfile.TemporaryDirectory() as tmp:
                    runs[side].append(_run(side, size_mb, epochs, Path(tmp)))
    finally:
        ray.shutdown()
    med = {side: {k: statistics.median(r[k] for r in rs) for k in KEYS}
           for side, rs in runs.items()}
    return {"command": f"python -m bench.checkpoint_cost {size_mb:g} {epochs} {rounds}",
            "size_mb": size_mb, "epochs": epochs, "rounds": rounds, "runs": runs,
            "median": med, "ratio_to_plain": {
                side: {k: med[side][k] / med["plain"][k] for k in KEYS} for side in SIDES[1:]}}


def main() -> None:
    size_mb, epochs, rounds = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    result = measure(size_mb, epochs, rounds)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "checkpoint_cost.json").write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()
