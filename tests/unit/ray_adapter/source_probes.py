"""What the adapter reads in Ray's source text, checked by the canary alone (not at a sweep's
start, ``sweeps._ray.compat``): that a class still sets an attribute in its own methods, that a
function still makes a call. A change to any of these fails loudly in the trial that meets it,
or leaves a fallback working (what would hang a sweep or silently do the wrong thing stays in
``compat``'s start-up check). A Ray edit here trips this suite; the fix is in the adapter.

    python -m pytest tests/unit/ray_adapter/test_ray_compat.py -k source
"""

from __future__ import annotations

from collections.abc import Callable

from sweeps._ray import train, train_fn, tune, tune_state
from sweeps._ray.compat_probes import _source_mentions, _source_sets


def source_probes() -> dict[str, Callable[[], None]]:
    """Each probe by the name of what it checks (as ``sweeps._ray.compat``'s)."""
    return {
        "TorchTrainer datasets": _source_sets(
            "ray.train.v2.api.data_parallel_trainer:DataParallelTrainer", "datasets"),
        "trial session queues": _source_sets(f"{train.SESSION_MODULE}:_TrainSession",
                                             "result_queue", "_inter_actor_queue"),
        "Tune's report callback queue": _source_sets(
            "ray.tune.integration.ray_train:TuneReportCallback", train.REPORT_QUEUE_ATTR),
        "Train's local-mode worker API keeps its context": _source_sets(
            f"{train_fn.TRAIN_FN_UTILS_MODULE}:LocalTrainFnUtils", "_context"),
        "Tune session's world_rank": _source_sets(f"{train.SESSION_MODULE}:_TrainSession",
                                                  "world_rank"),
        "Tune's reuse wait env var": _source_mentions(
            "ray.tune.trainable.function_trainable:FunctionTrainable.reset_config",
            tune.THREAD_TIMEOUT_ENV),
        "Tune-session check reads world_rank": _source_mentions(
            "ray.tune.trainable.trainable_fn_utils:_in_tune_session", "world_rank is None"),
        "Tuner._local_tuner": _source_sets("ray.tune:Tuner", "_local_tuner"),
        "resizable random search": _source_mentions(
            "ray.tune.search.basic_variant:BasicVariantGenerator.next_trial",
            "self.max_concurrent"),
        "resizable ConcurrencyLimiter": _source_mentions(
            "ray.tune.search:ConcurrencyLimiter.suggest", "self.max_concurrent"),
        "SearchGenerator's restored sample count": _source_sets(
            "ray.tune.search.search_generator:SearchGenerator", "_total_samples", "_finished"),
        "random search's trial iterators": _source_sets(
            "ray.tune.search.basic_variant:BasicVariantGenerator", "_iterators",
            "_total_samples", "_finished"),
        "a trial iterator's samples left": _source_sets(
            "ray.tune.search.basic_variant:_TrialIterator", "num_samples", "num_samples_left"),
        "Tune requeues a paused trial": _source_mentions(
            "ray.tune.execution.tune_controller:TuneController._requeue_restored_trials",
            "resume_config.unfinished"),
        "Trial.relative_logdir": _source_sets("ray.tune.experiment:Trial", "relative_logdir"),
        "ConcurrencyLimiter's live trials": _source_sets(
            "ray.tune.search:ConcurrencyLimiter", "live_trials", "num_unfinished_live_trials"),
        "random search's live trials": _source_sets(
            "ray.tune.search.basic_variant:BasicVariantGenerator", "_live_trials"),
        "OptunaSearch's told trials": _source_sets(
            "ray.tune.search.optuna:OptunaSearch", "_completed_trials"),
        "Tune's wrapped controller": _source_sets(
            "ray.tune.execution.tune_controller:TrialRunnerWrapper", "_tune_controller"),
        "TuneController's storage": _source_sets(
            "ray.tune.execution.tune_controller:TuneController", "_storage"),
        "Tune's state file written with json.dump": _source_mentions(
            "ray.tune.execution.tune_controller:TuneController.save_to_dir", "json.dump("),
        "Tune's saves through its checkpoint manager": _source_mentions(
            "ray.tune.execution.tune_controller:TuneController.checkpoint",
            "self._checkpoint_manager.sync_up_experiment_state("),
        "Tune's save throttle": _source_sets(
            "ray.tune.execution.experiment_state:_ExperimentCheckpointManager",
            *tune_state.SAVE_THROTTLE),
        "Tune trial's staging folder name": _source_mentions(
            "ray.tune.experiment:Trial", "self.storage.trial_dir_name = "),
        "Tune's storage syncer": _source_sets("ray.train._internal.storage:StorageContext",
                                              "syncer"),
        "Tune's storage filesystem": _source_mentions(
            "ray.train._internal.storage:StorageContext", "self.storage_filesystem, "),
    }
