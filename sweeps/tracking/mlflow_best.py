"""The sweep's best model, logged into the best trial's MLflow run at the sweep's end.

    log_best_model(sink, best)     # sweeps.tracking.mlflow_sink.MLflowSink, at sweep_end

The form follows the checkpoint: a PyTorch model (``sweeps.tracking.mlflow_model``), a
Transformers pipeline (``sweeps.tracking.mlflow_transformers``), or the checkpoint
directory's files as artifacts; registered under ``tracking.model_name`` when set.
"""

from __future__ import annotations

from typing import Any

from sweeps import files
from sweeps.loop.checkpoint import model_form
from sweeps.storage.location import uri_of
from sweeps.tracking.mlflow_model import log_pytorch_model
from sweeps.tracking.mlflow_transformers import log_transformers_model

__all__ = ["log_best_model", "mark_best"]


def log_best_model(sink: Any, best: dict[str, Any]) -> None:
    """The best checkpoint into the best trial's run, in the form ``best["model_form"]``
    names (``sweeps.loop.checkpoint.model_form``): a PyTorch model or, for a Hugging
    Face checkpoint, a Transformers pipeline (``mlflow.transformers``), registered under
    ``model_name`` when set; or the checkpoint directory's files as artifacts."""
    if best.get("checkpoint") and files.is_remote(best["checkpoint"]):
        with files.local_copy(best["checkpoint"]) as local:  # from the object store
            log_best_model(sink, {**best, "checkpoint": str(local),
                                  "checkpoint_uri": uri_of(best["checkpoint"])})
        return
    form = best.get("model_form") or model_form(best["checkpoint"], sink.model_loader)
    run_id = sink.run_id(best["trial_id"])
    if form == "none":
        return
    if form == "files":
        sink.client.log_artifacts(run_id, best["checkpoint"], "best_checkpoint")
        sink.client.set_tag(run_id, "sweeps.best_checkpoint", "best_checkpoint/")
        sink.state.update(model_logged=f"runs:/{run_id}/best_checkpoint",
                          model_trial=best["trial_id"])
        sink._save()
        return
    if form == "transformers":
        sink.state["model_logged"] = log_transformers_model(sink.uri, run_id, best,
                                                            sink.model_name)
    else:
        sink.state["model_logged"] = log_pytorch_model(sink.uri, run_id, best,
                                                       sink.model_loader, sink.model_name)
    sink.state["model_trial"] = best["trial_id"]  # which trial model_logged is
    sink._save()


def mark_best(sink: Any, trial_id: str) -> None:
    """Tag ``trial_id``'s run as the best (named ``<trial> best``); the run an earlier start
    of the sweep marked, if another (a grown or resumed sweep's best changed), gets its tag
    and name back."""
    earlier = sink.state.get("best")  # [trial, the name its run had before]
    if earlier is None and sink.state.get("model_trial"):  # marked before "best" was kept
        earlier = [sink.state["model_trial"]] * 2
    if earlier and earlier[0] != trial_id and sink.run_id(earlier[0]):
        sink.client.set_tag(sink.run_id(earlier[0]), "sweeps.best", "false")
        sink.client.update_run(sink.run_id(earlier[0]), name=earlier[1])
    best_run = sink.run_id(trial_id)
    if not earlier or earlier[0] != trial_id:
        sink.state["best"] = [trial_id, sink.client.get_run(best_run).info.run_name]
        sink._save()
    sink.client.set_tag(best_run, "sweeps.best", "true")
    sink.client.update_run(best_run, name=f"{trial_id} best")
