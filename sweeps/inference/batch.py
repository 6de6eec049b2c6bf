"""Batch inference with a sweep's best model over a Ray Dataset: ``sweeps.predict``.

    import sweeps
    ds = sweeps.predict("outputs/digits", "data/digits.parquet", output="preds/")
    ds.take(3)    # [{'x': ..., 'prediction': 7, 'score': 0.98}, ...]

    sweeps predict outputs/digits --input data/digits.parquet --output preds/    # the CLI

The last step of Ray's batch-inference guide (``map_batches`` over a pool of ``concurrency``
actors, each loading the model once); the columns it adds and what it checks before Ray runs:
docs/running.md#batch-inference-with-the-best-model-sweeps-predict. A model with one output per
row (regression) gets ``prediction`` alone. Output is written to a temporary directory beside
``output`` and renamed into place, so a failure leaves nothing half-written.

Ray: the running instance when ``ray.is_initialized()``; else ``ray_address`` (a cluster) or a
new local instance. Deliberate divergence from "shut down what you start": one this call
starts stays up after success, as Ray Data's auto-start does, since the Dataset lives in it
(the CLI shuts it down); after a failure it is shut down at once.
"""

from __future__ import annotations

import atexit
import logging
import math
import shutil
import uuid
import warnings
from pathlib import Path
from typing import Any

from sweeps.errors import SweepError
from sweeps.inference.bundle import ModelSource, resolve_source
from sweeps.inference.hf import architecture, unsupported
from sweeps.inference.predictor import Predictor

__all__ = ["OUTPUT_COLUMNS", "actor_cpus", "predict"]
OUTPUT_COLUMNS = ("prediction", "label", "score")


def predict(source: str | Path, data: Any, *, output: str | Path | None = None,
            column: str | None = None, batch_size: int = 256, concurrency: int = 1,
            use_gpu: bool | None = None, num_cpus: float | None = None,
            model_loader: str | None = None, tracking_uri: str | None = None,
            ray_address: str | None = None) -> Any:
    """Predict with the model of ``source`` over ``data``; the materialized Dataset.

    Args:
        source: a sweep directory, a checkpoint directory or a model URI, as ``load_best``.
        data: a ``ray.data.Dataset``, a pandas DataFrame, or files (``data.input_files``).
        output: a directory to write the result to as parquet (must not exist, or be empty).
        column: the input column; None: ``sweeps.inference.data.choose_column``'s rule.
        batch_size: rows per model call.
        concurrency: actors, each with its own copy of the model.
        use_gpu: one GPU per actor; None: when the cluster has GPUs.
        num_cpus: CPUs each actor reserves; None: ``actor_cpus``'s choice.
        model_loader: ``module:function`` that rebuilds a loop's own checkpoint format.
        tracking_uri: the MLflow store of a model URI (default: MLflow's current one).
        ray_address: a Ray cluster to join when this process is not connected to one.

    Example:
        >>> ds = predict("outputs/digits", ray.data.from_numpy(x), output="preds")  # doctest: +SKIP
        >>> ds.take(1)[0]["prediction"]  # doctest: +SKIP
        7
    """
    if batch_size < 1 or concurrency < 1:
        raise SweepError(f"predict: batch_size and concurrency must be >= 1 (got {batch_size}, "
                         f"{concurrency})")
    resolved = resolve_source(source, "predict", model_loader, tracking_uri)
    if resolved.transformers:
        arch = architecture(resolved.location) if resolved.form == "transformers" else None
        why = unsupported(resolved.task, resolved.processor, arch)
        if why is not None:
            raise SweepError(f"predict: the Transformers model of {source}: {why}; sweeps.predict "
                             "runs text- and image-classification models (load others with "
                             "sweeps.load_best and run them yourself)")
    if not _is_dataset(data):
        from sweeps.inference.data import input_files

        input_files(data)  # missing or unknown files: one line, before Ray starts
    out = None if output is None else Path(output)
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise SweepError(f"predict: output {out} already exists and is not an empty directory; "
                         "pass a new directory (nothing was written)")
    import ray

    started = not ray.is_initialized()  # join the running Ray, else start (or join an address)
    if started:
        ray.init(address=ray_address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.ERROR)
    try:
        result = _run(resolved, data, column, batch_size, concurrency, use_gpu, num_cpus,
                      reads=not _is_dataset(data))
        if out is not None:  # parquet into a temporary sibling, renamed into place when complete
            out.parent.mkdir(parents=True, exist_ok=True)
            partial = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
            try:
                result.write_parquet(str(partial))
                partial.replace(out)  # over an empty directory too (POSIX rename)
            finally:
                shutil.rmtree(partial, ignore_errors=True)
    except BaseException:
        if started:
            ray.shutdown()
        raise
    if started:
        atexit.register(ray.shutdown)
    return result


