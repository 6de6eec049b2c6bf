"""Check, in seconds and without a cluster, that this Ray has every internal sweeps relies on.

    from sweeps._ray import compat
    compat.check()      # raises RayIncompatible: one line naming the Ray version and what changed
    compat.problems()   # [] on a supported Ray; else one sentence per changed internal

Run by the sweep before it starts Ray (a changed internal fails the sweep there, never as a
hang mid-sweep) and by ``tests/unit/ray_adapter/test_ray_compat.py`` (the canary a Ray upgrade trips
first). Each probe imports one private symbol the adapter uses and checks the attributes and
parameters the adapter's functions rely on; the list is the adapter's inventory.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable

from sweeps.errors import RayIncompatible

__all__ = ["check", "problems", "RayIncompatible", "PROBES", "TESTED"]

TESTED = ">=2.58.1,<2.61"  # the Ray releases the suite ran on (see README, "Ray versions")


def _symbol(path: str) -> object:
    """The object at ``module:Attr.attr`` (or the module itself)."""
    module, _, dotted = path.partition(":")
    obj: object = importlib.import_module(module)
    for part in dotted.split(".") if dotted else []:
        obj = getattr(obj, part)
    return obj


def _params(path: str, *names: str) -> Callable[[], None]:
    def probe() -> None:
        params = inspect.signature(_symbol(path)).parameters
        missing = [n for n in names if n not in params]
        if missing:
            raise AssertionError(f"{path} takes no {', '.join(missing)}")
    return probe


def _attrs(path: str, *names: str) -> Callable[[], None]:
    def probe() -> None:
        obj = _symbol(path)
        missing = [n for n in names if not hasattr(obj, n)]
        if missing:
            raise AssertionError(f"{path} has no {', '.join(missing)}")
    return probe


def _source_sets(path: str, *attributes: str) -> Callable[[], None]:
    """The class at ``path`` assigns each of ``self.<attribute> =`` in its own methods."""
    def probe() -> None:
        source = inspect.getsource(_symbol(path))
        missing = [a for a in attributes if f"self.{a} =" not in source
                   and f"self.{a}: " not in source]
        if missing:
            raise AssertionError(f"{path} no longer sets self.{', self.'.join(missing)}")
    return probe


def _fields(path: str, *names: str) -> Callable[[], None]:
    """A dataclass or pydantic model at ``path`` has each of the fields ``names``."""
    def probe() -> None:
        cls = _symbol(path)
        known = set(getattr(cls, "model_fields", None) or getattr(cls, "__fields__", None)
                    or getattr(cls, "__dataclass_fields__", None) or {})
        missing = [n for n in names if n not in known]
        if missing:
            raise AssertionError(f"{path} has no field {', '.join(missing)}")
    return probe


_KV = "ray.experimental.internal_kv:"
_WG = "ray.train.v2._internal.execution.worker_group"
PROBES: dict[str, Callable[[], None]] = {
    # kv.py
    "internal_kv put": _params(_KV + "_internal_kv_put", "key", "value", "overwrite", "namespace"),
    "internal_kv get": _params(_KV + "_internal_kv_get", "key", "namespace"),
    "internal_kv list": _params(_KV + "_internal_kv_list", "prefix", "namespace"),
    "internal_kv del": _params(_KV + "_internal_kv_del", "key", "del_by_prefix", "namespace"),
    # placement.py
    "WorkerGroupCallback": _attrs("ray.train.v2._internal.execution.callback:WorkerGroupCallback",
                                  "before_worker_group_start", "after_worker_group_start"),
    "worker group creates its placement group": _attrs(f"{_WG}.worker_group", "placement_group"),
    "worker group state": _fields(f"{_WG}.state:WorkerGroupState", "placement_group_handle"),
    "worker group placement handle": _attrs(
        f"{_WG}.placement_group_handle:PlacementGroupHandle", "placement_group"),
    "WorkerGroup.get_worker_group_state": _attrs(f"{_WG}.worker_group:WorkerGroup",
                                                 "get_worker_group_state"),
    "PlacementGroupID.from_hex": _attrs("ray._raylet:PlacementGroupID", "from_hex"),
    "actors by id": _params("ray._private.state:actors", "actor_id"),
    # train.py
    "TorchTrainer default callbacks": _attrs("ray.train.torch:TorchTrainer",
                                             "_create_default_callbacks"),
    "Train's cleaner callback": _attrs("ray.train.v2._internal.callbacks.placement_group_callback",
                                       "PlacementGroupCleanerCallback"),
    "Train's datasets callback": _attrs("ray.train.v2._internal.callbacks.datasets",
                                        "DatasetsCallback"),
    "trial session": _attrs("ray.train._internal.session", "get_session"),
    "trial session queues": _source_sets("ray.train._internal.session:_TrainSession",
                                         "result_queue", "_inter_actor_queue"),
    "Tune's report callback": _attrs("ray.tune.integration.ray_train:TuneReportCallback",
                                     "after_report"),
    "Train's run snapshot": _fields(
        "ray.train.v2._internal.execution.checkpoint.checkpoint_manager:_CheckpointManagerState",
        "checkpoint_results", "checkpoint_report_indices", "latest_checkpoint_result",
        "pending_training_results", "pending_validation_specs"),
    # tune.py
    "Tuner._local_tuner": _source_sets("ray.tune:Tuner", "_local_tuner"),
    "TunerInternal": _attrs("ray.tune.impl.tuner_internal:TunerInternal", "get_run_config"),
    "TunerInternal._tune_config": _source_sets("ray.tune.impl.tuner_internal:TunerInternal",
                                               "_tune_config"),
    "Tuner.restore": _params("ray.tune:Tuner.restore", "resume_unfinished", "resume_errored",
                             "param_space"),
    # shipping.py
    "Ray's pathspec": _attrs("ray._private.thirdparty.pathspec:PathSpec", "from_lines"),
}


@functools.cache
def problems() -> tuple[str, ...]:
    """One sentence per internal this Ray lacks or changed ((): all present)."""
    found = []
    for name, probe in PROBES.items():
        try:
            probe()
        except Exception as exc:  # ImportError, AttributeError, AssertionError, ...
            found.append(f"{name}: {type(exc).__name__}: {exc}")
    return tuple(found)


def check() -> None:
    """Raise ``RayIncompatible`` (one line) unless this Ray has every internal sweeps uses."""
    found = problems()
    if found:
        import importlib.metadata

        version = importlib.metadata.version("ray")
        raise RayIncompatible(
            f"ray {version} is not supported by this sweeps (tested: ray{TESTED}): "
            f"{len(found)} internal(s) changed, first: {found[0]}; install a tested Ray, e.g. "
            f"pip install 'ray[default,tune,train]{TESTED}'")
