"""Ray Datasets a sweep builds once, on the driver, and hands to every trial's TorchTrainer.

    datasets = build_datasets(cfg.experiment.datasets)   # the grammar: sweeps.config.datasets

``sweeps.config.datasets.check_datasets`` checks the entries at validation. ``build_datasets``
(Ray up, before Tune starts) calls or reads each, checks it is a ``ray.data.Dataset`` with rows, and
materializes it: the pipeline runs once per sweep (not once per trial) and its blocks stay in the
object store, so a trial's workers read their ``streaming_split`` shard with no Ray Data tasks and
so no CPUs beyond the trial's own workers (why that matters, and how the workers read them:
docs/experiments.md#ray-data-datasets-built-once-read-by-every-trial). A dataset larger than the
object store spills to disk.
"""

from __future__ import annotations

from typing import Any

from sweeps.config.datasets import check_datasets, reader_of
from sweeps.errors import ConfigError, SweepError

__all__ = ["build_datasets"]


def build_datasets(entries: dict[str, Any]) -> dict[str, Any]:
    """Each dataset built and materialized once (Ray must be up), by name; {} without any."""
    if not entries:
        return {}
    import ray.data

    out = {}
    for src, fn in check_datasets(entries).values():
        try:
            ds = (fn(**src.kwargs) if fn is not None
                  else getattr(ray.data, reader_of(src.path or ""))(src.path))
        except Exception as exc:
            raise SweepError(f"{src.key}: {src.describe()} raised {type(exc).__name__}: "
                             f"{exc}") from exc
        if not isinstance(ds, ray.data.Dataset):
            raise ConfigError(src.key, src.describe(), f"returned a {type(ds).__name__}, "
                              "not a ray.data.Dataset",
                              "return one, e.g. ray.data.from_items(rows) or "
                              "ray.data.read_parquet(path)")
        ds = ds.materialize()
        if ds.count() == 0:
            raise ConfigError(src.key, src.describe(), "has no rows",
                              "check the files or the function's filter")
        out[src.name] = ds
    return out
