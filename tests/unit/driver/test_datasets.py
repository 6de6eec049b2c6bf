"""``experiment.datasets``: every form parses, every bad entry fails before Ray starts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from sweeps import ConfigError, compose, prepare
from sweeps.config.datasets import check_datasets, parse_datasets, reader_of
from sweeps.config.usercode import import_trainable
from sweeps.config.validate import validate
from sweeps.driver.dry_run import format_plan


def three_rows(split: str = "train", limit: int = 3) -> list[int]:
    """A dataset function the entries below name (returns no Dataset: only checked here)."""
    return list(range(limit))


HERE = f"{__name__}:three_rows"


@pytest.mark.parametrize("value, function, kwargs, path", [
    ({"function": "m:f", "split": "val"}, "m:f", {"split": "val"}, None),
    ("mypkg.data:train_set", "mypkg.data:train_set", {}, None),
    ("data/train.parquet", None, {}, "data/train.parquet"),
    ("s3://bucket/digits/train", None, {}, "s3://bucket/digits/train"),
    ("data", None, {}, "data"),
])
def test_each_form_parses(value, function, kwargs, path) -> None:
    src = parse_datasets({"train": value})["train"]
    assert (src.function, src.kwargs, src.path) == (function, kwargs, path)


@pytest.mark.parametrize("entries, key, says", [
    ({"train": {"split": "train"}}, "experiment.datasets.train", "without a 'function'"),
    ({"train": 3}, "experiment.datasets.train", "neither a function nor a path"),
    ({"my-set": "a.parquet"}, "experiment.datasets.my-set", "not a dataset name"),
    ({"train": "missing/train.parquet"}, "experiment.datasets.train", "does not exist"),
    ({"train": "nosuchpkg.data:load"}, "experiment.datasets.train", "cannot be imported"),
    ({"train": f"{__name__}:three_row"}, "experiment.datasets.train", "did you mean"),
    ({"train": {"function": HERE, "splt": "val"}}, "experiment.datasets.train",
     "unexpected keyword argument 'splt'"),
])
def test_bad_entries_name_the_key(entries, key, says, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        check_datasets(entries)
    assert key in str(err.value) and says in str(err.value)


def test_a_file_of_an_unknown_type_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "train.xlsx"
    data.write_text("")
    with pytest.raises(ConfigError, match=r"\.xlsx file, which ray\.data is not told"):
        check_datasets({"train": str(data)})


def test_a_directory_is_read_with_the_reader_of_its_files(tmp_path: Path) -> None:
    (tmp_path / "part-0.csv").write_text("x,y\n1,2\n")
    assert reader_of(str(tmp_path)) == "read_csv"
    assert check_datasets({"train": str(tmp_path)})["train"][0].path == str(tmp_path)


def test_a_bad_dataset_fails_validation_before_ray() -> None:
    cfg = compose("digits_data", ["experiment.datasets.val=nowhere/val.parquet"])
    with pytest.raises(ConfigError, match="experiment.datasets.val: 'nowhere/val.parquet' does "
                                          "not exist"):
        validate(cfg)


def test_the_plan_lists_the_datasets_and_their_cost() -> None:
    plan = format_plan(prepare(compose("digits_data", ["ray.num_cpus=2", "ray.num_gpus=0"])))
    assert ("dataset train: trainables.digits_data:digits(split='train'), split across a "
            "trial's workers") in plan
    assert "dataset val: trainables.digits_data:digits(split='val'), whole on every" in plan
    assert "no Ray Data CPUs of their own" in plan
    assert "up to 2 trial(s) at once on 2 CPU" in plan


def test_a_missing_extra_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    """A loop that imports transformers, on an install without sweeps[hf]."""
    (tmp_path / "hf_loop.py").write_text("import transformers\n\ndef train(config): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    with pytest.raises(ConfigError) as err:
        import_trainable("hf_loop:train")
    assert "needs transformers, which is not installed" in str(err.value)
    assert "pip install 'sweeps[hf]'" in str(err.value)


def test_datasets_to_split_must_name_declared_datasets() -> None:
    cfg = compose("digits_data", ["experiment.datasets_to_split=[train,test]"])
    with pytest.raises(ConfigError, match=r"experiment.datasets_to_split: 'test' is not one of "
                                          r"experiment.datasets \(train, val\)"):
        validate(cfg)
