"""predict's input: files checked before Ray starts, and the column the model reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps import SweepError
from sweeps.inference.data import choose_column, input_files


@pytest.fixture
def files(tmp_path: Path) -> Path:
    for name in ("a.parquet", "b.parquet", "c.csv", "notes.txt", "d.JSONL", "e.npy"):
        (tmp_path / name).write_text("x")
    (tmp_path / "parts").mkdir()
    for name in ("part-0.parquet", "part-1.parquet", "_SUCCESS", ".hidden.crc"):
        (tmp_path / "parts" / name).write_text("x")
    return tmp_path


@pytest.mark.parametrize(
    ("spec", "fmt", "names"),
    [
        ("a.parquet", "parquet", ["a.parquet"]),
        ("*.parquet", "parquet", ["a.parquet", "b.parquet"]),
        ("parts", "parquet", ["part-0.parquet", "part-1.parquet"]),  # markers left out
        ("c.csv", "csv", ["c.csv"]),
        ("d.JSONL", "json", ["d.JSONL"]),
        ("e.npy", "numpy", ["e.npy"]),
        (["a.parquet", "parts"], "parquet", ["a.parquet", "part-0.parquet", "part-1.parquet"]),
    ],
)
def test_input_files(files: Path, spec, fmt: str, names: list[str]) -> None:
    spec = [str(files / s) for s in spec] if isinstance(spec, list) else str(files / spec)
    found_fmt, found = input_files(spec)
    assert (found_fmt, [Path(f).name for f in found]) == (fmt, names)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("missing.parquet", r"predict: input .*missing\.parquet does not exist$"),
        ("*.arrow", r"predict: input .*\*\.arrow matches no file$"),
        ("notes.txt", r"predict: input .*notes\.txt is of an unknown file type \('\.txt'\); use "
                      r"\.parquet, \.csv, \.json, \.jsonl, \.npy files, or pass a ray\.data"),
        ("*.*", r"predict: input .* is of an unknown file type"),
        (["a.parquet", "c.csv"], r"predict: the input mixes file types \(csv, parquet\)"),
        ([], r"predict: no input given"),
    ],
)
def test_bad_input_is_one_line(files: Path, spec, message: str) -> None:
    spec = [str(files / s) for s in spec] if isinstance(spec, list) else str(files / spec)
    with pytest.raises(SweepError, match=message) as info:
        input_files(spec)
    assert "\n" not in str(info.value)


def test_an_empty_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(SweepError, match="input directory .*empty holds no file"):
        input_files(tmp_path / "empty")


@pytest.mark.parametrize(
    ("columns", "processor", "given", "chosen"),
    [
        (["id", "text"], "tokenizer", None, "text"),
        (["image", "y"], "image_processor", None, "image"),
        (["data"], None, None, "data"),           # a torch module: the only column
        (["x", "y"], None, None, "x"),
        (["features", "label_true"], None, None, "features"),
        (["body", "id"], "tokenizer", "body", "body"),  # column= wins
        (["x", "pixels"], None, "pixels", "pixels"),
    ],
)
def test_choose_column(columns, processor, given, chosen) -> None:
    assert choose_column(columns, processor, given) == chosen


@pytest.mark.parametrize(
    ("columns", "processor", "given", "message"),
    [
        (["id", "body"], "tokenizer", None,
         "predict: the data has no column 'text' (the model takes texts); its columns: id, body; "
         "pass column=NAME (--column NAME)"),
        (["px", "y"], "image_processor", None,
         "predict: the data has no column 'image' (the model takes images (HxW or HxWxC "
         "arrays)); its columns: px, y; pass column=NAME (--column NAME)"),
        (["a", "b"], None, None,
         "predict: the data has no column 'x' or 'features' (the model takes feature arrays); "
         "its columns: a, b; pass column=NAME (--column NAME)"),
        (["text"], "tokenizer", "body", "predict: the data has no column 'body'; its columns: "
         "text"),
    ],
)
def test_a_missing_column_lists_the_datas_columns(columns, processor, given, message) -> None:
    with pytest.raises(SweepError) as info:
        choose_column(columns, processor, given)
    assert str(info.value) == message
