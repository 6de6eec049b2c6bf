"""MLflow tracking for a sweep: a parent run, a nested run per trial, the best model registered.

    tracking = MLflowTracking(settings)       # a Tune callback, in the sweep driver only
    tuner = Tuner(..., run_config=RunConfig(callbacks=[tracking, ...]))
    tracking.finish(summary)                  # summary CSV, best trial, model, parent status

Every event becomes a record in the sweep's tracking journal (``sweeps.storage.journal``) first; a
background thread applies records to MLflow in order (``sweeps.tracking.mlflow_sink``). If the
tracking server goes away, training goes on, records wait on disk, and the thread retries with a
bounded backoff (0.5 s doubling to 10 s) until the server answers again; what is still unsent when
the sweep ends stays in the journal and is sent by ``python -m sweeps.sync <sweep dir>`` or by the
next run of the same sweep. Only this process writes to MLflow, so SQLite is never written by two
processes.

What each run holds and how a trial's outcome (``sweeps.search.outcome``) reads in MLflow: the
README's "Comparing trials". A stopped trial is FINISHED (stopping is the search working, not a
failure). Metric steps are the loop's own epoch (or the report count, ``sweeps.trial.clock``),
never Tune's iteration counter.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf
from ray.tune import Callback

from sweeps import files
from sweeps.layout import SweepLayout
from sweeps.loop.system_metrics import taken_aside
from sweeps.protocol import CLOCK_KEY, FAILURE_KEY, NOT_METRICS, RESTARTS_KEY, STEP_KEY
from sweeps.report.exploits import exploit_tags, exploits_of
from sweeps.report.failure import failed_rank, failure_reason
from sweeps.report.pareto import pareto_tags
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import verdicts
from sweeps.search.space import flatten
from sweeps.storage.journal import Journal
from sweeps.tracking.masking import mask_params, mask_tree, without_credentials
from sweeps.tracking.mlflow_sink import MLflowSink
from sweeps.tracking.writer import TrackingWriter

if TYPE_CHECKING:
    from sweeps.report.pareto import ParetoFront

__all__ = ["TrackingSettings", "MLflowTracking", "TrackingWriter", "NOT_METRICS", "outcome_tags"]
# TrackingWriter (sweeps.tracking.writer) stays importable from here, as before the split.

log = logging.getLogger(__name__)


def warm_model_logging() -> threading.Thread:
    """Import what logging the best model imports at the sweep's end (MLflow's PyTorch
    flavor: 2.6 s of a 3-trial sweep's 3.5 s tail on 2 cores) in a daemon thread beside the
    first trial's training (bench.overhead's tail row shows it); a failure is left for the
    sweep's end to report, where it is used."""
    def run() -> None:
        from sweeps.tracking.mlflow_model import pytorch_flavor

        try:
            pytorch_flavor()
        except Exception as exc:
            log.debug("pre-import of mlflow.pytorch failed: %s", exc)

    thread = threading.Thread(target=run, name="sweeps-warm-model-logging", daemon=True)
    thread.start()
    return thread


def outcome_tags(outcomes: dict[str, int]) -> dict[str, str]:
    """The parent run's tags counting trials by outcome (a summary's ``status`` column:
    ``completed``, ``stopped``, ``error``, ``empty``, the last two counted as failed).

    Example:
        >>> outcome_tags({"completed": 5, "stopped": 2, "error": 1})["sweeps.trials"]
        '8 trials: 5 completed, 2 stopped, 1 failed'
    """
    if not outcomes:
        return {}
    counts = {"completed": outcomes.get("completed", 0), "stopped": outcomes.get("stopped", 0),
              "failed": outcomes.get("error", 0) + outcomes.get("empty", 0)}
    return {**{f"sweeps.trials_{k}": str(v) for k, v in counts.items()},
            "sweeps.trials": f"{sum(outcomes.values())} trials: "
                             + ", ".join(f"{v} {k}" for k, v in counts.items())}


@dataclass(frozen=True)
class TrackingSettings:
    """Plain, picklable settings (Tune pickles callbacks with the experiment)."""

    uri: str
    experiment_name: str
    model_name: str | None
    state_dir: str
    max_epochs: int
    scheduler: str
    flush_timeout_s: float
    metric: str = ""
    mode: str = "max"
    model_loader: str | None = None
    system_metrics: bool = False  # tracking.system_metrics: drain the trials' samples

    @property
    def sweep_dir(self) -> Path:
        return Path(self.state_dir).parent

    def stored(self) -> TrackingSettings:
        """These settings as written to disk (``tracking/meta.json``, Tune's pickled
        experiment): the URI without credentials."""
        return replace(self, uri=without_credentials(self.uri))


