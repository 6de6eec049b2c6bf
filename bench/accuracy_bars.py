"""python -m bench.accuracy_bars [--seeds 0 1 2] [--only hf_vit hf_text ...]

What the tests' small sweeps actually reach, per seed: the measurement behind each accuracy bar
the tests assert (a bar just above chance passes a loop that barely learns). Each row runs the
exact configuration its test runs, built from the test module's own constants, with
``sweep.seed`` (which the loops also take as their ``seed`` param) varied:

- ``hf_vit``: ``tests/integration/test_hf_vit.py`` (2 trials, 2 workers, 3 epochs), the best
  trial's ``val_accuracy``;
- ``hf_text``: ``tests/integration/test_hf_text.py`` (2 trials, 2 workers, 2 epochs), the best
  ``eval_accuracy``;
- ``digits_data``: ``tests/integration/test_digits_data.py`` (2 trials at once on Ray Data
  shards, the validation split from parquet), the best ``val_acc``;
- ``digits``: the small sweep ``tests/integration/test_predict.py`` predicts from (2 trials, 2
  workers, 2 epochs), the best ``val_acc`` (what the predictions score);
- ``hf_vit_local``: ``tests/unit/test_hf_vit.py``'s one epoch in Ray Train's local mode.

Each test states its bar as ``ACCURACY_BAR``, set below the lowest value measured here with the
margin its comment gives; this reads it back, so the JSON shows how far below the lowest seed
each bar stands. Sweeps run one after another, each starting and stopping its own Ray. Writes
``bench/results/accuracy_bars.json`` (per row: every seed's value, the lowest, the bar) and
prints a table. About 15 minutes on 2 CPUs for 3 seeds.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _sweep(experiment: str, overrides: list[str], seed: int, root: Path) -> float:
    from sweeps import compose, run_sweep
    from tests.integration.conftest import SMALL, merged

    base = [*SMALL, f"sweep.dir={root / 'sweep'}", f"tracking.uri=sqlite:///{root / 'm.db'}"]
    cfg = compose(experiment, merged(base, (*overrides, f"sweep.seed={seed}")))
    result = run_sweep(cfg)
    assert result.best is not None and not result.failed, result.failed
    return float(result.best["value"])


def hf_vit(seed: int, root: Path) -> float:
    from tests.integration.test_hf_vit import TINY

    return _sweep("hf_vit", list(TINY), seed, root)


def hf_text(seed: int, root: Path) -> float:
    from tests.integration.test_hf_text import OFFLINE, TINY

    os.environ.update(OFFLINE)
    return _sweep("hf_text", list(TINY), seed, root)


def digits(seed: int, root: Path) -> float:
    from tests.integration.test_predict import SWEEP

    return _sweep("digits", list(SWEEP), seed, root)


def digits_data(seed: int, root: Path) -> float:
    from tests.integration.test_digits_data import SIZES, _val_parquet

    _val_parquet(root / "val")
    return _sweep("digits_data", [
        *SIZES, "experiment.datasets.train.function=trainables.digits_data:digits",
        f"experiment.datasets.val={root / 'val'}"], seed, root)


def hf_vit_local(seed: int, root: Path) -> float:
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from trainables.hf_vit import train_func

    trainer = TorchTrainer(train_func,
                           train_loop_config={"epochs": 1, "batch_size": 64, "seed": seed},
                           scaling_config=ScalingConfig(num_workers=0),
                           run_config=RunConfig(name="local", storage_path=str(root)))
    return float(trainer.fit().metrics["val_accuracy"])


# name -> (measure, chance, the test module whose ACCURACY_BAR it measures)
ROWS: dict[str, tuple[Callable[[int, Path], float], float, str]] = {
    "hf_vit": (hf_vit, 0.1, "tests.integration.test_hf_vit"),
    "hf_text": (hf_text, 0.25, "tests.integration.test_hf_text"),
    "digits_data": (digits_data, 0.1, "tests.integration.test_digits_data"),
    "digits": (digits, 0.1, "tests.integration.test_predict"),
    "hf_vit_local": (hf_vit_local, 0.1, "tests.unit.test_hf_vit"),
}


def measure(names: list[str], seeds: list[int]) -> dict[str, dict]:
    """Every row of ``names`` at every seed; each value with the row's chance and bar."""
    os.environ["PYTHONPATH"] = os.pathsep.join(  # Ray workers import tests/ and trainables/
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    out = {}
    for name in names:
        run, chance, test = ROWS[name]
        bar = importlib.import_module(test).ACCURACY_BAR
        values, walls = {}, {}
        for seed in seeds:
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix=f"bars-{name}-") as tmp:
                values[seed] = run(seed, Path(tmp))
            walls[seed] = round(time.perf_counter() - start, 1)
            print(f"{name} seed {seed}: {values[seed]:.4f} ({walls[seed]} s)", flush=True)
        out[name] = {"test": test, "values": values, "lowest": min(values.values()),
                     "chance": chance, "bar": bar,
                     "margin_below_lowest": round(min(values.values()) - bar, 4), "wall_s": walls}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--only", nargs="+", choices=list(ROWS), default=list(ROWS))
    args = parser.parse_args(argv)
    result = measure(args.only, args.seeds)
    path = RESULTS / "accuracy_bars.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    saved.update(result)  # rows not measured this time keep their last measurement
    RESULTS.mkdir(exist_ok=True)
    path.write_text(json.dumps(saved, indent=2) + "\n")
    print("| row | seeds | values | lowest | bar | chance |\n|---|---|---|---|---|---|")
    for name, row in result.items():
        values = " / ".join(f"{v:.3f}" for v in row["values"].values())
        print(f"| {name} | {len(row['values'])} | {values} | {row['lowest']:.3f} | "
              f"{row['bar']} | {row['chance']} |")


if __name__ == "__main__":
    main()
