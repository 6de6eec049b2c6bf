"""search.warm_start: which earlier trials seed the searcher, from a sweep dir or from MLflow.

The stores are real: a sweep directory written with the project's own writers (the tracking
journal as ``MLflowTracking`` journals it, the scheduler's decision log as ``ResumableASHA``
records it, ``save_record``) and an MLflow SQLite store filled from that same journal by
``MLflowSink``, as the sweep's tracking thread does. No Ray.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pytest

from sweeps.errors import ConfigError
from sweeps.layout import SweepLayout
from sweeps.protocol import SCHEDULER_LOG
from sweeps.resume.state import SweepRecord, save_record
from sweeps.search.outcome import WORST
from sweeps.search.space import Param, flatten
from sweeps.search.warm_start import EarlierTrial, WarmStart, load_warm_start, screen
from sweeps.storage.journal import Journal
from sweeps.tracking.masking import mask_params
from sweeps.tracking.mlflow_sink import MLflowSink


def when(p: Param, **conditions: list[Any]) -> Param:
    """``p`` made conditional (``Param.when``), also before ``Param`` has that field: the
    module reads it with ``getattr``."""
    cond = tuple((parent, tuple(values)) for parent, values in conditions.items())
    if "when" in {f.name for f in fields(Param)}:
        return replace(p, when=cond)
    object.__setattr__(p, "when", cond)
    return p


# -- the filtering rules ----------------------------------------------------------------------
LR = Param("lr", "float", low=1e-4, high=0.1, log=True)
DEPTH = Param("model.depth", "int", low=2, high=8, step=2)
HIDDEN = Param("model.hidden", "choice", choices=(32, 64))
BN = Param("bn", "choice", choices=(True, False))
OPT = Param("opt", "choice", choices=("sgd", "adam"))
MOMENTUM = when(Param("momentum", "float", low=0.5, high=0.99), opt=["sgd"])
SPACE = [LR, DEPTH, HIDDEN, BN, OPT, MOMENTUM]
AS_MLFLOW = {"lr": "0.01", "model.depth": "4", "model.hidden": "64", "bn": "True", "opt": "sgd",
             "momentum": "0.9"}  # MLflow keeps every param as text
TYPED = {"lr": 0.01, "model.depth": 4, "model.hidden": 64, "bn": True, "opt": "sgd",
         "momentum": 0.9}
GONE = object()  # a row's change that removes the key


@pytest.mark.parametrize(("change", "expected"), [
    ({}, TYPED),
    (TYPED, TYPED),  # typed values, as the journal and Tune's params.json hold them
    ({"lr": "0.0001"}, {**TYPED, "lr": 1e-4}),  # log bounds are inclusive
    ({"lr": "0.1"}, {**TYPED, "lr": 0.1}),
    ({"lr": 0.1 * (1 + 1e-12)}, {**TYPED, "lr": 0.1}),  # a rounding off the bound: onto it
    ({"lr": "9.9e-05"}, "lr outside the space"),
    ({"lr": "0.2"}, "lr outside the space"),
    ({"lr": "nan"}, "lr outside the space"),
    ({"lr": True}, "lr outside the space"),
    ({"model.depth": "6.0"}, {**TYPED, "model.depth": 6}),  # an int given as "6.0"
    ({"model.depth": 8.0}, {**TYPED, "model.depth": 8}),
    ({"model.depth": "4.5"}, "model.depth outside the space"),
    ({"model.depth": "5"}, "model.depth outside the space"),  # off the step grid
    ({"model.depth": "10"}, "model.depth outside the space"),
    ({"model.hidden": "64.0"}, TYPED),
    ({"model.hidden": "128"}, "model.hidden outside the space"),
    ({"bn": "False"}, {**TYPED, "bn": False}),  # a bool choice, as MLflow's text
    ({"bn": False}, {**TYPED, "bn": False}),
    ({"bn": 1}, "bn outside the space"),  # 1 == True in Python, not here
    ({"opt": "rmsprop"}, "opt outside the space"),
    ({"opt": "adam", "momentum": GONE},  # conditional, condition fails: absent
     {k: v for k, v in {**TYPED, "opt": "adam"}.items() if k != "momentum"}),
    ({"momentum": GONE}, "missing momentum"),  # conditional, condition holds: required
    ({"opt": "adam"}, "momentum set where its condition fails"),
    ({"momentum": "0.2"}, "momentum outside the space"),
    ({"weight_decay": "0.1", "old.width": 3}, TYPED),  # not params of this space: dropped
    ({"lr": GONE}, "missing lr"),
    ({"model.depth": GONE}, "missing model.depth"),
], ids=lambda v: None)
def test_params_are_fitted_to_the_current_space(change: dict[str, Any], expected: Any) -> None:
    raw = {k: v for k, v in {**AS_MLFLOW, **change}.items() if v is not GONE}
    got = screen("t1", raw, {"val_acc": 0.9}, SPACE, {"val_acc": "max"})
    if isinstance(expected, str):
        assert got == expected
    else:
        assert got == EarlierTrial(expected, {"val_acc": 0.9}, "t1")
        assert all(type(got.params[k]) is type(v) for k, v in expected.items())


@pytest.mark.parametrize(("metrics", "objectives", "expected"), [
    ({"val_acc": 0.9, "loss": 0.1}, {"val_acc": "max"}, {"val_acc": 0.9}),
    ({"val_acc": 1}, {"val_acc": "max"}, {"val_acc": 1.0}),
    ({"val_acc": "0.5"}, {"val_acc": "max"}, {"val_acc": 0.5}),
    ({"val_acc": math.nan}, {"val_acc": "max"}, "val_acc not finite"),
    ({"val_acc": math.inf}, {"val_acc": "max"}, "val_acc not finite"),
    ({"val_acc": None}, {"val_acc": "max"}, "val_acc not finite"),  # the decision log's NaN
    ({"val_acc": -WORST}, {"val_acc": "max"}, "val_acc not finite"),  # the scheduler's NaN
    ({"loss": 1.7976931348623157e308}, {"loss": "min"}, "loss not finite"),  # the sink's inf
    ({"val_acc": True}, {"val_acc": "max"}, "val_acc not finite"),
    ({"loss": 0.1}, {"val_acc": "max"}, "no val_acc"),
    ({"val_acc": 0.9, "n_params": 1e5}, {"val_acc": "max", "n_params": "min"},
     {"val_acc": 0.9, "n_params": 1e5}),
    ({"val_acc": 0.9}, {"val_acc": "max", "n_params": "min"}, "no n_params"),
    ({"val_acc": 0.9, "n_params": math.nan}, {"val_acc": "max", "n_params": "min"},
     "n_params not finite"),
])
def test_every_objective_must_be_a_finite_number(metrics: dict[str, Any],
                                                 objectives: dict[str, str],
                                                 expected: Any) -> None:
    got = screen("t1", AS_MLFLOW, metrics, SPACE, objectives)
    assert got == (expected if isinstance(expected, str) else EarlierTrial(TYPED, expected, "t1"))


def test_a_bad_metric_is_named_before_a_bad_param() -> None:
    assert screen("t", {"lr": "5"}, {}, [LR], {"val_acc": "max"}) == "no val_acc"


# -- a real sweep directory and a real MLflow store -------------------------------------------
STORE_SPACE = [Param("lr", "float", low=1e-4, high=0.1, log=True),
               Param("optim.name", "choice", choices=("sgd", "adam")),
               when(Param("optim.momentum", "float", low=0.5, high=0.99),
                    **{"optim.name": ["sgd"]})]
TRIALS = [  # (trial id, its sampled config, val_acc at each epoch, how it ended)
    ("t1", {"lr": 0.01, "optim": {"name": "sgd", "momentum": 0.9}}, [0.5, 0.7, 0.6], "completed"),
    ("t2", {"lr": 0.5, "optim": {"name": "sgd", "momentum": 0.9}}, [0.8, 0.9], "completed"),
    ("t3", {"lr": 0.001, "optim": {"name": "adam"}}, [0.3], "stopped"),
    ("t4", {"lr": 0.02, "optim": {"name": "sgd", "momentum": 0.8}}, [0.4, math.nan],
     "completed"),
    ("t5", {"lr": 0.03, "optim": {"name": "adam"}}, [], "error"),
    ("t6", {"lr": 0.04, "optim": {"name": "adam"}}, [0.2], "running"),  # the sweep was killed
    ("t7", {"lr": 0.05, "optim": {"name": "adam"}}, [0.2], "aborted"),  # the sweep crashed
]
USABLE = [EarlierTrial({"lr": 0.01, "optim.name": "sgd", "optim.momentum": 0.9},
                       {"val_acc": 0.6}, "t1"),  # final 0.6, not its best 0.7
          EarlierTrial({"lr": 0.001, "optim.name": "adam"}, {"val_acc": 0.3}, "t3")]
SKIPPED = {"lr outside the space": 1, "val_acc not finite": 1, "failed": 1, "unfinished": 2}


def write_sweep(root: Path, tracking: bool = True) -> Journal | None:
    """A finished ASHA sweep of TRIALS in ``root``, as the sweep writes it; returns its
    tracking journal (None with tracking off)."""
    layout = SweepLayout(root)
    save_record(root, SweepRecord(sweep_uid="digits-0001", name="digits", identity={}))
    decisions = Journal(layout.state, SCHEDULER_LOG)  # = schedulers.decision_log(root)
    journal = Journal(layout.tracking) if tracking else None
    clock = iter(range(1_000, 2_000))

    def track(record: dict[str, Any]) -> None:  # MLflowTracking.record
        if journal is not None:
            journal.append({**record, "ts": next(clock)})

    track({"op": "sweep_start", "sweep_name": "digits", "sweep_uid": "digits-0001",
           "params": {"experiment.name": "digits"}, "config_yaml": "experiment: {}\n",
           "search_space": {p.path: p.describe() for p in STORE_SPACE},
           "tags": {"sweeps.sweep_name": "digits"}, "start": 1})
    for trial, config, values, end in TRIALS:
        track({"op": "trial_start", "trial": trial, "params": mask_params(flatten(config))})
        layout.trial_dir(trial).mkdir()
        (layout.trial_dir(trial) / "params.json").write_text(json.dumps(config))  # Tune's
        metrics: dict[str, Any] = {}
        for epoch, value in enumerate(values, 1):
            track({"op": "metrics", "trial": trial, "step": epoch,
                   "values": {"val_acc": value, "train_loss": 1 / epoch}})
            judged = value if math.isfinite(value) else -WORST  # ResumableASHA._screen
            metrics = {"val_acc": judged, "train_loss": 1 / epoch, "epoch": epoch,
                       "sweeps_epoch": float(epoch), "config/lr": config["lr"]}
            stop = end == "stopped" and epoch == len(values)
            decisions.append({"trial": trial, "epoch": float(epoch), "value": judged,
                              "bracket": 0, "action": "STOP" if stop else "CONTINUE",
                              "t": next(clock), "metrics": metrics})
        if end == "completed":
            decisions.append({"trial": trial, "end": True, "epoch": float(len(values)),
                              "value": metrics["val_acc"], "bracket": 0, "t": next(clock),
                              "metrics": metrics})
            track({"op": "trial_end", "trial": trial, "status": "FINISHED",
                   "tags": {"sweeps.status": "completed"}})
        elif end == "stopped":
            track({"op": "trial_end", "trial": trial, "status": "FINISHED",
                   "run_name": f"{trial} stopped@1", "tags": {"sweeps.status": "stopped"}})
        elif end == "error":
            error = "never reported val_acc (experiment.metric) by epoch 1"
            decisions.append({"trial": trial, "epoch": 1.0, "value": None, "action": "STOP",
                              "error": error, "t": next(clock), "metrics": {"loss": 1.0}})
            track({"op": "trial_end", "trial": trial, "status": "FAILED",
                   "run_name": f"{trial} error",
                   "tags": {"sweeps.status": "error", "sweeps.error": error}})
        elif end == "aborted":  # MLflowTracking.abort: its sweep died, not the trial
            track({"op": "trial_end", "trial": trial, "status": "FAILED",
                   "tags": {"sweeps.status": "aborted", "sweeps.stop_reason": "RuntimeError"}})
    track({"op": "sweep_end", "summary_csv": None, "best": None, "status": "FINISHED",
           "tags": {}})
    return journal


@dataclass(frozen=True)
class Store:
    """``root/mlflow.db`` (experiment ``digits``) and the sweep that filled it,
    ``root/project/outputs/digits``."""

    root: Path
    sweep_dir: Path

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.root / 'mlflow.db'}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One sweep, applied to a real SQLite store by the sweep's own MLflow sink from its
    journal, as the sweep's tracking thread does (once per module: a new store costs ~1 s)."""
    root = tmp_path_factory.mktemp("store")
    made = Store(root, root / "project" / "outputs" / "digits")
    journal = write_sweep(made.sweep_dir)
    assert journal is not None
    sink = MLflowSink(made.uri, "digits", SweepLayout(made.sweep_dir).tracking, model_name=None)
    for record in journal.records():
        sink.apply(record)
        time.sleep(0.002 if record["op"] == "trial_start" else 0)  # distinct start times
    return made


