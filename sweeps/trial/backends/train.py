"""The Train backend: a trial is one Ray Train ``TorchTrainer`` run, named by the trial id.

    python -m sweeps +experiment=digits trial.executor=train
    TrainBackend().run(attempt)              # from sweeps.trial.driver.run_trial

The reference backend (``sweeps.trial.backends.DEFAULT``): every guarantee of Ray Train holds
because it is Ray Train. The run is stored under ``<sweep dir>/train/<trial id>`` and its
workers run the user's loop through ``sweeps.loop.worker`` (which sets ``trial_context()`` and
notes the config keys read), with the report bridge (metrics, checkpoint path and the trial's
clock back to Tune: ``sweeps.trial.backends.report_bridge``) and the placement-group ledger
(``sweeps.placement``). A Train run resumes from its latest checkpoint when started again with
the same (storage path, name), so a retried or resumed trial picks up where it stopped; Train
restarts its worker group up to ``trial.max_failures`` times. Elastic trials
(``scaling.num_workers=[min, max]``) hand Train the range (docs/clusters.md#elastic-trials).

What it costs: the Tune trial process reserves next to nothing (the run's workers reserve the
trial's resources), and on a cluster it is pinned to the head node
(``TrainBackend.options``); per trial, a Train controller and its workers are started.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from sweeps.config.loop_api import TUNE, loop_api
from sweeps.config.usercode import import_trainable
from sweeps.storage.location import uri_of
from sweeps.trial.backends.base import BackendRequest, Refusal, TrialAttempt, TrialBackend

if TYPE_CHECKING:
    from sweeps.config.schema import SweepConfig
    from sweeps.trial.plan import TrialPlan

__all__ = ["TRIAL_DRIVER_RESOURCES", "TrainBackend", "TrainOptions", "data_config",
           "elastic_options", "start_limits"]

START_ATTEMPT_S = 60.0  # Ray Train's own wait per worker-group start attempt
ELASTIC_START_ATTEMPT_S = 25.0  # an elastic trial's (start_limits says why)
# What a Train trial's Tune process reserves: it only waits on trainer.fit(), so no CPU (a
# deliberate divergence from Tune's 1 CPU per trial; sweeps.driver.resources says why), just
# 1 MiB of Ray's memory resource (a trial with no resource at all is rejected by Tune).
TRIAL_DRIVER_RESOURCES = {"CPU": 0.0, "memory": float(1 << 20)}


@dataclass(frozen=True)
class TrainOptions:
    """``plan.backend_options`` of a Train trial: what only this backend reads, built once per
    sweep by ``TrainBackend.options``.

    Example:
        >>> TrainOptions(0.1, 60.0, max_workers=4).train_workers(1)
        (1, 4)
    """

    poll_interval_s: float = 0.1  # trial.poll_interval_s: how often the Train controller polls
    start_timeout_s: float = 600.0  # trial.start_timeout_s (start_limits)
    # Ray Train's per-run actor that watches for node drains (spot preemption): on a cluster
    # only; on one machine there is no other node to lose and it costs a process per trial.
    preemption_watcher: bool = True
    datasets_to_split: list[str] | None = None  # None: all of them (Ray Train's default)
    # What the Tune trial process reserves besides TRIAL_DRIVER_RESOURCES: on a cluster, a pin
    # to the head node (TrainBackend.options says why)
    driver_pin: dict[str, float] = field(default_factory=dict)
    # Elastic trials (scaling.num_workers=[num_workers, max_workers]; None: a fixed count) and
    # how often Ray Train looks for room to resize one (scaling.elastic_resize_interval_s)
    max_workers: int | None = None
    resize_interval_s: float = 10.0

    def train_workers(self, num_workers: int) -> int | tuple[int, int]:
        """Ray Train's ``ScalingConfig(num_workers=...)``: the count, or (min, max)."""
        return num_workers if self.max_workers is None else (num_workers, self.max_workers)


