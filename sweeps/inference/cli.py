"""sweeps predict SOURCE --input PATH [--output DIR] [--column C] [--batch-size N] ...

    sweeps predict outputs/digits --input digits.parquet --output preds/
    python -m sweeps predict models:/hf_text/1 --input reviews.csv --output preds/ --concurrency 2

Runs ``sweeps.predict`` and prints one line (rows, where they were written, wall time) and the
first predictions. A bad source, input, column or output is one line ``sweeps: error: ...`` and
exit code 2, with nothing written. ``--help`` imports neither Ray nor torch.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from typing import Any

from sweeps.errors import SweepError

__all__ = ["main", "parser"]

SHOWN = 5


def parser() -> argparse.ArgumentParser:
    """The ``sweeps predict`` command line.

    Example:
        >>> parser().parse_args(["outputs/digits", "--input", "x.parquet"]).concurrency
        1
    """
    p = argparse.ArgumentParser(
        prog="sweeps predict",
        description="Batch inference with a sweep's best model (or any checkpoint or MLflow "
                    "model) over files, on Ray Data. Adds the columns prediction (class index), "
                    "score and, when the model names its classes, label.")
    p.add_argument("source", help="a sweep directory (its best checkpoint), a checkpoint "
                   "directory, or models:/NAME/VERSION / runs:/RUN_ID/model")
    p.add_argument("--input", "-i", required=True, nargs="+", metavar="PATH",
                   help="parquet, csv, json/jsonl or npy files: paths, a directory or a glob")
    p.add_argument("--output", "-o", metavar="DIR",
                   help="write the predictions here as parquet (a new or empty directory)")
    p.add_argument("--column", "-c", help="the input column (default: text for a tokenizer, "
                   "image for an image processor, else the only column, or x / features)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per model call (256)")
    p.add_argument("--concurrency", type=int, default=1,
                   help="model actors, each with its own copy of the model (1)")
    p.add_argument("--num-cpus", type=float, help="CPUs per actor (default: 1, less where "
                   "the actors would leave no CPU to read the input)")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--gpu", dest="use_gpu", action="store_true", default=None,
                     help="one GPU per actor (default: when the cluster has GPUs)")
    gpu.add_argument("--cpu", dest="use_gpu", action="store_false", help="no GPU")
    p.add_argument("--model-loader", metavar="MODULE:FUNCTION",
                   help="rebuilds a checkpoint in the training loop's own format")
    p.add_argument("--tracking-uri", help="the MLflow store of a models:/ or runs:/ source "
                   "(default: MLflow's, sqlite:///mlflow.db here)")
    p.add_argument("--address", help="a Ray cluster to run on (ray://host:10001, auto); "
                   "default: a local Ray started for this command")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``sweeps predict``; the exit code (0, or 2 with one ``sweeps: error:`` line)."""
    args = parser().parse_args(argv)
    begin = time.perf_counter()
    try:
        _quiet_ray_data()
        from sweeps.inference.batch import predict

        data: Any = args.input[0] if len(args.input) == 1 else args.input
        result = predict(args.source, data, output=args.output, column=args.column,
                         batch_size=args.batch_size, concurrency=args.concurrency,
                         use_gpu=args.use_gpu, num_cpus=args.num_cpus,
                         model_loader=args.model_loader, tracking_uri=args.tracking_uri,
                         ray_address=args.address)
        rows = result.count()
        first = result.take(SHOWN)
    except SweepError as exc:
        print(f"sweeps: error: {exc}", file=sys.stderr)
        return 2
    finally:
        wall = time.perf_counter() - begin
        ray = sys.modules.get("ray")  # the command's Ray goes down with it (not a cluster's)
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    where = f"wrote {args.output} (parquet)" if args.output else "not written (no --output)"
    print(f"predicted {rows} rows with {args.source}; {where}; {wall:.1f} s "
          f"({rows / wall:.3g} rows/s)")
    for row in first:
        print("  " + _row(row))
    return 0


def _row(row: dict[str, Any]) -> str:
    """One prediction as a line: ``prediction=7 label=seven score=0.982 text='...'``."""
    shown = [f"prediction={row['prediction']}"]
    if "label" in row:
        shown.append(f"label={row['label']}")
    if "score" in row:
        shown.append(f"score={float(row['score']):.3f}")
    text = row.get("text")
    if isinstance(text, str):
        shown.append(f"text={text[:50]!r}" + ("..." if len(text) > 50 else ""))
    return " ".join(shown)


def _quiet_ray_data() -> None:
    """No progress bars, Ray Data's per-dataset lines, or its note that a small input has
    fewer blocks than ``--concurrency`` (the extra actors idle): the command prints its own
    summary and its errors."""
    logging.getLogger("ray").setLevel(logging.WARNING)
    # ERROR: Ray Data's one warning here would be that progress bars are off; its errors
    # still end the command (as one line, sweeps.predict's SweepError).
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    # Read when ray.data is first imported (DataContext's default), so a bad source fails
    # before paying for that import.
    os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", message="The minimum number of concurrent actors")
