"""Run one corpus loop three ways and say what it observed each time.

    reference = run_plain(loop, workers, tmp)                 # a plain Ray Train TorchTrainer
    trial = run_sweeps(loop, workers, "train", tmp)           # a sweeps trial, Train backend
    auto = run_sweeps(loop, workers, "auto", tmp)             # the default: inline
    assert comparable(trial) == comparable(reference)

An ``Outcome`` holds only what the loop can tell apart: what each rank noted
(``tests.conformance.observe``), every checkpoint it reported (its metrics and the files in it)
and the error a failing rank raised, as Ray Train's own ``WorkerGroupError``
names it for the reference and as the sweep shows it to its user (the trial's error, its
``error.txt``, its summary row and its MLflow run) for the other two.
"""

from __future__ import annotations

import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conformance.corpus import Loop
from tests.conformance.observe import read

CONF = Path(__file__).resolve().parent / "conf"
POLL_ENV = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"  # Ray Train's own knob (documented)


@dataclass
class Outcome:
    """What one run of a loop left (``comparable`` is what must match across runners)."""

    observed: dict[int, list[dict[str, Any]]]
    checkpoints: list[tuple[dict[str, Any], list[str]]]  # (metrics, files), report order
    error: tuple[str, str] | None  # (type, first line of the message) of the failing rank
    shown: dict[str, str] = field(default_factory=dict)  # sweeps only: where the user looks

    def comparable(self) -> dict[str, Any]:
        return {"observed": self.observed, "checkpoints": self.checkpoints, "error": self.error}


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in Path(directory).rglob("*")
                  if p.is_file())


def _metrics(metrics: dict[str, Any], loop: Loop) -> dict[str, Any]:
    """The reported metrics a loop controls (no timestamps, no keys a runner adds)."""
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in metrics.items()
            if k in loop.compared_metrics}


def _first_line(error: BaseException) -> tuple[str, str]:
    return type(error).__name__, (str(error).strip().splitlines() or [""])[0]


def config_of(loop: Loop, observe_dir: Path) -> dict[str, Any]:
    """The loop's ``train_loop_config``: the same dict on every runner."""
    return {"lr": 0.05, **loop.params, "observe_dir": str(observe_dir)}


def run_plain(loop: Loop, workers: int, tmp: Path) -> Outcome:
    """The reference: the loop under a plain ``TorchTrainer``, as Ray's guides run it."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    observe_dir = tmp / "observed"
    datasets = None
    if loop.dataset:  # materialized, as sweeps hands datasets to its trials: on 2 CPUs held
        # by 2 Train workers, Ray Data would get no CPU for a lazy dataset's read tasks and
        # wait forever (sweeps.driver.datasets)
        datasets = {"train": importlib.import_module(loop.module).make_dataset().materialize()}
    trainer = TorchTrainer(
        loop.function(), train_loop_config=config_of(loop, observe_dir), datasets=datasets,
        scaling_config=ScalingConfig(num_workers=workers),
        run_config=RunConfig(name="plain", storage_path=str(tmp / "storage"),
                             # kept and ordered as sweeps asks Train to: by the metric
                             checkpoint_config=CheckpointConfig(
                                 num_to_keep=None, checkpoint_score_attribute=loop.metric,
                                 checkpoint_score_order="min"),
                             failure_config=FailureConfig(max_failures=loop.max_failures)))
    error = None
    # Ray Train's controller polls its workers every 2 s by default, which only slows the
    # reference down (the sweeps trials poll every trial.poll_interval_s, 0.1 s).
    saved = os.environ.get(POLL_ENV)
    os.environ[POLL_ENV] = "0.1"
    try:
        result = trainer.fit()
        checkpoints = result.best_checkpoints or []
    except Exception as exc:  # Ray Train raises the run's TrainingFailedError from fit()
        error = _worker_error(exc)
        checkpoints = []
    finally:
        if saved is None:
            os.environ.pop(POLL_ENV, None)
        else:
            os.environ[POLL_ENV] = saved
    return Outcome(read(observe_dir), _ordered(
        [(_metrics(m, loop), _files(Path(c.path))) for c, m in checkpoints]), error)


def _ordered(checkpoints: list[tuple[dict[str, Any], list[str]]]) -> list:
    """Checkpoints in one order whatever order a runner lists them in (the loop's own view of
    the order, ``get_all_reported_checkpoints``, is in what it notes)."""
    return sorted(checkpoints, key=lambda c: json.dumps(c, sort_keys=True))


def _worker_error(exc: BaseException) -> tuple[str, str]:
    """The failing rank's own error in a ``WorkerGroupError`` (Ray keeps each rank's)."""
    failures = getattr(exc, "worker_failures", None) or {}
    if not failures:
        return _first_line(exc)
    ranks = sorted(failures)
    # A rank's error that is only a consequence (a peer closed the connection) is not it.
    own = [r for r in ranks if "Connection closed by peer" not in str(failures[r])] or ranks
    cause = failures[own[0]]
    cause = getattr(cause, "cause", None) or cause  # a RayTaskError wraps what the loop raised
    return _first_line(cause)


def sweep_overrides(loop: Loop, workers: int, backend: str, tmp: Path,
                    *overrides: str) -> list[str]:
    """The overrides of ``+experiment=conformance`` (``--config-dir tests/conformance/conf``)
    that run ``loop`` as a one-trial sweep in ``tmp/sweep``, tracked in ``tmp/mlflow.db``."""
    params = config_of(loop, tmp / "observed")
    params.pop("lr")  # the search space's one point
    return [
        f"experiment.trainable={loop.trainable}", f"experiment.metric={loop.metric}",
        f"scaling.num_workers={workers}", f"sweep.dir={tmp / 'sweep'}", "sweep.seed=0",
        f"trial.executor={backend}", "scaling.use_gpu=false",
        f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}", "checkpoint.keep=1000",
        f"trial.max_failures={loop.max_failures}",
        *([f"+experiment.datasets.train.function='{loop.module}:make_dataset'"]
          if loop.dataset else []),
        *[f"+experiment.params.{k}={json.dumps(v)}" for k, v in params.items()], *overrides]


def group_key(loop: Loop, workers: int) -> int | None:
    """Loops with the same key (the worker count) run as one sweep per backend (``run_group``),
    one trial each: those whose metric is ``loss``, with no dataset, no routing and no restart (a
    failing trial fails alone, as its plain run does). ``None``: the loop runs alone."""
    if loop.dataset or loop.routed or loop.metric != "loss" or loop.max_failures:
        return None
    return workers


def run_group(loops: list[Loop], workers: int, backend: str, tmp: Path) -> dict[str, Outcome]:
    """``loops`` (one ``group_key``) as one tracked sweep with ``trial.executor=backend``, one
    trial per loop (its ``config["loop"]``, run by ``loops/grouped.py``): each loop's outcome,
    as ``run_sweeps`` gives it. Tune reuses a trial's process for the next unless it failed."""
    from sweeps import compose, run_sweep

    base = Loop("grouped", "loss", (), file="grouped")
    overrides = [o for o in sweep_overrides(base, workers, backend, tmp) if "observe_dir" not in o]
    names = ",".join(loop.name for loop in loops)
    cfg = compose("conformance", [*overrides, f"+experiment.params.loop={loops[0].name}",
                                  f"+experiment.search_space.loop='choice({names})'",
                                  f"+experiment.params.observe_base={json.dumps(str(tmp))}"],
                  config_dir=CONF)
    result = run_sweep(cfg)
    table = result.summary.table
    ids = dict(zip(table["loop"], table["trial_id"].astype(str), strict=True))
    errors = {r.config["loop"]: r.error for r in result.results}
    return {loop.name: _outcome(result, ids[loop.name], errors[loop.name], loop, tmp,
                                tmp / loop.name, tracked=True) for loop in loops}


