"""``sweeps.load``: the trials and their reports as DataFrames, from sweep directories built
with the writers a sweep uses (``tests.unit.report.test_status``), live or released, on disk
and on S3; the rows against what was written."""

from __future__ import annotations

import json
import uuid

import pytest

from sweeps import files, load
from sweeps.layout import SweepLayout
from sweeps.lease import claim_store, hold
from sweeps.protocol import CLOCK_KEY
from sweeps.storage import stand_in, uri_of
from sweeps.trial import report_log
from tests.unit.report.test_status import _me, _sweep, _trials

PARAMS = {"lr": 0.01, "hidden": 64, "depth": 2, "dropout": 0.1, "batch_size": 32}


def _with_params(root):
    """Tune's copy of each trial's sampled values (``<trial>/params.json``), as Tune writes it
    when tracking is off."""
    for trial in "abc":
        files.make_dirs(SweepLayout(root).trial_dir(trial))
        files.write_atomic(SweepLayout(root).trial_dir(trial) / "params.json",
                           json.dumps({**PARAMS, "lr": {"a": 0.01, "b": 0.2, "c": 0.05}[trial]}))
    return root


def _check(tables, root) -> None:
    trials = tables.trials.set_index("trial_id")
    assert list(tables.trials.columns) == [
        "trial_id", "status", "lr", "hidden", "depth", "dropout", "batch_size", "best_val_acc",
        "final_val_acc", "epochs", "restarts", "checkpoint"]
    assert trials["lr"].to_dict() == {"a": 0.01, "b": 0.2, "c": 0.05}
    assert trials[["best_val_acc", "final_val_acc", "epochs"]].to_dict("index") == {
        "a": {"best_val_acc": 0.9, "final_val_acc": 0.9, "epochs": 3},
        "b": {"best_val_acc": 0.1, "final_val_acc": 0.1, "epochs": 1},
        "c": {"best_val_acc": 0.97, "final_val_acc": 0.97, "epochs": 2}}
    assert trials["restarts"].tolist() == [0, 0, 0]
    assert trials.loc["c", "checkpoint"] == uri_of(SweepLayout(root).run_dir("c")
                                                   / "checkpoint_epoch_0002")
    assert trials.loc[["a", "b"], "checkpoint"].isna().all()  # their loops saved none
    history = tables.history
    assert len(history) == 3 + 1 + 2  # every report of every trial
    assert history.groupby("trial_id")["report"].apply(list).to_dict() == {
        "a": [1, 2, 3], "b": [1], "c": [1, 2]}
    assert history[history.trial_id == "a"]["val_acc"].tolist() == [0.5, 0.7, 0.9]
    assert {"epoch", "sweeps_epoch", "checkpoint"} <= set(history.columns)
    assert history[history.trial_id == "c"]["checkpoint"].tolist() == [  # URIs on a store
        uri_of(SweepLayout(root).run_dir("c") / f"checkpoint_epoch_000{e}") for e in (1, 2)]
    assert "n" not in history and "checkpoint_path" not in history


def test_a_live_sweep_and_the_same_sweep_released(tmp_path) -> None:
    root = _with_params(_trials(_sweep(tmp_path / "s")))
    with hold(claim_store(root), _me()):
        tables = load(root)
    assert tables.live and tables.root == str(root)
    assert tables.trials["status"].tolist() == ["completed", "stopped", "running"]
    _check(tables, root)
    released = load(str(root))
    assert not released.live
    assert released.trials["status"].tolist() == ["completed", "stopped", "interrupted"]


def test_a_sweep_on_s3(moto_s3) -> None:
    uri = f"s3://{moto_s3.BUCKET}/tables/{uuid.uuid4().hex[:8]}"
    root = _with_params(_trials(_sweep(stand_in(uri))))
    tables = load(uri)
    assert tables.root == uri
    _check(tables, root)


def test_a_report_made_again_after_a_restore_replaces_the_first(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))
    report_log.append(SweepLayout(root).run_dir("c"), {"val_acc": 0.96, CLOCK_KEY: 2.0}, 2, None)
    history = load(root).history
    assert history[history.trial_id == "c"][["report", "val_acc"]].values.tolist() == [
        [1, 0.95], [2, 0.96]]


def test_a_trial_without_params_or_reports_and_no_sweep(tmp_path) -> None:
    root = _trials(_sweep(tmp_path / "s"))  # no params.json, no tracking journal: no values
    trials = load(root).trials
    assert trials["lr"].isna().all() and trials["best_val_acc"].tolist() == [0.9, 0.1, 0.97]
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no sweep"):
        load(tmp_path / "empty")
