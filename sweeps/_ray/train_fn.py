"""Ray Train's per-worker API served inside the Tune trial process (the inline executor).

    with serving(report=..., get_checkpoint=..., reported=..., datasets=..., name=trial_id):
        loop(config)     # ray.train.report / get_checkpoint / get_context / prepare_model work

A 1-worker trial needs no Train controller, worker group or process group: the loop can run in
the Tune trial actor itself (``sweeps.trial.backends.inline``), and a trial of more workers in
that actor (rank 0) and the peer processes it keeps (``sweeps.trial.backends.peers``). Ray Train
V2 reaches every per-worker call (``ray.train.report``, ``get_checkpoint``, ``get_context``,
``get_dataset_shard``, ``ray.train.torch.prepare_model``/``get_device``) through one
process-global ``TrainFnUtils`` object; its local-mode implementation (``LocalTrainFnUtils``,
what ``ScalingConfig(num_workers=0)`` installs) keeps only the last report. ``serving``
installs a subclass whose ``report`` and ``get_checkpoint`` are the sweep's own, for the
duration of one loop. Its ``is_distributed`` answers True in a Ray worker, so
``ray.train.torch.get_device()`` returns the device of the GPU (or the CPU) Ray gave the trial
process, as in a Train worker, where local mode would pick any GPU torch can see.

Those calls also refuse to run inside a Tune function trainable (they raise "deprecated when
running in a function passed to Ray Tune" when the process has a Tune session whose
``world_rank`` is None). ``serving`` marks the trial's Tune session as rank 0 while the loop
runs, which is what a Train worker's session says, and puts it back after.

Private: ``ray.train.v2._internal.execution.train_fn_utils`` (``LocalTrainFnUtils``, its
``is_distributed`` and ``_context``, ``set_train_fn_utils``), ``ray.train.v2.api.context``'s
``LocalTrainContext``, the Tune session's ``world_rank`` and Ray's ``contains_tensor`` (the
check its ``report`` makes). Public route: Train V2's local
mode with a reporting hook (local mode drops reports; no upstream issue found at 2.60).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from sweeps._ray.train import tune_session

__all__ = ["serving", "before_reports", "contains_tensor", "TRAIN_FN_UTILS_MODULE",
           "CONTEXT_MODULE", "TENSOR_CHECK"]

TRAIN_FN_UTILS_MODULE = "ray.train.v2._internal.execution.train_fn_utils"
CONTEXT_MODULE = "ray.train.v2.api.context"  # LocalTrainContext
TENSOR_CHECK = "ray.air._internal.torch_utils:contains_tensor"
# What Ray Train's report raises for validation=... when the trainer has no validation_config
# (ray.train.v2._internal.execution.context.TrainContext.report), which sweeps never sets.
VALIDATION_REFUSED = ("`validation_config` was not set on the trainer, but a validation was "
                      "requested.")
WORKER_IMPORTS = "ray.train.torch"  # what a Train worker of a TorchTrainer has imported


def contains_tensor(metrics: Any) -> bool:
    """Ray Train's own check that a report's metrics hold a torch tensor (or a module), which
    its ``report`` refuses; only when torch is loaded, as Ray does."""
    if "torch" not in sys.modules:
        return False
    module, _, name = TENSOR_CHECK.partition(":")
    return bool(getattr(importlib.import_module(module), name)(metrics))


def _utils_class() -> type:
    module = importlib.import_module(TRAIN_FN_UTILS_MODULE)
    contexts = importlib.import_module(CONTEXT_MODULE)

    class InlineTrainContext(contexts.LocalTrainContext):  # type: ignore[name-defined,misc]
        """``ray.train.get_context()``: local mode's, with the call it does not serve refused
        in one line (local mode raises "Local storage context not yet implemented")."""

        def get_storage(self) -> Any:
            raise NotImplementedError(
                "ray.train.get_context().get_storage() (Ray Train's StorageContext) is not "
                "served by sweeps' inline backend; run the sweep with trial.executor=train")

    class InlineTrainFnUtils(module.LocalTrainFnUtils):  # type: ignore[name-defined,misc]
        """Local mode whose reports and checkpoints go to the sweep."""

        def __init__(self, name: str, report: Callable[..., None],
                     get_checkpoint: Callable[[], Any], reported: Callable[[], list],
                     datasets: dict[str, Any], world: Any = None, meet: Any = None) -> None:
            ranks = {} if world is None else dict(
                world_size=world.world_size, world_rank=world.rank, local_rank=world.local_rank,
                local_world_size=world.local_world_size, node_rank=world.node_rank)
            super().__init__(experiment_name=name, dataset_shards=datasets, **ranks)
            self._context = InlineTrainContext(experiment_name=name, **ranks)
            self._report, self._get_checkpoint, self._shards = report, get_checkpoint, datasets
            self._meet, self._reported = meet, reported

        def report(self, metrics: dict[str, Any], checkpoint: Any = None,
                   checkpoint_dir_name: str | None = None, **options: Any) -> None:
            if contains_tensor(metrics):  # Ray Train checks this first (then validation)
                raise ValueError("ray.train.report: the metrics hold torch tensors, which do "
                                 "not deserialize on the driver; report Python numbers "
                                 "(.item()) and save tensors in the checkpoint")
            if options.get("validation"):  # Ray Train's own check, and its words
                error = ValueError(VALIDATION_REFUSED)
                error.add_note("sweeps sets no validation_config on either trial backend: "
                               "validate in the loop and report the result as a metric")
                raise error
            self._report(metrics, checkpoint, checkpoint_dir_name,
                         delete_source=bool(options.get("delete_local_checkpoint_after_upload")),
                         upload=options.get("checkpoint_upload_fn"))

        def get_checkpoint(self) -> Any:
            return self._get_checkpoint()

        def get_all_reported_checkpoints(self, consistency_mode: Any = None,
                                         timeout_s: float | None = None) -> list:
            # No validation runs inline, so every kept checkpoint is committed, whatever
            # consistency the loop asks for.
            from ray.train import ReportedCheckpoint, ReportedCheckpointStatus

            return [ReportedCheckpoint(checkpoint=checkpoint, metrics=metrics,
                                       status=ReportedCheckpointStatus.COMMITTED)
                    for checkpoint, metrics in self._reported()]

        def is_distributed(self) -> bool:
            # Read by ray.train.torch.get_device()/get_devices() (and so prepare_model and
            # prepare_data_loader) only: True takes the device from the GPUs Ray assigned this
            # process, as in a Train worker; False is local mode's torch.cuda guess, a GPU
            # whenever torch sees one. In a Ray worker the trial process holds exactly the
            # worker's resources, so answer as a Train worker does (cpu for a CPU trial on a
            # GPU node, the assigned GPU for a GPU share); outside Ray, local mode.
            import ray

            return ray.is_initialized()

        def barrier(self) -> None:
            if self._meet is not None:
                self._meet.collective_barrier()

        def broadcast_from_rank_zero(self, data: Any) -> Any:
            return data if self._meet is None else self._meet.broadcast_from_rank_zero(data)

        def get_dataset_shard(self, dataset_info: Any) -> Any:
            name = dataset_info.dataset_name
            if name not in self._shards:
                raise KeyError(f"ray.train.get_dataset_shard({name!r}): this sweep declares "
                               f"{sorted(self._shards)} in experiment.datasets")
            return self._shards[name]

    return InlineTrainFnUtils


@contextlib.contextmanager
def serving(*, name: str, report: Callable[..., None],
            get_checkpoint: Callable[[], Any], reported: Callable[[], list],
            datasets: dict[str, Any], world: Any = None, meet: Any = None) -> Iterator[None]:
    """Serve Ray Train's per-worker API from this process while the block runs: reports go
    to ``report(metrics, checkpoint, checkpoint_dir_name, delete_source=, upload=)``,
    ``get_checkpoint()`` to the sweep, ``get_all_reported_checkpoints()`` to ``reported()``
    ((checkpoint, metrics) pairs), ``get_dataset_shard(name)`` to ``datasets[name]``;
    ``get_context()`` answers from ``world`` (a ``sweeps.trial.backends.rendezvous.WorldSpec``;
    None: world size 1, rank 0), and ``ray.train.collective``'s barrier and broadcast meet
    the other ranks at ``meet`` (a ``Rendezvous``)."""
    # A Train worker has imported ray.train.torch (its backend's setup does) before the loop
    # runs, so a loop may reach it as an attribute of ray.train without importing it: Ray's
    # Lightning utilities do (rank 1 of an inline trial raised "module 'ray.train' has no
    # attribute 'torch'" without this).
    importlib.import_module(WORKER_IMPORTS)
    module = importlib.import_module(TRAIN_FN_UTILS_MODULE)
    session = tune_session()
    rank = getattr(session, "world_rank", None) if session is not None else None
    module.set_train_fn_utils(_utils_class()(name, report, get_checkpoint, reported, datasets,
                                             world, meet))
    if session is not None:
        session.world_rank = 0 if world is None else world.rank
    try:
        yield
    finally:
        module.set_train_fn_utils(None)
        if session is not None:
            session.world_rank = rank


@contextlib.contextmanager
def before_reports(call: Callable[[], None]) -> Iterator[None]:
    """While the block runs, ``call()`` runs before each ``ray.train.report`` of this process
    (a Train worker's, or one ``serving`` serves), which it leaves as it is: on the
    ``TrainFnUtils`` object every per-worker call goes through."""
    utils = importlib.import_module(TRAIN_FN_UTILS_MODULE).get_train_fn_utils()
    report = utils.report
    utils.report = lambda *args, **kwargs: (call(), report(*args, **kwargs))[1]
    try:
        yield
    finally:
        del utils.report