def run_sweeps(loop: Loop, workers: int, backend: str, tmp: Path, *overrides: str,
               tracked: bool = True) -> Outcome:
    """The loop as a one-trial sweep with ``trial.executor=backend`` (``train``, or ``auto``:
    inline unless the loop needs a Train run), tracked in an
    MLflow store in ``tmp`` (``tracked``); its error as the user sees it."""
    from sweeps import compose, run_sweep

    untracked = [] if tracked else ["tracking.enabled=false"]
    cfg = compose("conformance", sweep_overrides(loop, workers, backend, tmp, *overrides,
                                                 *untracked), config_dir=CONF)
    result = run_sweep(cfg)
    (trial,) = result.results
    return _outcome(result, _trial_id(result), trial.error, loop, tmp, tmp / "observed", tracked)


def _outcome(result: Any, trial_id: str, error: BaseException | None, loop: Loop, tmp: Path,
             observed: Path, tracked: bool) -> Outcome:
    """What the sweep's trial ``trial_id`` left of ``loop``: its notes, checkpoints and error,
    and where the user reads that error (with ``tracked``, its MLflow run too)."""
    checkpoints = sweep_checkpoints(Path(result.sweep_dir, "train", trial_id), loop)
    if error is None:
        return Outcome(read(observed), checkpoints, None)
    shown = _where_users_look(result, tmp, trial_id) if tracked else {}
    return Outcome(read(observed), checkpoints, _sweep_error(error), shown)


def _trial_id(result: Any) -> str:
    return str(result.summary.table["trial_id"].iloc[0])


def sweep_checkpoints(run_dir: Path, loop: Loop) -> list[tuple[dict[str, Any], list[str]]]:
    from sweeps._ray import train_snapshot

    snap = train_snapshot.load(run_dir)
    if snap is None:
        return []
    metrics = {r["checkpoint_dir_name"]: r.get("metrics") or {}
               for r in snap["checkpoint_results"]}
    names = [name for name, _ in train_snapshot.entries(snap)]
    return _ordered([(_metrics(metrics[n], loop), _files(run_dir / n)) for n in names])


def _sweep_error(error: BaseException) -> tuple[str, str]:
    """What a sweep trial's error says: the loop's own exception, as the user reads it."""
    cause = getattr(error, "cause", None) or error  # Tune's RayTaskError wraps the trial's
    return _first_line(cause)


def _where_users_look(result: Any, tmp: Path, trial_id: str) -> dict[str, str]:
    """The failure of ``trial_id`` as the summary, error.txt and its MLflow run give it."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp / 'mlflow.db'}")
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string=f"tags.`sweeps.trial_id` = '{trial_id}'")
    error_txt = result.layout.error_file(trial_id)
    return {"summary": str(result.failed.get(trial_id, "")),
            "error.txt": error_txt.read_text() if error_txt.exists() else "",
            "mlflow": runs[0].data.tags.get("sweeps.error", "") if runs else ""}
