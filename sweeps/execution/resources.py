"""Per-trial resource plan: GPU or CPU, what each worker reserves, how many trials fit at once.

    python -m sweeps +experiment=digits scaling.num_workers=2 scaling.use_gpu=false

A trial is one Ray Train run: ``num_workers`` workers, each reserving ``cpus_per_worker`` CPUs
(and ``gpus_per_worker`` GPUs when ``use_gpu``), plus the Tune trial driver that waits on the
run; an inline trial (one worker, ``trial.executor``) is the trial driver alone, reserving the
worker's share. Deliberate divergence from Tune's default of 1 CPU per trial: the driver only
blocks on ``trainer.fit()``, so it reserves no CPU, just 1 MiB of Ray's ``memory`` resource (a trial
with no resource at all is rejected by Tune). Reserving a core for an idle process would halve
the trials a 2-core machine runs. On a cluster that driver (and the Train controller Ray places
beside it) runs on the head node (``sweeps.execution.tuner.trial_plan``), so losing a worker
node costs only the trials whose workers ran there.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from sweeps.config.schema import RaySection, ScalingSection
from sweeps.errors import ClusterFitError

__all__ = ["ResourcePlan", "plan_resources", "local_cluster_totals", "TRIAL_DRIVER_RESOURCES"]

TRIAL_DRIVER_RESOURCES = {"CPU": 0.0, "memory": float(1 << 20)}


@dataclass(frozen=True)
class ResourcePlan:
    """What one trial reserves and how many trials run at once."""

    use_gpu: bool
    num_workers: int
    cpus_per_worker: float
    gpus_per_worker: float
    max_concurrent_trials: int
    trials_that_fit: int
    cluster_cpus: float
    cluster_gpus: float
    # trial.executor resolved: the loop runs in the trial process (sweeps.execution.inline)
    inline: bool = False

    @property
    def worker_resources(self) -> dict[str, float]:
        """``ScalingConfig.resources_per_worker`` for each Train worker."""
        res = {"CPU": self.cpus_per_worker}
        if self.use_gpu:
            res["GPU"] = self.gpus_per_worker
        return res

    def fits_in(self, cpus: float, gpus: float) -> int:
        """How many of these trials fit at once in ``cpus``/``gpus`` (0 when none does): what
        a cluster that gained or lost nodes since the sweep started holds now.

        Example:
            >>> plan_resources(ScalingSection(num_workers=2), cpus=4, gpus=0).fits_in(6, 0)
            3
        """
        fits = math.floor(cpus / (self.num_workers * self.cpus_per_worker) + 1e-9)
        if self.use_gpu and self.gpus_per_worker > 0:
            fits = min(fits, math.floor(gpus / (self.num_workers * self.gpus_per_worker) + 1e-9))
        return max(0, fits)

    def describe(self) -> str:
        device = f"{self.gpus_per_worker:g} GPU + " if self.use_gpu else ""
        how = ("inline: the loop runs in the trial's own process, no Train controller or "
               "workers; trial.executor=train for a Ray Train run" if self.inline
               else f"{'nccl' if self.use_gpu else 'gloo'}")
        return (f"{self.num_workers} worker(s) x ({device}{self.cpus_per_worker:g} CPU), "
                f"{how}; up to {self.max_concurrent_trials} "
                f"trial(s) at once on {self.cluster_cpus:g} CPU / {self.cluster_gpus:g} GPU")


def _visible_gpus() -> int:
    """GPUs this process can see, without starting Ray (honours CUDA_VISIBLE_DEVICES)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # a CPU-only or broken torch build sees no GPU
        return 0


def local_cluster_totals(ray_cfg: RaySection) -> tuple[float, float]:
    """(CPUs, GPUs) the private local Ray instance will be started with."""
    cpus = ray_cfg.num_cpus if ray_cfg.num_cpus is not None else (os.cpu_count() or 1)
    gpus = ray_cfg.num_gpus if ray_cfg.num_gpus is not None else _visible_gpus()
    return float(cpus), float(gpus)


def plan_resources(scaling: ScalingSection, cpus: float, gpus: float,
                   max_concurrent: int | None = None, executor: str = "auto") -> ResourcePlan:
    """Fit one trial into ``cpus``/``gpus``; raise ``ClusterFitError`` if it can never fit.

    Example:
        >>> plan_resources(ScalingSection(num_workers=2), cpus=2, gpus=0).max_concurrent_trials
        1
    """
    n = scaling.num_workers
    use_gpu = scaling.use_gpu if scaling.use_gpu is not None else gpus > 0
    gpw = scaling.gpus_per_worker if use_gpu else 0.0
    if use_gpu and n * gpw > gpus:
        raise ClusterFitError(
            "scaling.num_workers", n,
            f"needs {n * gpw:g} GPUs ({gpw:g} per worker, use_gpu=true) but the cluster has "
            f"{gpus:g}", f"set scaling.num_workers={max(1, int(gpus // gpw))}"
            if gpus >= gpw else "set scaling.use_gpu=false to train on CPUs")
    cpw = scaling.cpus_per_worker
    if cpw is None:  # 1 CPU each, or an equal share so that one trial fits on this cluster
        cpw = 1.0 if n <= cpus else math.floor(100 * cpus / n) / 100
        if cpw < 0.1:
            raise ClusterFitError(
                "scaling.num_workers", n, f"leaves each worker {cpus / n:.2f} of the cluster's "
                f"{cpus:g} CPUs (under 0.1 each, too slow to be useful)",
                f"set scaling.num_workers={max(1, int(cpus))} or fewer")
    if n * cpw > cpus + 1e-9:
        raise ClusterFitError(
            "scaling.num_workers", n,
            f"needs {n * cpw:g} CPUs ({cpw:g} per worker) but the cluster has {cpus:g}",
            f"set scaling.num_workers={max(1, int(cpus // cpw))}, or lower "
            "scaling.cpus_per_worker")
    fits = math.floor(cpus / (n * cpw) + 1e-9)
    if use_gpu:
        fits = min(fits, math.floor(gpus / (n * gpw) + 1e-9))
    # An explicit search.max_concurrent_trials wins (an autoscaling cluster grows to fit it);
    # the runner warns when it exceeds what fits now, since the surplus trials wait.
    return ResourcePlan(use_gpu=use_gpu, num_workers=n, cpus_per_worker=cpw,
                        gpus_per_worker=gpw, max_concurrent_trials=max_concurrent or fits,
                        trials_that_fit=fits, cluster_cpus=cpus, cluster_gpus=gpus,
                        inline=executor != "train" and n == 1)  # validated: inline => 1 worker
