"""Per-trial resource plan: GPU or CPU, what each worker reserves, how many trials fit at once.

    python -m sweeps +experiment=digits scaling.num_workers=2 scaling.use_gpu=false

A trial is ``num_workers`` workers of ``cpus_per_worker`` CPUs (``gpus_per_worker`` GPUs when
``use_gpu``) plus its Tune trial driver; an inline trial (``trial.executor``) is the driver
alone with the worker's share, plus a peer process per other rank (``sweeps.trial.backends.peers``),
each a bundle (each backend's ``trial_resources``). Deliberate divergence from Tune's 1 CPU per
trial: a Train trial's driver reserves 1 MiB of ``memory`` only (Tune rejects no resource at
all); why: docs/backends.md#how-resources-are-held-and-released. On a cluster that driver runs
on the head node (docs/clusters.md#where-things-run).

Elastic trials (``scaling.num_workers=[min, max]``, ``sweeps.config.workers``) run on Ray Train
and are planned at ``max`` workers each, at least 1 trial at once when ``min`` fits; a cluster
that cannot hold ``min`` workers is refused (why: docs/clusters.md#elastic-trials).

GPUs shared by trials (``scaling.gpus_per_worker`` below 1; docs/clusters.md#gpus, also why
nccl ranks that could share a GPU are refused unless gloo): ``floor(1 / share)`` workers a GPU;
an inline trial's process holds the share itself, a Train trial's worker in a Train run.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass

from sweeps.config.loop_api import TRAIN, loop_api
from sweeps.config.schema import RaySection, ScalingSection
from sweeps.config.workers import is_elastic, worker_range
from sweeps.errors import ClusterFitError, ConfigError
from sweeps.trial.backends import BackendRequest, backend_for, choose_backend

__all__ = ["ResourcePlan", "plan_resources", "local_cluster_totals"]


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
    executor: str = "train"  # trial.executor resolved: the trial backend (sweeps.trial.backends)
    backend: str = "gloo"  # scaling.backend resolved: the ranks' torch.distributed backend
    notes: tuple[str, ...] = ()  # what the plan says about the backend chosen for auto
    # Elastic trials (scaling.num_workers=[num_workers, max_workers]); None: a fixed count
    max_workers: int | None = None
    loop_api: str = "train"  # "tune": a Ray Tune function trainable (sweeps.config.loop_api)

    @property
    def elastic(self) -> bool:
        """Whether Ray Train resizes each trial between ``num_workers`` and ``max_workers``."""
        return self.max_workers is not None

    @property
    def planned_workers(self) -> int:
        """Workers per trial that concurrency is planned with (elastic: the max)."""
        return self.max_workers or self.num_workers

    @property
    def worker_resources(self) -> dict[str, float]:
        """``ScalingConfig.resources_per_worker`` for each Train worker."""
        res = {"CPU": self.cpus_per_worker}
        if self.use_gpu:
            res["GPU"] = self.gpus_per_worker
        return res

    @property
    def workers_per_gpu(self) -> int:
        """How many workers (inline trials: trials) share one GPU; 1 for whole GPUs or CPU.

        Example:
            >>> plan_resources(ScalingSection(num_workers=1, gpus_per_worker=0.3), 8, 1
            ...                ).workers_per_gpu
            3
        """
        if not self.use_gpu or self.gpus_per_worker >= 1:
            return 1
        return math.floor(1 / self.gpus_per_worker + 1e-9)

    def fits_in(self, cpus: float, gpus: float) -> int:
        """How many of these trials fit at once in ``cpus``/``gpus`` (0 when none does): what
        a cluster that gained or lost nodes since the sweep started holds now.

        Example:
            >>> plan_resources(ScalingSection(num_workers=2), cpus=4, gpus=0).fits_in(6, 0)
            3
        """
        return _fits(self.num_workers, self.planned_workers, self.cpus_per_worker,
                     self.gpus_per_worker if self.use_gpu else 0.0, cpus, gpus)

    def describe(self) -> str:
        """One line: each worker's share, the executor or DDP backend, trials at once, and
        how a shared GPU is divided.

        Example:
            >>> print(plan_resources(ScalingSection(num_workers=1, gpus_per_worker=0.25), 16, 1,
            ...                      executor="train").describe())
            1 worker(s) x (0.25 GPU + 1 CPU), nccl; up to 4 trial(s) at once on 16 CPU / 1 GPU;
            4 trials share each GPU (0.25 GPU each; Ray does not divide its memory: each must
            fit in 25% of it)
        """
        device = f"{self.gpus_per_worker:g} GPU + " if self.use_gpu else ""
        how = backend_for(self.executor).describe(self.num_workers, self.backend, self.loop_api)
        if how is None:  # the DDP backend, and whether the user chose it
            how = (self.backend if self.backend == ("nccl" if self.use_gpu else "gloo")
                   else f"{self.backend} (scaling.backend={self.backend})")
        count = (f"elastic {self.num_workers}..{self.max_workers} worker(s)" if self.elastic
                 else f"{self.num_workers} worker(s)")
        text = (f"{count} x ({device}{self.cpus_per_worker:g} CPU), "
                f"{how}; up to {self.max_concurrent_trials} "
                f"trial(s) at once on {self.cluster_cpus:g} CPU / {self.cluster_gpus:g} GPU")
        if self.elastic:
            text += (f" (planned at {self.max_workers} workers each; Ray Train grows and "
                     "shrinks each trial as nodes come and go, restarting its workers from "
                     "its last checkpoint)")
        share = self.workers_per_gpu
        if share < 2:
            return text
        who = "trials" if self.num_workers == 1 else f"workers (DDP ranks, {self.backend})"
        each = (f"({self.gpus_per_worker:g} GPU each; Ray does not divide its memory: each must "
                f"fit in {self.gpus_per_worker:.0%} of it)")
        by_gpu = _gpu_slots(self.gpus_per_worker, self.cluster_gpus) // self.num_workers
        if self.trials_that_fit < by_gpu:  # the CPUs are the limit
            return (f"{text}; a GPU takes {share} {who} {each}, but the CPUs run "
                    f"{self.trials_that_fit} trial(s) at once")
        return f"{text}; {share} {who} share each GPU {each}"


def local_cluster_totals(ray_cfg: RaySection) -> tuple[float, float]:
    """(CPUs, GPUs) the private local Ray instance will be started with."""
    cpus = ray_cfg.num_cpus if ray_cfg.num_cpus is not None else (os.cpu_count() or 1)
    gpus = ray_cfg.num_gpus
    if gpus is None:  # the GPUs this process sees, without starting Ray (CUDA_VISIBLE_DEVICES)
        gpus = 0
        if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() not in ("", "-1"):
            with contextlib.suppress(Exception):  # a CPU-only or broken torch build sees none
                import torch

                gpus = torch.cuda.device_count()
    return float(cpus), float(gpus)


def _gpu_slots(gpw: float, gpus: float) -> int:
    """Workers of ``gpw`` GPUs each that ``gpus`` GPUs hold: a share below 1 never spans two
    GPUs, so 0.4 puts 2 on each (not 2.5).

    Example:
        >>> _gpu_slots(0.4, 2), _gpu_slots(0.25, 1), _gpu_slots(1, 3), _gpu_slots(2, 5)
        (4, 4, 3, 2)
    """
    if gpw < 1:
        return math.floor(gpus + 1e-9) * math.floor(1 / gpw + 1e-9)
    return math.floor(gpus / gpw + 1e-9)


def _fits(low: int, high: int, cpw: float, gpw: float, cpus: float, gpus: float) -> int:
    """Trials of ``low``..``high`` workers that run at once: planned at ``high``, but 1 when
    only ``low`` fits (0 when not even that); ``gpw`` 0 for CPU trials.

    Example:
        >>> _fits(2, 2, 1, 0, 5, 0), _fits(1, 4, 1, 0, 2, 0), _fits(1, 2, 1, 0, 4, 0)
        (2, 1, 2)
    """
    def at(n: int) -> int:
        fits = math.floor(cpus / (n * cpw) + 1e-9)
        if gpw > 0:  # the same packing as plan_resources
            fits = min(fits, _gpu_slots(gpw, gpus) // n)
        return max(0, fits)

    return max(at(high), min(1, at(low)))


def _check_backend(scaling: ScalingSection, use_gpu: bool, backend: str, gpw: float) -> None:
    """nccl needs GPUs, and a GPU per rank: refuse a trial it cannot train, before it starts
    (two ranks of one trial can share a GPU when two shares fit in one: ``gpus_per_worker``
    at most 0.5; an elastic trial's ``max`` counts)."""
    n = worker_range(scaling.num_workers)[1]
    if backend == "nccl" and not use_gpu:
        why = ("scaling.use_gpu=false" if scaling.use_gpu is False else "the cluster has no GPU")
        raise ConfigError("scaling.backend", "nccl", f"needs GPUs, but the trials train on CPUs "
                          f"({why})", "set scaling.backend=gloo (or leave it null), or "
                          "scaling.use_gpu=true on a cluster with GPUs")
    together = min(n, math.floor(1 / gpw + 1e-9)) if use_gpu and gpw < 1 else 1
    if backend == "nccl" and together > 1:
        raise ConfigError(
            "scaling.gpus_per_worker", gpw,
            f"lets Ray put {together} DDP ranks of one trial (scaling.num_workers={n}) on one "
            "GPU, and nccl refuses that (\"Duplicate GPU detected\", after the workers started)",
            "set scaling.gpus_per_worker=1, or scaling.backend=gloo to train those ranks with "
            "gloo")


def plan_resources(scaling: ScalingSection, cpus: float, gpus: float,
                   max_concurrent: int | None = None, executor: str = "auto",
                   datasets: bool = False, cluster: bool = False,
                   trainable: str | None = None) -> ResourcePlan:
    """Fit one trial into ``cpus``/``gpus``; raise ``ClusterFitError`` if it can never fit, and
    ``ConfigError`` for a DDP backend that cannot train it (see the module docstring) or a
    trial backend (``executor``, ``sweeps.trial.backends``) that refuses it.

    Example:
        >>> plan_resources(ScalingSection(num_workers=2), cpus=2, gpus=0).max_concurrent_trials
        1
        >>> plan_resources(ScalingSection(num_workers=1, gpus_per_worker=0.25), 16, 1
        ...                ).max_concurrent_trials
        4
    """
    n, high = worker_range(scaling.num_workers)  # n: what one trial needs to start
    elastic = is_elastic(scaling.num_workers)
    use_gpu = scaling.use_gpu if scaling.use_gpu is not None else gpus > 0
    gpw = scaling.gpus_per_worker if use_gpu else 0.0
    backend = scaling.backend or ("nccl" if use_gpu else "gloo")
    executor, notes = choose_backend(executor, BackendRequest(
        num_workers=n, use_gpu=use_gpu, datasets=datasets, cluster=cluster, trainable=trainable,
        elastic=elastic))
    _check_backend(scaling, use_gpu, backend, gpw)
    # What the errors quote and propose: elastic, the min is what must fit
    value = list(scaling.num_workers) if elastic else n
    what = f" for min {n} worker(s)" if elastic else ""

    def fix(k: int) -> str:
        return f"set scaling.num_workers={f'[{k},{max(k, high)}]' if elastic else k}"

    if use_gpu and _gpu_slots(gpw, gpus) < n:
        raise ClusterFitError(
            "scaling.num_workers", value,
            f"needs {n * gpw:g} GPUs{what} ({gpw:g} per worker, use_gpu=true) but the "
            f"cluster has {gpus:g}" + (f" (a GPU holds {math.floor(1 / gpw + 1e-9)} such "
                                       "workers)" if gpw < 1 and gpus >= 1 else ""),
            fix(max(1, _gpu_slots(gpw, gpus)))
            if _gpu_slots(gpw, gpus) >= 1 else "set scaling.use_gpu=false to train on CPUs")
    cpw = scaling.cpus_per_worker
    if cpw is None:  # 1 CPU each, or an equal share so that one trial fits on this cluster
        # (not for elastic trials: a share of today's cluster would be wrong once it grows)
        cpw = 1.0 if n <= cpus or elastic else math.floor(100 * cpus / n) / 100
        if cpw < 0.1:
            raise ClusterFitError(
                "scaling.num_workers", value, f"leaves each worker {cpus / n:.2f} of the "
                f"cluster's {cpus:g} CPUs (under 0.1 each, too slow to be useful)",
                f"{fix(max(1, int(cpus)))} or fewer")
    if n * cpw > cpus + 1e-9:
        raise ClusterFitError(
            "scaling.num_workers", value,
            f"needs {n * cpw:g} CPUs{what} ({cpw:g} per worker) but the cluster has "
            f"{cpus:g}", f"{fix(max(1, int(cpus // cpw)))}, or lower scaling.cpus_per_worker")
    fits = _fits(n, high, cpw, gpw if use_gpu else 0.0, cpus, gpus)
    # An explicit search.max_concurrent_trials wins (an autoscaling cluster grows to fit it);
    # the runner warns when it exceeds what fits now, since the surplus trials wait.
    return ResourcePlan(use_gpu=use_gpu, num_workers=n, cpus_per_worker=cpw,
                        gpus_per_worker=gpw, max_concurrent_trials=max_concurrent or fits,
                        trials_that_fit=fits, cluster_cpus=cpus, cluster_gpus=gpus,
                        executor=executor, backend=backend, notes=tuple(notes),
                        max_workers=high if elastic else None,
                        loop_api=loop_api(trainable) if trainable else TRAIN)
