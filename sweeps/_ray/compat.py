"""Check, in seconds and without a cluster, that this Ray has the internals sweeps relies on.

    from sweeps._ray import compat
    compat.check()      # raises RayIncompatible: one line naming the Ray version and what changed
    compat.problems()   # [] on a supported Ray; else one sentence per changed internal

Run by the sweep before it starts Ray (a changed internal fails the sweep there, never as a
hang mid-sweep) and by ``tests/unit/ray_adapter/test_ray_compat.py`` (the canary a Ray upgrade trips
first). Each probe imports one private symbol the adapter uses and checks the attributes,
parameters and constants the adapter relies on, and the four facts of Ray's source whose change
would hang a sweep or silently go wrong; the rest of what it reads in Ray's source (a change
fails loudly, or has a fallback) only the canary checks (``tests/unit/ray_adapter/source_probes``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import logging
from collections.abc import Callable

from sweeps import protocol
from sweeps._ray.compat_probes import (
    _attrs,
    _equals,
    _fields,
    _params,
    _source_mentions,
    _source_sets,
)
from sweeps.errors import RayIncompatible

__all__ = ["check", "problems", "degraded", "RayIncompatible", "SOFT", "TESTED"]

log = logging.getLogger(__name__)
TESTED = ">=2.57.1,<2.61"  # the Ray releases the suite ran on: docs/development.md#ray-versions


def _probes() -> dict[str, Callable[[], None]]:
    from sweeps._ray import logs, placement, shipping, train, train_fn, train_snapshot, tune

    kv = "ray.experimental.internal_kv:"
    wg = placement.WORKER_GROUP_MODULE.rpartition(".")[0]
    constants = "ray.train.v2._internal.constants:"
    (cleaner_module, cleaner), (datasets_module, datasets) = train.DEFAULT_CALLBACKS_TO_DROP
    return {
        # tune.py: reopen_search (the budget), then kv.py
        "SearchAlgorithm._finished": _attrs("ray.tune.search.search_algorithm:SearchAlgorithm",
                                            "_finished", "set_finished", "is_finished"),
        "SearchGenerator keeps _finished": _source_sets(  # else a raised budget adds nothing
            "ray.tune.search.search_generator:SearchGenerator", "_finished"),
        "internal_kv put": _params(kv + "_internal_kv_put", "key", "value", "overwrite",
                                   "namespace"),
        "internal_kv get": _params(kv + "_internal_kv_get", "key", "namespace"),
        "internal_kv list": _params(kv + "_internal_kv_list", "prefix", "namespace"),
        "internal_kv del": _params(kv + "_internal_kv_del", "key", "del_by_prefix", "namespace"),
        # placement.py
        "WorkerGroupCallback": _attrs(
            "ray.train.v2._internal.execution.callback:WorkerGroupCallback",
            "before_worker_group_start", "after_worker_group_start"),
        "worker group creates its placement group": _attrs(placement.WORKER_GROUP_MODULE,
                                                           "placement_group"),
        "worker group state": _fields(f"{wg}.state:WorkerGroupState", "placement_group_handle"),
        "worker group placement handle": _attrs(
            f"{wg}.placement_group_handle:PlacementGroupHandle", "placement_group"),
        "WorkerGroup.get_worker_group_state": _attrs(f"{placement.WORKER_GROUP_MODULE}:WorkerGroup",
                                                     "get_worker_group_state"),
        "PlacementGroupID.from_hex": _attrs("ray._raylet:PlacementGroupID", "from_hex"),
        "actors by id": _params("ray._private.state:actors", "actor_id"),
        "the head node's resource": _equals("ray._common.constants:HEAD_NODE_RESOURCE_NAME",
                                            placement.HEAD_NODE_RESOURCE),
        # sweeps.search.decisions reads the scheduler's log without Ray
        "Tune's STOP decision": _equals("ray.tune.schedulers:TrialScheduler.STOP",
                                        protocol.TUNE_STOP),
        # train.py
        "TorchTrainer default callbacks": _attrs("ray.train.torch:TorchTrainer",
                                                 "_create_default_callbacks"),
        "Train's cleaner callback": _attrs(cleaner_module, cleaner),
        "Train's datasets callback": _attrs(datasets_module, datasets),
        "Train's health-check env var": _equals(constants + "HEALTH_CHECK_INTERVAL_S_ENV_VAR",
                                                train.HEALTH_CHECK_ENV),
        "Train's start-timeout env var": _equals(
            constants + "WORKER_GROUP_START_TIMEOUT_S_ENV_VAR", train.START_TIMEOUT_ENV),
        "Train's preemption-watcher env var": _equals(
            constants + "ENABLE_PREEMPTION_WATCHER_ENV_VAR", train.PREEMPTION_WATCHER_ENV),
        # else a stopped trial's report would block Train's controller for good
        "Tune's report callback puts into its queue": _source_mentions(
            "ray.tune.integration.ray_train:TuneReportCallback.after_report",
            f"self.{train.REPORT_QUEUE_ATTR}.put("),
        "Tune's report callback": _params(
            "ray.tune.integration.ray_train:TuneReportCallback.after_report", "run_context",
            "metrics", "checkpoint"),
        # train_fn.py
        "Train's local-mode worker API": _params(
            f"{train_fn.TRAIN_FN_UTILS_MODULE}:LocalTrainFnUtils.__init__", "experiment_name",
            "dataset_shards"),
        "Train's worker API methods": _attrs(
            f"{train_fn.TRAIN_FN_UTILS_MODULE}:LocalTrainFnUtils", "report", "get_checkpoint",
            "get_dataset_shard", "get_context", "is_distributed", "get_all_reported_checkpoints"),
        "Train's local-mode context": _params(
            f"{train_fn.CONTEXT_MODULE}:LocalTrainContext.__init__", "experiment_name",
            "world_size", "world_rank", "local_rank", "local_world_size", "node_rank"),
        "get_devices asks is_distributed": _source_mentions(  # else a wrong device, silently
            "ray.train.v2.torch.train_loop_utils:get_devices", "is_distributed()"),
        "Train's tensor check": _attrs(train_fn.TENSOR_CHECK.partition(":")[0],
                                       train_fn.TENSOR_CHECK.partition(":")[2]),
        "Train's worker API setter": _attrs(train_fn.TRAIN_FN_UTILS_MODULE, "set_train_fn_utils",
                                            "get_train_fn_utils"),
        # tune_fn.py: Tune's function API reads one session global, a view replaces it
        "Tune's session global": _attrs(train.SESSION_MODULE, "_session", "get_session"),
        "Tune's session answers": _attrs(f"{train.SESSION_MODULE}:_TrainSession", "report",
                                         "trial_name", "trial_id", "trial_dir",
                                         "experiment_name", "trial_resources"),
        "Tune's trial printer": _attrs("ray.tune.progress_reporter:TrialProgressCallback",
                                       "_print"),
        # train_snapshot.py
        "Train's run snapshot": _fields(
            "ray.train.v2._internal.execution.checkpoint.checkpoint_manager:"
            "_CheckpointManagerState", *train_snapshot.ALL_KEYS),
        # tune.py
        "TunerInternal": _attrs("ray.tune.impl.tuner_internal:TunerInternal", "get_run_config"),
        "TunerInternal._tune_config": _source_sets(  # else the trial limit stops following
            "ray.tune.impl.tuner_internal:TunerInternal", "_tune_config"),  # the cluster

        "Tuner.restore": _params("ray.tune:Tuner.restore", "resume_unfinished",
                                 "resume_errored", "param_space"),
        "Trial.set_config": _params("ray.tune.experiment:Trial.set_config", "config"),
        # tune_grow.py: growing a sweep in place
        "SearchGenerator.set_state": _params(
            "ray.tune.search.search_generator:SearchGenerator.set_state", "state"),
        "Trial.init_local_path": _attrs("ray.tune.experiment:Trial", "init_local_path"),
        # tune_state.py, tune_state_file.py
        "TuneController.save_to_dir": _attrs(
            "ray.tune.execution.tune_controller:TuneController", "save_to_dir"),
        "Tune's state file name": _attrs(
            "ray.tune.execution.tune_controller:TuneController", "experiment_state_file_name"),
        "Tune's storage context paths": _attrs(
            "ray.train._internal.storage:StorageContext", "experiment_driver_staging_path",
            "experiment_fs_path"),
        # tune.py
        "Tune's experiment-state file": _equals(
            "ray.tune.execution.tune_controller:TuneController.CKPT_FILE_TMPL",
            tune.STATE_GLOB.replace("*", "{}")),
        # shipping.py
        "Ray's pathspec": _attrs("ray._private.thirdparty.pathspec:PathSpec", "from_lines"),
        "Ray's gRPC message limit": _equals("ray._private.ray_constants:GRPC_CPP_MAX_MESSAGE_SIZE",
                                            shipping.GRPC_MAX_MESSAGE_SIZE),
        "submitted job's env var": _equals(
            "ray._private.runtime_env.constants:RAY_JOB_CONFIG_JSON_ENV_VAR",
            shipping.JOB_CONFIG_ENV),
        # logs.py
        "Ray's auth logger's module": _attrs(logs.RAY_LOGGERS[1]),
        "raylet notices printed by the driver": _params(
            f"{logs.STDSTREAM_MODULE}:print_to_stdstream", "data", "ignore_prefix"),
    }


# Internals whose adapter function has a fallback: a Ray without them runs, degraded, with a
# warning (the two left-out callbacks, the group recorded at creation, raylet notices, trial
# drivers on the head node, the faster state save, a sweep grown in place).
SOFT = frozenset({"Train's cleaner callback", "Train's datasets callback",
                  "worker group creates its placement group",
                  "raylet notices printed by the driver", "the head node's resource",
                  "Tune's state file name",
                  "SearchGenerator.set_state", "Trial.init_local_path"})  # the last two: tune_grow


@functools.cache
def _findings() -> tuple[tuple[str, str], ...]:
    found = []
    for name, probe in _probes().items():
        try:
            probe()
        except Exception as exc:  # ImportError, AttributeError, AssertionError, OSError, ...
            found.append((name, f"{name}: {type(exc).__name__}: {exc}"))
    return tuple(found)


def problems() -> tuple[str, ...]:
    """One sentence per internal this Ray lacks or changed that sweeps cannot run without."""
    return tuple(text for name, text in _findings() if name not in SOFT)


def degraded() -> tuple[str, ...]:
    """One sentence per internal this Ray lacks whose adapter function has a fallback."""
    return tuple(text for name, text in _findings() if name in SOFT)


def check() -> None:
    """Raise ``RayIncompatible`` (one line) unless this Ray has every internal sweeps uses."""
    for text in degraded():
        log.warning("ray %s: %s; sweeps runs without it (see sweeps._ray)",
                    importlib.metadata.version("ray"), text)
    found = problems()
    if found:
        version = importlib.metadata.version("ray")
        raise RayIncompatible(
            f"ray {version} is not supported by this sweeps (tested: ray{TESTED}): "
            f"{len(found)} internal(s) changed, first: {found[0]}; install a tested Ray, e.g. "
            f"pip install 'ray[default,tune,train]{TESTED}'")
