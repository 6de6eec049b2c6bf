"""`sweeps predict`: reached before Hydra, --help without Ray or torch, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps.inference.cli import _row, parser


def _run(*args: str, cwd: Path, importtime: bool = False) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "sweeps", "predict", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RAY_ADDRESS": ""})


def test_help_is_the_predict_commands_and_imports_neither_ray_nor_torch(tmp_path: Path) -> None:
    proc = _run("--help", cwd=tmp_path, importtime=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage: sweeps predict [-h] --input PATH")
    assert "--concurrency" in proc.stdout and "--output" in proc.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "sweeps.inference.cli" in imported
    assert not {m for m in imported if m.split(".")[0] in ("ray", "torch", "transformers")}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nowhere", "--input", "x.parquet"], "sweeps: error: predict: nowhere is not a "
         "directory; pass the directory a sweep ran in"),
        (["ckpt", "--input", "missing.csv"], "sweeps: error: predict: input missing.csv does "
         "not exist"),
        (["ckpt", "--input", "notes.txt"], "sweeps: error: predict: input notes.txt is of an "
         "unknown file type ('.txt')"),
        (["ckpt", "--input", "notes.csv", "--output", "taken"], "sweeps: error: predict: output "
         "taken already exists and is not an empty directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    from sweeps.loop.checkpoint import save_checkpoint

    (tmp_path / "ckpt").mkdir()
    save_checkpoint(tmp_path / "ckpt", {"model_state": {}, "model_factory": "m:f",
                                        "model_kwargs": {}, "epoch": 1})
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "notes.csv").write_text("x\n1\n")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "a").write_text("x")
    proc = _run(*args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stdout == "" and proc.stderr.startswith(message), proc.stderr
    assert proc.stderr.count("\n") == 1  # one line, no traceback


def test_a_missing_argument_is_argparses_usage_error(tmp_path: Path) -> None:
    proc = _run("outputs/digits", cwd=tmp_path)
    assert proc.returncode == 2 and "the following arguments are required: --input" in proc.stderr


def test_parser_defaults_and_a_row_line() -> None:
    args = parser().parse_args(["src", "-i", "a.csv", "b.csv", "--gpu"])
    assert (args.input, args.use_gpu, args.batch_size, args.num_cpus) == (
        ["a.csv", "b.csv"], True, 256, None)
    assert parser().parse_args(["src", "-i", "a"]).use_gpu is None
    assert _row({"prediction": 1, "label": "pos", "score": 0.91234, "text": "x" * 60}) == (
        "prediction=1 label=pos score=0.912 text='" + "x" * 50 + "'...")
