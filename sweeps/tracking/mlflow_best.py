"""The sweep's best model, logged into the best trial's MLflow run at the sweep's end.

    log_best_model(sink, best)     # sweeps.tracking.mlflow_sink.MLflowSink, at sweep_end

The form follows the checkpoint: a PyTorch model (``sweeps.tracking.mlflow_model``), a
Transformers pipeline (``sweeps.tracking.mlflow_transformers``), or the checkpoint
directory's files as artifacts; registered under ``tracking.model_name`` when set.
"""

from __future__ import annotations

from typing import Any

from sweeps.loop.checkpoint import model_form
from sweeps.storage import trees
from sweeps.storage.location import uri_of
from sweeps.tracking.mlflow_model import log_pytorch_model
from sweeps.tracking.mlflow_transformers import log_transformers_model

__all__ = ["log_best_model", "mark_best", "model_key"]


def log_best_model(sink: Any, best: dict[str, Any]) -> None:
    """The best checkpoint into the best trial's run, in the form ``best["model_form"]``
    names (``sweeps.loop.checkpoint.model_form``): a PyTorch model or, for a Hugging
    Face checkpoint, a Transformers pipeline (``mlflow.transformers``), registered under
    ``model_name`` when set; or the checkpoint directory's files as artifacts."""
    if not best.get("checkpoint") or best.get("model_form") == "none":
        return
    with trees.local_copy(best["checkpoint"]) as local:  # downloaded from an object store
        form = best.get("model_form") or model_form(local, sink.model_loader)
        _log(sink, {**best, "checkpoint": str(local),
                    "checkpoint_uri": uri_of(best["checkpoint"])}, form)


def _log(sink: Any, best: dict[str, Any], form: str) -> None:
    run_id = sink.run_id(best["trial_id"])
    if form == "files":
        sink.client.log_artifacts(run_id, best["checkpoint"], "best_checkpoint")
        sink.client.set_tag(run_id, "sweeps.best_checkpoint", "best_checkpoint/")
        sink.state["model_logged"] = f"runs:/{run_id}/best_checkpoint"
    elif form == "transformers":
        sink.state["model_logged"] = log_transformers_model(sink.uri, run_id, best, sink.model_name)
    else:
        sink.state["model_logged"] = log_pytorch_model(sink.uri, run_id, best,
                                                       sink.model_loader, sink.model_name)
    sink._save()  # which checkpoint model_logged is: the caller records it (model_of)


def mark_best(sink: Any, trial_id: str) -> None:
    """Tag ``trial_id``'s run as the best (named ``<trial> best``). A run an earlier start of
    the sweep marked (a grown or resumed sweep's best moved) is unmarked: ``sweeps.best=false``,
    no ``sweeps.best_checkpoint``, and the name its trial's end gave it back."""
    earlier = [sink.state["best_trial"]] if sink.state.get("best_trial") else [
        r.data.tags["sweeps.trial_id"] for r in sink.client.search_runs(  # marked by older code
            [sink.state["experiment_id"]], "tags.`sweeps.best` = 'true' and "
            f"tags.`mlflow.parentRunId` = '{sink.parent_run_id}'")]
    for trial in earlier:
        run = sink.run_id(trial)
        if trial != trial_id and run:
            sink.client.set_tag(run, "sweeps.best", "false")
            if "sweeps.best_checkpoint" in sink.client.get_run(run).data.tags:
                sink.client.delete_tag(run, "sweeps.best_checkpoint")
            sink.client.update_run(run, name=sink.state.get("names", {}).get(trial, trial))
    best_run = sink.run_id(trial_id)
    sink.client.set_tag(best_run, "sweeps.best", "true")
    sink.client.update_run(best_run, name=f"{trial_id} best")
    sink.state["best_trial"] = trial_id
    sink._save()


def model_key(best: dict[str, Any]) -> list[str | None]:
    """What the logged model is of: the best trial and its checkpoint's URI (a stand-in path
    of an object store names a local temporary directory, which differs between hosts)."""
    checkpoint = best.get("checkpoint")
    return [best["trial_id"], uri_of(checkpoint) if checkpoint else None]