class TrainBackend(TrialBackend):
    """A Ray Train ``TorchTrainer`` run per trial (see the module docstring)."""

    name = "train"

    def __init__(self) -> None:
        from sweeps._ray.train import count_handovers

        # Before the trial re-hands its unseen reports: they count as handed over too.
        self.counting = count_handovers()

    @classmethod
    def refusal(cls, request: BackendRequest) -> Refusal | None:
        """A Ray Tune function trainable: in a Train worker its ``ray.tune.report`` reports
        nothing (Ray's rule), and Tune's stop at a report has no Train counterpart."""
        if request.trainable and loop_api(request.trainable) == TUNE:
            return Refusal(f"runs Ray Train loops in Train workers, but {request.trainable} is a "
                           "Ray Tune function (ray.tune.report), which runs as one process",
                           "set trial.executor=auto (it runs in the trial's own process, as "
                           "under a plain Tuner)")
        return None

    @classmethod
    def chosen_by_auto(cls, request: BackendRequest) -> bool:
        return True

    @classmethod
    def options(cls, cfg: SweepConfig, resources: Any) -> TrainOptions:
        """Every trial's ``TrainOptions``. On a cluster (``ray.address``, or a connected Ray
        with more than one node), Train's preemption watcher, and the trial's driver pinned to
        the head node, and with it its Train controller (Ray places it beside its caller).
        Divergence from Tune, which places a trial wherever its resources fit; why, and its
        cost (the head holds both processes of every running trial, about 0.4 GB RSS each
        with a small torch loop): docs/clusters.md#where-things-run."""
        from sweeps._ray.placement import alive_nodes, head_node_pin

        split = cfg.experiment.datasets_to_split
        on_cluster = cfg.ray.address is not None or len(alive_nodes()) > 1
        return TrainOptions(cfg.trial.poll_interval_s, cfg.trial.start_timeout_s,
                            preemption_watcher=on_cluster,
                            datasets_to_split=None if split is None else list(split),
                            driver_pin=head_node_pin() if on_cluster else {},
                            max_workers=resources.max_workers,
                            resize_interval_s=cfg.scaling.elastic_resize_interval_s)

    @classmethod
    def trial_resources(cls, plan: TrialPlan) -> Any:
        return {**TRIAL_DRIVER_RESOURCES, **(plan.backend_options or TrainOptions()).driver_pin}

    @classmethod
    def describe(cls, num_workers: int, ddp_backend: str, api: str = "train") -> str | None:
        return None

    @classmethod
    def reuses_process(cls, reuse_process: bool, scheduler: str) -> bool:
        """Not under PBT: a trial PBT pauses is not stopped, so its Train run would go on in
        the cached process; PBT's Train trials get a new process each (their run ends with the
        old one). Otherwise a stopped trial's workers are released and its late reports
        dropped (``sweeps.trial.backends.report_bridge``), so the process may be reused."""
        return reuse_process and scheduler != "pbt"

    def run(self, attempt: TrialAttempt) -> None:
        """``trainer.fit()``; then every report the bridge forwarded has reached Tune. A run
        whose worker ran out of GPU memory returns (its note is in the run directory)."""
        from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
        from ray.train.torch import TorchConfig

        from sweeps._ray.train import controller_env, trainer_class, wait_for_handover
        from sweeps.loop import gpu_memory
        from sweeps.loop.worker import loop_entry
        from sweeps.placement.ledger import PlacementGroupLedger, trial_stopped
        from sweeps.trial import report_log
        from sweeps.trial.backends.report_bridge import SweepReportCallback

        plan, trial_id, run_dir = attempt.plan, attempt.trial_id, attempt.run_dir
        opts: TrainOptions = plan.backend_options or TrainOptions()
        logged_before = len(report_log.records(run_dir))
        # Read by the Train controller this process starts (Ray propagates RAY_TRAIN_* vars).
        attempt_s, start_failures = start_limits(opts.start_timeout_s,
                                                 elastic=opts.max_workers is not None)
        os.environ.update(controller_env(opts.poll_interval_s, attempt_s, opts.preemption_watcher))
        trainer = trainer_class()(
            train_loop_per_worker=loop_entry(import_trainable(plan.trainable),
                                             plan.context(trial_id)),
            train_loop_config=attempt.config, torch_config=TorchConfig(backend=plan.backend),
            datasets=dict(plan.datasets) or None,
            dataset_config=data_config(opts.datasets_to_split),
            scaling_config=ScalingConfig(num_workers=opts.train_workers(plan.num_workers),
                                         use_gpu=plan.use_gpu, **elastic_options(opts),
                                         resources_per_worker=dict(plan.worker_resources)),
            run_config=RunConfig(
                name=trial_id,
                storage_path=uri_of(plan.train_storage),  # the URI itself on an object store
                checkpoint_config=CheckpointConfig(
                    num_to_keep=plan.checkpoint_keep,
                    checkpoint_score_attribute=plan.objective.metric,
                    checkpoint_score_order=plan.objective.mode),
                failure_config=FailureConfig(max_failures=plan.max_failures,
                                             controller_failure_limit=start_failures),
                callbacks=[SweepReportCallback(attempt.clock,
                                               partial(trial_stopped, plan.sweep_id, trial_id),
                                               plan.max_failures,
                                               0 if opts.max_workers else plan.num_workers),
                           PlacementGroupLedger(plan.sweep_id, trial_id)],
            ),
        )
        try:
            trainer.fit()
        except Exception as exc:
            if gpu_memory.noted(run_dir) is None:
                from sweeps.trial.backends.rank_error import from_train_run

                own = from_train_run(exc, opts.max_workers or plan.num_workers)
                if own is exc:
                    raise
                raise own from None  # the failing rank's error; the others' in its notes
            # a worker ran out of GPU memory: the trial ends (run_trial), it does not raise
        # Every report the bridge forwarded (one log line each) must reach Tune before
        # returning; a trial the sweep stopped had its late reports dropped (report_bridge).
        if not trial_stopped(plan.sweep_id, trial_id):
            wait_for_handover(self.counting, attempt.unseen
                              + len(report_log.records(run_dir)) - logged_before)


