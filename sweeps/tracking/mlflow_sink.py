"""Apply tracking-journal records to MLflow, idempotently, from the sweep driver only.

    sink = MLflowSink(uri, "digits", sweep_dir / "tracking", model_name="digits")
    sink.apply({"op": "trial_start", "trial": "ab12", "params": {...}})

Runs are found again rather than created twice: the map ``runs.json`` (trial id -> run id,
written atomically, read by a resumed sweep) comes first; when a create's reply was lost, a
search by the tags ``sweeps.sweep_uid`` + ``sweeps.trial_id`` finds the run the server made.
Children are nested under the sweep's parent run with the ``mlflow.parentRunId`` tag.

MLflow limits are enforced here, not discovered on the server: a param value over 6,000
characters is cut (tag ``sweeps.truncated_params`` lists which; the full config is the
``config.yaml`` artifact), a key over 250 characters is skipped, and a non-numeric metric is
dropped with one warning per key.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.layout import TRACKING_RUNS
from sweeps.loop.system_metrics import new_points
from sweeps.storage import trees
from sweeps.tracking.mlflow_best import log_best_model, mark_best, model_key
from sweeps.tracking.setup import artifacts_beside
from sweeps.tracking.sqlite_store import open_client
from sweeps.tracking.writer import TransientTrackingError, is_transient

__all__ = ["MLflowSink", "TransientTrackingError", "PARAM_LIMIT"]

log = logging.getLogger(__name__)
PARAM_LIMIT = 6000
KEY_LIMIT = 250
TRUNCATED = "...[truncated]"
# MLflow 3's experiment kind: its UI opens a "custom_model_development" experiment on the runs
# table ("Model training"), an unmarked one on the GenAI overview (traces, token usage).
EXPERIMENT_KIND = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"


class MLflowSink:
    """Turns journal records into MLflow runs, params, metrics, artifacts and models."""

    def __init__(self, uri: str, experiment_name: str, state_dir: Path,
                 model_name: str | None, model_loader: str | None = None) -> None:
        self.uri, self.experiment_name, self.model_name = uri, experiment_name, model_name
        self.model_loader, self._warned = model_loader, set[str]()
        self.client, fresh = open_client(uri)
        self.state_dir = Path(state_dir)
        self.map_path = self.state_dir / TRACKING_RUNS
        state = json.loads(files.read_text(self.map_path)) if files.exists(self.map_path) else {}
        # ids recorded in another store (this one made anew, or replaced by hand) are void, and
        # the whole journal goes to this one (TrackingWriter)
        self.fresh = fresh or not self._holds(state)
        self.state: dict[str, Any] = {"trials": {}} if self.fresh or not state else state

    def _holds(self, state: dict[str, Any]) -> bool:
        """Whether this store has the sweep's parent run (or experiment) ``state`` names."""
        from mlflow.exceptions import MlflowException

        try:
            if state.get("parent"):
                self.client.get_run(state["parent"])
            elif state.get("experiment_id"):
                return self.client.get_experiment(state["experiment_id"]).name == \
                    self.experiment_name
        except MlflowException as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return False
            raise
        return True

    # -- state ---------------------------------------------------------------------------
    def _save(self) -> None:
        files.write_atomic(self.map_path, json.dumps(self.state, indent=2))

    @property
    def parent_run_id(self) -> str | None:
        return self.state.get("parent")

    def run_id(self, trial_id: str) -> str | None:
        return self.state["trials"].get(trial_id)

    # -- apply ---------------------------------------------------------------------------
    def apply(self, record: dict[str, Any]) -> None:
        """Apply one record; raise ``TransientTrackingError`` when the server is unreachable."""
        try:
            getattr(self, f"_op_{record['op']}")(record)
        except Exception as exc:  # a TransientTrackingError itself is not is_transient
            if is_transient(exc):
                raise TransientTrackingError(str(exc).splitlines()[0][:300]) from exc
            raise

    def _experiment_id(self) -> str:
        """The experiment's id, created if missing and marked as model training (MLflow's
        UI opens an unmarked experiment on its GenAI overview, not on the runs); an existing
        experiment that says what kind it is keeps its kind."""
        if "experiment_id" not in self.state:
            exp = self.client.get_experiment_by_name(self.experiment_name)
            if exp is None:
                eid = self.client.create_experiment(
                    self.experiment_name, artifact_location=artifacts_beside(self.uri),
                    tags={EXPERIMENT_KIND: MODEL_TRAINING})
            else:
                eid = exp.experiment_id
                if EXPERIMENT_KIND not in exp.tags:
                    self.client.set_experiment_tag(eid, EXPERIMENT_KIND, MODEL_TRAINING)
            self.state["experiment_id"] = eid
            self._save()
        return self.state["experiment_id"]

    def _find_or_create(self, tags: dict[str, str], run_name: str, start_ms: int) -> str:
        """The run with these ``sweeps.*`` tags, or a new one that starts when its record was
        journaled (``start_ms``), not when it reached MLflow: a record sent after an outage, or
        a trial ended before the writer caught up, would otherwise show a duration of
        milliseconds in the runs table."""
        eid = self._experiment_id()
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items()
                             if k.startswith("sweeps."))
        found = self.client.search_runs([eid], filter_string=query, max_results=1)
        if found:
            return found[0].info.run_id
        return self.client.create_run(eid, start_time=start_ms, tags=tags,
                                      run_name=run_name).info.run_id

    def _log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param, RunTag

        clean, cut = [], []
        for key, value in params.items():
            if len(key) > KEY_LIMIT:
                self._warn_once(f"key:{key}", f"param key longer than {KEY_LIMIT} characters "
                                f"skipped: {key[:60]}...")
                continue
            text = "None" if value is None else str(value)
            if len(text) > PARAM_LIMIT:
                text = text[: PARAM_LIMIT - len(TRUNCATED)] + TRUNCATED
                cut.append(key)
            clean.append(Param(key, text))
        for i in range(0, len(clean), 100):
            self.client.log_batch(run_id, params=clean[i:i + 100])
        if cut:
            self.client.log_batch(run_id, tags=[RunTag("sweeps.truncated_params",
                                                       ",".join(cut)[:PARAM_LIMIT])])

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    def _reopen(self, run_id: str, trial: str | None = None) -> None:
        """A closed run goes back to RUNNING: a trial's that ended stopped or failed (a grown
        ``max_t``, a raised budget) loses those labels, a parent its ``sweeps.abort_reason``."""
        run = self.client.get_run(run_id)
        if run.info.status != "RUNNING":
            self.client.update_run(run_id, status="RUNNING")
        if trial is None and "sweeps.abort_reason" in run.data.tags:
            self.client.delete_tag(run_id, "sweeps.abort_reason")
        if trial is not None and run.data.tags.get("sweeps.status") in ("stopped", "error"):
            for key in {"sweeps.stop_reason", "sweeps.error"} & set(run.data.tags):
                self.client.delete_tag(run_id, key)
            self.client.set_tag(run_id, "sweeps.status", "running")
            self.client.update_run(run_id, name=trial)
            self.state.setdefault("names", {}).pop(trial, None)

    def _op_sweep_start(self, r: dict[str, Any]) -> None:
        start = int(r.get("start", 1))
        if self.parent_run_id is None:
            tags = {**r["tags"], "sweeps.role": "parent", "sweeps.sweep_uid": r["sweep_uid"]}
            self.state["parent"] = self._find_or_create(tags, r["sweep_name"], int(r["ts"]))
            self.state["sweep_uid"] = r["sweep_uid"]
            self._save()
        elif start > 1:  # resumed: same parent run; params stay those of the first start
            self._reopen(self.parent_run_id)
            self.client.set_tag(self.parent_run_id, "sweeps.starts", str(start))
            self.client.log_text(self.parent_run_id, r["config_yaml"], f"config.start{start}.yaml")
            return
        run = self.parent_run_id
        self._log_params(run, r["params"])
        self.client.log_text(run, r["config_yaml"], "config.yaml")
        self.client.log_dict(run, r["search_space"], "search_space.json")

    def _op_trial_start(self, r: dict[str, Any]) -> None:
        trial = r["trial"]
        if self.run_id(trial) is None:
            tags = {"mlflow.parentRunId": self.parent_run_id, "sweeps.role": "trial",
                    "sweeps.sweep_uid": self.state["sweep_uid"], "sweeps.trial_id": trial}
            self.state["trials"][trial] = self._find_or_create(tags, trial, int(r["ts"]))
            self._save()
        elif self.state.setdefault("ended", {}).pop(trial, None) is not None:
            self._reopen(self.run_id(trial), trial)  # a trial of an interrupted sweep goes on
            self._save()
        if r.get("rebase"):  # restarted by a PBT exploit: next steps go after the logged ones
            self.state.setdefault("rebase", {})[trial] = True
            self._save()
        self._log_params(self.run_id(trial), r["params"])

    def _op_trial_tags(self, r: dict[str, Any]) -> None:
        """Tags on trial runs, e.g. ``sweeps.pareto`` at the end, ``sweeps.pbt.*`` after an
        exploit (a trial never started in MLflow has no run to tag)."""
        for trial, tags in r["tags"].items():
            run = self.run_id(trial)
            for key, value in tags.items() if run is not None else ():
                self.client.set_tag(run, key, str(value)[:PARAM_LIMIT])

    def _op_metrics(self, r: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        steps = self.state.setdefault("steps", {}).setdefault(r["trial"], {})
        if not isinstance(steps, dict):  # an older sweep's map: one last step per trial
            steps = self.state["steps"][r["trial"]] = {k: steps for k in r["values"]}
        # The report's own step, shifted past what MLflow has once a PBT exploit restarted the
        # trial on a donor's (lower) clock; the shift stays in this sink's state for a resume.
        step, offsets = int(r["step"]), self.state.setdefault("step_offsets", {})
        if self.state.setdefault("rebase", {}).pop(r["trial"], None):
            last = max(steps.values(), default=None)
            if last is not None and step + offsets.get(r["trial"], 0) <= last:
                offsets[r["trial"]] = last + 1 - step
        step += offsets.get(r["trial"], 0)
        metrics = []
        for key, value in r["values"].items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                self._warn_once(f"metric:{key}", f"metric {key!r} is not a number "
                                f"({type(value).__name__}); it is not sent to MLflow")
                continue
            if not math.isfinite(value) and not math.isnan(value):
                value = math.copysign(1.7976931348623157e308, value)
            metrics.append(Metric(key, float(value), int(r["ts"]), step))
        # A resumed trial reports again an epoch MLflow already has (re-run after its last
        # checkpoint, or re-sent after a crash): keep the first point of each metric at each
        # step, never a second one. Per key, so a loop that reports a training loss and then
        # its validation metrics at the same epoch keeps both.
        metrics = [m for m in metrics if steps.get(m.key) is None or step > steps[m.key]]
        if not metrics:
            return
        self.client.log_batch(self.run_id(r["trial"]), metrics=metrics)
        steps.update({m.key: step for m in metrics})
        self._save()

    def _op_system(self, r: dict[str, Any]) -> None:
        """A trial's system metric samples (``sweeps.loop.system_metrics.new_points``)."""
        from mlflow.entities import Metric

        logged = self.state.setdefault("system", {}).setdefault(r["trial"], {})
        points, last = new_points(r["samples"], logged)
        for i in range(0, len(points), 1000):  # MLflow's limit per batch
            self.client.log_batch(self.run_id(r["trial"]), [Metric(*p) for p in points[i:i + 1000]])
        logged.update(last)
        self._save()

    def _op_trial_end(self, r: dict[str, Any]) -> None:
        run = self.run_id(r["trial"])
        for key, value in r.get("tags", {}).items():
            self.client.set_tag(run, key, str(value)[:PARAM_LIMIT])
        if r.get("run_name"):
            self.client.update_run(run, name=r["run_name"])
            self.state.setdefault("names", {})[r["trial"]] = r["run_name"]  # mark_best's
        self.client.set_terminated(run, r["status"], end_time=int(r["ts"]))
        self.state.setdefault("ended", {})[r["trial"]] = r["status"]
        self._save()

    def _op_artifacts(self, r: dict[str, Any]) -> None:
        for path in r["paths"]:
            if files.exists(path):
                with trees.local_copy(path) as local:
                    self.client.log_artifact(self.parent_run_id, str(local), r["artifact_path"])

    def _op_sweep_end(self, r: dict[str, Any]) -> None:
        run = self.parent_run_id
        # No trial run outlives its sweep's run as RUNNING (e.g. one restored by a resume that
        # was interrupted again before the trial started).
        ended = self.state.setdefault("ended", {})
        status = "KILLED" if r.get("status", "FINISHED") == "FINISHED" else r["status"]
        for trial, run_id in self.state["trials"].items():
            if trial in ended:
                continue
            self.client.set_tag(run_id, "sweeps.status", "aborted")
            self.client.set_terminated(run_id, status, end_time=int(r["ts"]))
            ended[trial] = status
        self._save()
        for key, value in r.get("tags", {}).items():
            self.client.set_tag(run, key, str(value)[:PARAM_LIMIT])
        if r.get("summary_csv") and files.exists(r["summary_csv"]):
            with trees.local_copy(r["summary_csv"]) as local:
                self.client.log_artifact(run, str(local))
        for param, share in r.get("importance", {}).items():  # sweeps.report.importance
            self.client.log_metric(run, f"importance.{param}", share, timestamp=int(r["ts"]))
        if best := r.get("best"):
            if self.run_id(best["trial_id"]):
                mark_best(self, best["trial_id"])
            self.client.log_dict(run, best, "best.json")
            self.client.log_metric(run, f"best_{best['metric']}", best["value"],
                                   timestamp=int(r["ts"]), step=best["epoch"])
            # once per best checkpoint: a grown or resumed sweep's best can change
            model_of = model_key(best)
            if self.state.get("model_of") != model_of:
                try:
                    log_best_model(self, best)
                    self.state["model_of"] = model_of
                    self._save()
                except Exception as exc:  # a model that cannot be logged must not leave the
                    if is_transient(exc):  # parent RUNNING; retry only when unreachable
                        raise
                    log.warning("MLflow: best model not logged (%s)", exc)
                    self.client.set_tag(run, "sweeps.model_error", str(exc)[:500])
        self.client.set_terminated(run, r.get("status", "FINISHED"), end_time=int(r["ts"]))