class MLflowTracking(Callback):
    """Tune callback that journals sweep and trial events for MLflow."""

    def __init__(self, settings: TrackingSettings) -> None:
        self.settings = settings
        self._journal: Journal | None = None
        self._writer: TrackingWriter | None = None
        self._open: set[str] = set()  # trials started and not yet ended
        self._warmed = False
        self._restarts: dict[str, str] = {}  # trial id -> the last restart tagged on its run
        self._drained = 0.0  # when the running trials' system metric samples were last taken

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles callbacks into its experiment state; a restore passes new ones.
        return {"settings": self.settings.stored(), "_journal": None, "_writer": None,
                "_open": set(), "_warmed": False, "_restarts": {}, "_drained": 0.0}

    @property
    def journal(self) -> Journal:
        if self._journal is None:
            self._journal = Journal(self.settings.state_dir)
        return self._journal

    def writer(self) -> TrackingWriter:
        if self._writer is None:
            s = self.settings
            self._writer = TrackingWriter(self.journal, lambda: MLflowSink(
                s.uri, s.experiment_name, Path(s.state_dir), s.model_name, s.model_loader))
        return self._writer

    def record(self, record: dict[str, Any]) -> None:
        self.journal.append({**record, "ts": int(time.time() * 1000)})
        self.writer().notify()

    def start_sweep(self, sweep_name: str, sweep_uid: str, config: dict[str, Any],
                    search_space: dict[str, Any], tags: dict[str, str], start: int = 1) -> None:
        """Journal the parent run: the config (masked) as flattened params and as YAML, the
        search space, tags."""
        masked = mask_tree(config)
        self.record({"op": "sweep_start", "sweep_name": sweep_name, "sweep_uid": sweep_uid,
                     "params": flatten(masked), "config_yaml": OmegaConf.to_yaml(masked),
                     "search_space": search_space, "tags": tags, "start": start})

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._open.add(trial.trial_id)
        params = mask_params(flatten(trial.config or {}))
        tags = (exploit_tags(exploits_of(self.settings.sweep_dir), trial.trial_id)
                if self.settings.scheduler == "pbt" else {})
        if tags:  # restarted by a PBT exploit: MLflow keeps each param's first value, so the
            # new values and the history go into tags; its clock may now be behind MLflow's
            # steps, so the sink puts its next steps after the logged ones ("rebase")
            params = {}
        self.record({"op": "trial_start", "trial": trial.trial_id, "params": params,
                     **({"rebase": True} if tags else {})})
        if tags:
            self.record({"op": "trial_tags", "tags": {trial.trial_id: tags}})

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        values = {k: v for k, v in result.items() if k not in NOT_METRICS}
        step = result.get(STEP_KEY, result.get("training_iteration", 0))
        self.record({"op": "metrics", "trial": trial.trial_id, "step": int(step), "values": values})
        failure = result.get(FAILURE_KEY)  # the loop raised and was restarted
        if failure and failure != self._restarts.get(trial.trial_id):
            self._restarts[trial.trial_id] = failure
            self.record({"op": "trial_tags", "tags": {trial.trial_id: {
                "sweeps.restarts": str(result.get(RESTARTS_KEY)),
                "sweeps.last_failure": str(failure)[:500]}}})
        if not self._warmed:  # a trial is training: import the model's flavor meanwhile
            self._warmed = True
            warm_model_logging()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        if trial.trial_id not in self._open and CLOCK_KEY not in (trial.last_result or {}):
            return  # never started (ended by sweep.budget while pending): it has no run
        self._open.discard(trial.trial_id)
        self._system(trial.trial_id)
        s = self.settings
        clock = (trial.last_result or {}).get(CLOCK_KEY, 0)
        verdict = verdicts(s.sweep_dir).get(trial.trial_id)
        outcome = Objective(s.metric, s.mode, s.max_epochs).outcome(clock, verdict, False)
        if outcome == "error":
            self._failed(trial.trial_id, verdict.error if verdict else "trial failed")
        elif outcome == "completed":
            self.record({"op": "trial_end", "trial": trial.trial_id, "status": "FINISHED",
                         "tags": {"sweeps.status": "completed"}})
        else:
            reason = (f"stopped by sweep.budget.{verdict.budget} after epoch {clock:g}"
                      if verdict and verdict.budget else
                      f"early-stopped by {s.scheduler} after epoch {clock:g}")
            self.record({"op": "trial_end", "trial": trial.trial_id, "status": "FINISHED",
                         "run_name": f"{trial.trial_id} stopped@{clock:g}",
                         "tags": {"sweeps.status": "stopped", "sweeps.stop_reason": reason}})

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        if time.monotonic() > self._drained + 10:  # live in MLflow, also during a long epoch
            self._drained = time.monotonic()
            for trial_id in sorted(self._open):
                self._system(trial_id)

    def _system(self, trial_id: str) -> None:
        """Journal the system metric samples the trial's ranks sent since the last call."""
        if not self.settings.system_metrics:
            return
        samples = []
        with contextlib.suppress(Exception):  # Ray's store is gone (the sweep ends)
            samples = taken_aside(str(SweepLayout(self.settings.sweep_dir).run_dir(trial_id)))
        if samples:
            self.record({"op": "system", "trial": trial_id, "samples": samples})

    def _failed(self, trial_id: str, error: str, rank: tuple[int, int] | None = None) -> None:
        tags = {"sweeps.status": "error", "sweeps.error": error[:500]}
        if rank is not None:  # the rank whose own error it is, of a trial of several
            tags["sweeps.error_rank"] = f"{rank[0]} of {rank[1]}"
        self.record({"op": "trial_end", "trial": trial_id, "status": "FAILED",
                     "run_name": f"{trial_id} error", "tags": tags})

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._open.discard(trial.trial_id)
        self._system(trial.trial_id)
        self._failed(trial.trial_id, failure_reason(trial, limit=480), failed_rank(trial))

    def log_artifacts(self, paths: list[str], artifact_path: str | None) -> None:
        """Journal files to attach to the parent run (e.g. the plots)."""
        self.record({"op": "artifacts", "paths": paths, "artifact_path": artifact_path})

    def finish(self, summary_csv: Path | None, best: dict[str, Any] | None,
               status: str | None = None, pareto: ParetoFront | None = None,
               outcomes: dict[str, int] | None = None,
               importance: dict[str, float] | None = None) -> int:
        """Journal the sweep's end (``pareto``: a multi-objective sweep's ``Summary.pareto``,
        tagged on the runs; ``outcomes``: trials per status; ``importance``: param -> share,
        the parent's ``importance.<param>`` metrics), wait for delivery; return records
        still unsent. The parent run ends FAILED when every trial failed or none produced the
        metric, FINISHED otherwise; its tags count the trials by outcome, so a sweep with some
        failed trials shows it in the runs table."""
        tags = outcome_tags(outcomes or {})
        if best:
            tags.update({"sweeps.best_trial_id": best["trial_id"],
                         f"sweeps.best_{best['metric']}": f"{best['value']:.6g}"})
        if pareto is not None:
            tags.update(self._pareto(pareto))
        produced = best is not None or bool(pareto is not None and pareto.members)
        ended_well = (outcomes or {}).get("completed", 0) + (outcomes or {}).get("stopped", 0)
        status = status or ("FINISHED" if produced and (ended_well or not outcomes) else "FAILED")
        self.record({"op": "sweep_end", "summary_csv": str(summary_csv) if summary_csv else None,
                     "best": best, "status": status, "tags": tags, "importance": importance or {}})
        return self._close(self.settings.flush_timeout_s)

    def _pareto(self, front: ParetoFront) -> dict[str, str]:
        """Journal the trial runs' Pareto tags and ``pareto.json``; return the parent's tags."""
        trial_tags, parent_tags = pareto_tags(front)
        self.record({"op": "trial_tags", "tags": trial_tags})
        front_file = SweepLayout(self.settings.sweep_dir).pareto_json
        if files.exists(front_file):  # on disk or on an object store
            self.log_artifacts([str(front_file)], None)
        return parent_tags

    def _close(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for delivery, stop the writer; return records unsent."""
        with contextlib.suppress(Exception):  # after their runs ended (a stopped trial's last)
            taken_aside(str(SweepLayout(self.settings.sweep_dir).train))
        self.writer().flush(timeout_s)
        self.writer().stop()  # it may send more while it stops: count after
        left = len(self.journal.pending())
        why, fix = self.held if left else ("", "")
        with contextlib.suppress(Exception):  # for sweeps status; the sweep ends regardless
            files.write_atomic(SweepLayout(self.settings.sweep_dir).tracking_held,
                               json.dumps({"records": left, "why": why, "fix": fix}))
        return left

    @property
    def held(self) -> tuple[str, str]:
        """Why records still wait in the journal, and what sends them (empty: none tried)."""
        writer = self._writer
        return (writer.why or "MLflow did not answer in time", writer.fix or "it answers") \
            if writer is not None else ("", "")

    def abort(self, status: str, reason: str, timeout_s: float) -> int:
        """The sweep itself died: end open trial runs and the parent with ``status``."""
        for trial_id in sorted(self._open):
            self._system(trial_id)  # up to its end: a resume continues the same run
            self.record({"op": "trial_end", "trial": trial_id, "status": status,
                         "tags": {"sweeps.status": "aborted", "sweeps.stop_reason": reason}})
        self._open.clear()
        self.record({"op": "sweep_end", "summary_csv": None, "best": None, "status": status,
                     "tags": {"sweeps.abort_reason": reason}})
        return self._close(timeout_s)