def _is_dataset(data: Any) -> bool:
    module = type(data).__module__
    return module.startswith("ray.data") or module.startswith("pandas")


def actor_cpus(cluster_cpus: float, concurrency: int, num_cpus: float | None = None,
               reads: bool = True) -> float:
    """CPUs per actor: ``num_cpus``, or 1 shrunk so the pool leaves a CPU (half the cluster
    on a 1-CPU machine) for the read tasks, which get what is left (``read_input``). Found
    the hard way: on 2 CPUs, two 1-CPU actors over a parquet file wait forever, Ray Data's
    read task never gets a CPU (Ray 2.60). ``SweepError`` when explicit ``num_cpus`` do not
    fit, or (``reads``) leave nothing for the reads.

    Example:
        >>> actor_cpus(2, 1), actor_cpus(2, 2), actor_cpus(2, 3), actor_cpus(16, 4)
        (1.0, 0.5, 0.33, 1.0)
    """
    if num_cpus is None:
        share = min(1.0, max(cluster_cpus - 1, cluster_cpus / 2) / concurrency)
        return max(0.01, math.floor(share * 100) / 100)
    need = num_cpus * concurrency
    if need > cluster_cpus or (reads and cluster_cpus - need < 0.01):
        more = ", and reading the input needs some more" if reads else ""
        raise SweepError(f"predict: {concurrency} actor(s) x {num_cpus:g} CPU need {need:g} of "
                         f"the cluster's {cluster_cpus:g} CPUs{more}; lower concurrency or "
                         "num_cpus (or leave num_cpus out: it is then sized to fit)")
    return num_cpus


def _run(resolved: ModelSource, data: Any, column: str | None, batch_size: int,
         concurrency: int, use_gpu: bool | None, num_cpus: float | None, reads: bool) -> Any:
    import ray
    from ray.data import ActorPoolStrategy

    from sweeps.inference.data import choose_column, read_input

    resources = ray.cluster_resources()
    gpu = bool(resources.get("GPU", 0) >= 1) if use_gpu is None else use_gpu
    cluster_cpus = resources.get("CPU", 0)
    cpus = actor_cpus(cluster_cpus, concurrency, num_cpus, reads)
    try:
        ds = read_input(data, read_cpus=min(1.0, round(cluster_cpus - cpus * concurrency, 2)))
        names = list(ds.columns())
    except SweepError:
        raise
    except Exception as exc:
        raise SweepError(f"predict: cannot read the input: {_root_cause(exc)}") from exc
    chosen = choose_column(names, resolved.processor, column)
    clash = [c for c in OUTPUT_COLUMNS if c in names]
    if clash:
        raise SweepError(f"predict: the data already has column(s) {', '.join(clash)}, which "
                         "predict adds; rename or drop them")
    # compute=ActorPoolStrategy(size=N): map_batches(concurrency=N) is deprecated since 2.51.
    # max_restarts=0: a failed batch fails predict with its error; and without it Ray's core
    # worker logs an error line for every actor pool ("constructor arguments in the object
    # store and max_restarts > 0", ray#53727). Ray 2.60 takes it only as a deprecated extra
    # remote argument (its own source comment names map_batches(..., max_restarts=0)).
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
        mapped = ds.map_batches(
            Predictor, batch_size=batch_size, batch_format="numpy",
            compute=ActorPoolStrategy(size=concurrency), num_cpus=cpus,
            num_gpus=1 if gpu else 0, max_restarts=0,
            fn_constructor_kwargs={"source": resolved, "column": chosen, "use_gpu": gpu})
    try:
        return mapped.materialize()
    except SweepError:
        raise
    except Exception as exc:
        raise SweepError(f"predict: the model failed on the data: {_root_cause(exc)}") from exc


def _root_cause(exc: BaseException) -> str:
    """``Type: first line`` of the innermost exception (Ray wraps the actor's in two)."""
    seen = exc
    while ((inner := getattr(seen, "cause", None) or seen.__cause__) is not None
           and inner is not seen):
        seen = inner
    text = str(seen).strip().splitlines()
    return f"{type(seen).__name__}: {text[0] if text else ''}"[:400]