def test_a_sweep_dir_gives_final_metrics_of_ended_trials_in_the_space(store: Store) -> None:
    warm = load_warm_start(str(store.sweep_dir), STORE_SPACE, {"val_acc": "max"}, None)
    assert warm == WarmStart(f"sweep dir {store.sweep_dir}", USABLE, SKIPPED)


def test_mlflow_gives_the_same_trials_as_the_sweep_dir(store: Store) -> None:
    # No outputs/digits in root: MLflow is asked, by default at <cwd>/mlflow.db.
    warm = load_warm_start("digits", STORE_SPACE, {"val_acc": "max"}, None, store.root)
    assert warm == WarmStart(f"MLflow experiment 'digits' at {store.uri}", USABLE, SKIPPED)


def test_the_second_objective_is_final_too(store: Store) -> None:
    objectives = {"val_acc": "max", "train_loss": "min"}
    from_dir = load_warm_start(str(store.sweep_dir), STORE_SPACE, objectives, None)
    from_mlflow = load_warm_start("digits", STORE_SPACE, objectives, store.uri, store.root)
    assert [t.metrics for t in from_dir.trials] == [t.metrics for t in from_mlflow.trials] == [
        {"val_acc": 0.6, "train_loss": 1 / 3}, {"val_acc": 0.3, "train_loss": 1.0}]


