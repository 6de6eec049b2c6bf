"""Log a Hugging Face best checkpoint to MLflow with the transformers flavor, offline.

    model_uri = log_transformers_model(uri, run_id, best, model_name)
    mlflow.transformers.load_model("models:/hf_text/1")              # a pipeline
    mlflow.pyfunc.load_model("models:/hf_text/1").predict(["a text"])  # label, score

Used by ``sweeps.tracking.mlflow_sink`` at the sweep's end for a checkpoint in the
``transformers`` form (``sweeps.loop.checkpoint.hf_checkpoint_dir``). The model and its
tokenizer or image processor are logged as a pipeline of the head's task
(``text-classification``, ``image-classification``), so it loads back in one call.

What makes it work with no network, found by running it with ``HF_HUB_OFFLINE=1``:
``pip_requirements`` is given, because MLflow's default requirement inference pins
``torchvision`` for every PyTorch model and fails when it is not installed (MLflow 3.17); the
model-card lookup on the Hub fails on a local path (MLflow warns and goes on; the warning is
silenced here with MLflow's other notes). MLflow's image pipeline turns every image into RGB, so
an image model logged this way predicts through ``pyfunc`` only with ``num_channels=3``
(``sweeps.predict`` feeds one-channel models itself).
"""

from __future__ import annotations

from typing import Any

# Up a layer on purpose: the Hugging Face checkpoint format is inference's (it loads it).
from sweeps.inference.hf import (
    architecture,
    load_pretrained,
    offline,
    processor_kind,
    quiet_transformers,
    task_of,
    unsupported,
)
from sweeps.loop.checkpoint import hf_checkpoint_dir
from sweeps.tracking.mlflow_model import model_in_runs_experiment, pinned, quiet_model_logging
from sweeps.tracking.setup import using_tracking_uri

__all__ = ["log_transformers_model"]


def log_transformers_model(uri: str, run_id: str, best: dict[str, Any],
                           model_name: str | None) -> str:
    """Log ``best["checkpoint"]`` (a Transformers checkpoint) as the model of run ``run_id``,
    registered as ``model_name`` when set; return its model URI. Raises ``ValueError`` for a
    head sweeps does not log (the sink then records why on the parent run)."""
    directory = hf_checkpoint_dir(best["checkpoint"])
    if directory is None:
        raise ValueError(f"{best['checkpoint']} holds no Transformers config.json")
    arch = architecture(directory)
    task = task_of(arch)
    model, processor = load_pretrained(directory)
    why = unsupported(task, processor, arch)
    if why is not None:
        raise ValueError(f"the Transformers checkpoint {directory}: {why}; sweeps logs text- "
                         "and image-classification models with their processor")
    import mlflow.transformers

    requirements = ["transformers", "torch", "accelerate", "mlflow", "numpy",
                    "tokenizers" if task == "text-classification" else "pillow"]
    with using_tracking_uri(uri), offline(), quiet_model_logging(), quiet_transformers():
        info = mlflow.transformers.log_model(
            transformers_model={"model": model, processor_kind(directory): processor},
            task=task, name="model", run_id=run_id, model_id=model_in_runs_experiment(uri, run_id),
            registered_model_name=model_name, pip_requirements=pinned(requirements),
            metadata={"checkpoint": best["checkpoint"], "architecture": arch or ""},
        )
    return info.model_uri