def data_config(datasets_to_split: list[str] | None) -> Any:
    """Ray Train's ``DataConfig`` splitting the named datasets (None: its default, all)."""
    from ray.train import DataConfig

    return DataConfig(datasets_to_split="all" if datasets_to_split is None
                      else list(datasets_to_split))


def elastic_options(opts: TrainOptions) -> dict[str, Any]:
    """``ScalingConfig`` keywords of an elastic trial (none for a fixed count): how often Train
    looks for room to resize it while it is healthy (``scaling.elastic_resize_interval_s``;
    Train's default is 60 s, ray/train/v2/api/config.py ScalingConfig).

    Example:
        >>> elastic_options(TrainOptions(0.1, 60.0))
        {}
        >>> elastic_options(TrainOptions(0.1, 60.0, max_workers=2, resize_interval_s=5))
        {'elastic_resize_monitor_interval_s': 5.0}
    """
    if opts.max_workers is None:
        return {}
    return {"elastic_resize_monitor_interval_s": float(opts.resize_interval_s)}


def start_limits(start_timeout_s: float, elastic: bool = False) -> tuple[float, int]:
    """(seconds per worker-group start attempt, start failures tolerated) for a trial whose
    workers may wait ``start_timeout_s`` for resources (-1: forever, Ray Train's default).

    An elastic trial's attempts last at most ``ELASTIC_START_ATTEMPT_S``: for 20 s after a node
    is lost Train still asks for its workers, and only a timed-out attempt makes it ask again
    (docs/clusters.md#elastic-trials; measured: a shrink took 60 s longer with 60 s attempts).

    Example:
        >>> start_limits(600), start_limits(20), start_limits(-1), start_limits(600, True)
        ((60.0, 9), (20.0, 0), (60.0, -1), (25.0, 23))
    """
    longest = ELASTIC_START_ATTEMPT_S if elastic else START_ATTEMPT_S
    if start_timeout_s == -1:
        return longest, -1
    attempt_s = min(longest, float(start_timeout_s))
    return attempt_s, max(0, math.ceil(start_timeout_s / attempt_s) - 1)