def test_a_bare_name_finds_outputs_name_before_mlflow(store: Store) -> None:
    warm = load_warm_start("digits", STORE_SPACE, {"val_acc": "max"}, store.uri,
                           store.root / "project")
    assert warm.source == f"sweep dir {store.sweep_dir}"


def test_a_sweep_without_tracking_reads_tunes_params_json(tmp_path: Path) -> None:
    write_sweep(tmp_path / "quiet", tracking=False)
    warm = load_warm_start("file:quiet", STORE_SPACE, {"val_acc": "max"}, None, tmp_path)
    assert (warm.trials, warm.skipped) == (USABLE, SKIPPED)
    assert not (tmp_path / "quiet" / "tracking").exists()  # reading created nothing


@pytest.mark.parametrize("tracking", [True, False])
def test_a_trial_pbt_exploited_counts_with_the_values_it_went_on_with(tmp_path: Path,
                                                                       tracking: bool) -> None:
    """PBT's restart of t1 with a donor's values journals a trial_start with no params (MLflow
    keeps the first ones) and the new values in the scheduler's exploit record."""
    journal = write_sweep(tmp_path / "pbt", tracking=tracking)
    layout = SweepLayout(tmp_path / "pbt")
    if journal is not None:
        journal.append({"op": "trial_start", "trial": "t1", "params": {}, "rebase": True})
    Journal(layout.state, SCHEDULER_LOG).append({
        "trial": "t1", "epoch": 3.0, "action": "PAUSE", "t": 3_000, "metrics": {},
        "exploit": {"donor": "t3", "donor_epoch": 1.0, "generation": 1,
                    # ResumablePBT._plan: every searched value (PBT refuses conditions)
                    "config": {"lr": 0.0012, "optim.name": "sgd", "optim.momentum": 0.95},
                    "changed": {"lr": [0.01, 0.0012], "optim.momentum": [0.9, 0.95]}}})
    went_on = {"lr": 0.0012, "optim.name": "sgd", "optim.momentum": 0.95}
    warm = load_warm_start(str(layout.root), STORE_SPACE, {"val_acc": "max"}, None)
    assert warm.trials[0] == EarlierTrial(went_on, {"val_acc": 0.6}, "t1")
    if journal is None:
        return
    # The same sweep through MLflow: the run keeps t1's first params; the exploit's tags
    # (report.exploits.exploit_tags) hold the values it went on with.
    journal.append({"op": "trial_tags", "tags": {"t1": {
        "sweeps.pbt.exploits": "1", "sweeps.pbt.value.lr": "0.0012",
        "sweeps.pbt.value.optim.momentum": "0.95"}}, "ts": 3_001})
    journal.append({"op": "trial_end", "trial": "t1", "status": "FINISHED", "ts": 3_002,
                    "tags": {"sweeps.status": "completed"}})
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink = MLflowSink(uri, "pbt_runs", layout.tracking, model_name=None)
    for record in journal.records():
        sink.apply(record)
    from_mlflow = load_warm_start("pbt_runs", STORE_SPACE, {"val_acc": "max"}, uri, tmp_path)
    assert from_mlflow.source.startswith("MLflow experiment 'pbt_runs'")
    assert from_mlflow.trials[0].params == went_on


def test_a_plain_directory_with_the_name_falls_through_to_mlflow(tmp_path: Path,
                                                                  store: Store) -> None:
    (tmp_path / "digits").mkdir()  # e.g. the data set's folder
    warm = load_warm_start("digits", STORE_SPACE, {"val_acc": "max"}, store.uri, tmp_path)
    assert warm.source.startswith("MLflow experiment 'digits'")


@pytest.mark.parametrize("source", ["file:data", "./data", "data/", "{cwd}/data"])
def test_a_path_that_is_no_sweep_dir_is_refused(tmp_path: Path, source: str) -> None:
    (tmp_path / "data").mkdir()
    source = source.format(cwd=tmp_path)
    with pytest.raises(ConfigError, match="is not a sweep directory") as err:
        load_warm_start(source, STORE_SPACE, {"val_acc": "max"}, None, tmp_path)
    assert (err.value.key, err.value.value) == ("search.warm_start", source)


def test_not_found_names_what_was_tried_and_close_names(store: Store) -> None:
    with pytest.raises(ConfigError) as err:
        load_warm_start("digts", STORE_SPACE, {"val_acc": "max"}, None, store.root)
    e = err.value
    assert (e.key, e.value, e.rule) == ("search.warm_start", "digts", "not found")
    for part in (str(store.root / "digts"), str(store.root / "outputs" / "digts"), store.uri,
                 "close names: 'digits'", "MLflow experiment name"):
        assert part in e.fix


@pytest.mark.parametrize("uri", ["sqlite:///{cwd}/none.db", "sqlite:///none.db",
                                 "file:./mlruns", "file://{cwd}/mlruns"])
def test_a_missing_local_store_is_not_created(tmp_path: Path, uri: str) -> None:
    uri = uri.format(cwd=tmp_path)
    with pytest.raises(ConfigError, match=f"no MLflow store at .*{tmp_path.name}"):
        load_warm_start("digits", STORE_SPACE, {"val_acc": "max"}, uri, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_no_overlap_names_the_source_and_every_skip(store: Store) -> None:
    other = [Param("lr", "float", low=1.0, high=2.0)]
    for source, cwd in ((str(store.sweep_dir), None), ("digits", store.root)):
        with pytest.raises(ConfigError) as err:
            load_warm_start(source, other, {"val_acc": "max"}, store.uri, cwd)
        e = err.value
        assert (e.key, e.value) == ("search.warm_start", source)
        assert "no earlier trial overlaps this search space" in e.rule
        assert ("lr outside the space: 3, val_acc not finite: 1, failed: 1, unfinished: 2"
                in e.rule)
        assert "drop search.warm_start" in e.fix


def test_importing_it_imports_neither_ray_nor_mlflow() -> None:
    code = ("import sys, sweeps.search.warm_start; "
            "print(sorted(m for m in ('ray', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
