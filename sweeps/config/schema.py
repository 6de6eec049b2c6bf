"""Typed sweep config: the schema Hydra composes ``conf/`` onto.

    python -m sweeps +experiment=digits search.num_samples=20 scaling.num_workers=2

``register_schema()`` puts ``SweepConfig`` in Hydra's ConfigStore as ``sweep_schema`` (the first
entry of ``conf/sweep.yaml``'s defaults), so an unknown key anywhere (a typo on the command
line or in a YAML file) fails during composition, before this package runs. ``validate()``
(``sweeps.config.validate``) checks values before Ray starts; it raises ``ConfigError`` naming
key, value and fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

from sweeps.config.loop_api import settle_workers
from sweeps.config.search_path import active
from sweeps.errors import ConfigError

__all__ = ["SweepConfig", "SweepSection", "BudgetSection", "ExperimentSection", "SearchSection",
           "SchedulerSection", "ScalingSection", "CheckpointSection", "TrialSection", "RaySection",
           "TrackingSection", "register_schema", "to_config", "available_experiments"]

SEARCH_ALGORITHMS = ("tpe", "random", "grid", "optuna")
SCHEDULERS = ("asha", "none", "pbt")
MODES = ("min", "max")
RESUME_MODES = ("auto", "never", "must")
BACKENDS = ("nccl", "gloo")  # scaling.backend (null: nccl on GPU, gloo on CPU)


@dataclass
class BudgetSection:
    """A compute budget for the whole sweep (``sweeps.search.budget``); null: no limit. Once the
    next epoch would exceed one, no trial starts and running trials stop at their next report."""

    epochs: int | None = None  # trial-epochs summed over all trials
    worker_hours: float | None = None  # Train workers x wall seconds of their trials / 3600
    wall: str | None = None  # the sweep's wall time over all its starts: "2h", "90m", "45s", 600


@dataclass
class SweepSection:
    """Where the sweep lives and how it is seeded."""

    name: str = "${experiment.name}"
    dir: str = "outputs/${sweep.name}"
    seed: int = 0
    verbose: bool = False
    dry_run: bool = False  # print the plan (space, rungs, concurrency, epochs) and stop
    resume: str = "auto"  # auto: continue the sweep in sweep.dir if there is one; never; must
    # One driver per sweep directory (sweeps.lease): the driver renews its claim every
    # lease_heartbeat_s; a claim silent for lease_expiry_s (on the storage's clock) is taken
    # over by the next command (at once when its driver provably died on this host)
    lease_heartbeat_s: float = 5.0
    lease_expiry_s: float = 45.0
    # SIGTERM (a scheduler's preemption notice): the sweep saves its state, releases its
    # claim and exits within this many seconds, ending its trials' processes if it must
    stop_grace_s: float = 20.0
    # Not part of the sweep's identity: raise it and resume (docs/running.md#a-compute-budget)
    budget: BudgetSection = field(default_factory=BudgetSection)


@dataclass
class ExperimentSection:
    """What is trained: the per-worker training function, its fixed and searched params."""

    name: str = MISSING
    # "package.module:function": a Ray Train per-worker function, fn(config) or fn(), called
    # on every Train worker with this trial's params (flat; dotted keys nested) and nothing else
    trainable: str = MISSING
    metric: str = MISSING  # a key the loop reports; drives the search, ASHA and the best trial
    mode: str = MISSING
    # Multi-objective: every metric the searcher optimizes, with its direction, e.g.
    # {val_acc: max, n_params: min}. The first is the primary (metric/mode default to it): it
    # ranks checkpoints and picks the model registered; the summary prints the Pareto front.
    metrics: dict[str, str] = field(default_factory=dict)
    # The key of the loop's reports that counts epochs (0-based, 1-based or float all work);
    # null, or a loop that does not report it: the number of reports is the clock.
    time_attr: str | None = "epoch"
    params: dict[str, Any] = field(default_factory=dict)  # the loop's config (defaults)
    search_space: dict[str, Any] = field(default_factory=dict)  # keys of params to search
    # search_space keys that are deliberately not in params (their default lives in the loop)
    loop_defaults: list[str] = field(default_factory=list)
    # "module:function" turning a checkpoint directory into a torch.nn.Module, so the best
    # checkpoint of a loop with its own checkpoint format is registered as a model in MLflow
    model_loader: str | None = None
    # Ray Datasets the driver builds once per sweep and hands to every trial's loop
    # (a Train run's ``datasets=``; workers read ray.train.get_dataset_shard(NAME)). Each entry is
    # "module:function" (called with no arguments), {function: "module:function", <its
    # keyword arguments>}, or a path/URI of parquet, csv, json or npy files (read with ray.data)
    datasets: dict[str, Any] = field(default_factory=dict)
    # Which of them each worker gets a split of (Ray Train's DataConfig.datasets_to_split);
    # null: all. The others reach every worker whole (e.g. a validation set evaluated exactly:
    # Ray splits into equal parts and drops up to num_workers - 1 rows of each split dataset).
    datasets_to_split: list[str] | None = None


@dataclass
class SearchSection:
    """How configurations are proposed."""

    algorithm: str = "tpe"
    num_samples: int = 8
    max_concurrent_trials: int | None = None  # None: as many trials as the cluster fits at once
    # TPE's random trials before it models, and whether trial 1 runs experiment.params (tpe,
    # optuna); None: by the sweep's size and search (sweeps.search.defaults says why)
    n_startup_trials: int | None = None
    params_first: bool | None = None
    # search=optuna: the Optuna sampler, {_target_: optuna.samplers.CmaEsSampler, <its args>};
    # only optuna.samplers.* may be named; seed defaults to sweep.seed
    sampler: dict[str, Any] = field(default_factory=dict)
    # Earlier results that seed the searcher: an experiment name, a sweep directory or an
    # MLflow experiment name; only points inside this sweep's space are used
    warm_start: str | None = None
    # Resuming a tpe/optuna sweep under another major Optuna version than the one that started
    # it is refused (Optuna 5 changed TPE's defaults; the two would mix); true goes on anyway
    allow_optuna_change: bool = False


@dataclass
class SchedulerSection:
    """Early stopping. ``max_t`` is every trial's epoch budget, with or without ASHA."""

    name: str = "asha"
    max_t: int = 9
    grace_period: int = 1
    reduction_factor: int = 3
    # scheduler=pbt: every perturbation_interval epochs, a trial in the bottom quantile_fraction
    # copies the checkpoint of one in the top fraction (exploit) and perturbs its values (explore)
    perturbation_interval: int = 2
    quantile_fraction: float = 0.25
    resample_probability: float = 0.25  # explore: draw afresh from the space instead of x0.8/1.2
    # search_space keys explore perturbs; the others are copied from the donor unchanged (a
    # param that shapes the model must be, or the donor's checkpoint cannot load). null: the
    # float params (learning rates, regularization)
    mutate: list[str] | None = None


@dataclass
class ScalingSection:
    """Ray Train workers per trial and what each one reserves."""

    # A count, or [min, max]: elastic trials that Ray Train grows or shrinks as nodes come and
    # go (sweeps.config.workers; Any: OmegaConf has no Union). None: 2 for a Ray Train loop, 1
    # for a Ray Tune function (sweeps.config.loop_api)
    num_workers: Any = None
    # Elastic trials: how often Train looks for room to resize one (its 60 s default)
    elastic_resize_interval_s: float = 10.0
    use_gpu: bool | None = None  # None: GPU when the cluster has one, else CPU (gloo)
    cpus_per_worker: float | None = None  # None: 1, or an equal share when that does not fit
    # Below 1, trials share a GPU: 0.25 runs four 1-worker trials on each GPU (Ray divides the
    # GPU's count, not its memory). A multi-worker trial needs 1 or more under nccl
    gpus_per_worker: float = 1.0
    # The DDP process-group backend, Ray Train's TorchConfig(backend=...). None: nccl on GPU,
    # gloo on CPU. gloo on GPU lets the ranks of one trial share a GPU (nccl refuses that)
    backend: str | None = None


@dataclass
class CheckpointSection:
    """Rank-0 checkpoints of model, optimizer and epoch."""

    every: int = 1  # epochs between checkpoints (the last epoch is always saved)
    keep: int = 2  # best checkpoints kept by the sweep metric; the latest is always kept too


@dataclass
class TrialSection:
    """How one trial behaves, on whichever backend runs it (``executor``)."""

    poll_interval_s: float = 0.1  # Train controller poll period; Ray's 2 s costs ~1.6 s a report
    max_failures: int = 1  # restarts of a trial's worker group (a worker died), from its checkpoint
    max_retries: int = 1  # restarts of a trial whose driver died or raised, from its checkpoint
    # How long a trial's workers may wait for their CPUs/GPUs before the trial fails (and is
    # retried, see max_retries). Ray Train's own default waits forever; -1 restores that.
    start_timeout_s: float = 600.0
    # auto: a trial runs its loop in the trial's own process (no Train controller or workers;
    # with more workers, ranks 1.. in peer processes it keeps: sweeps.trial.backends.peers), except
    # multi-worker trials on GPUs, with experiment.datasets or on a cluster (ray.address): a
    # Ray Train run. train: always a Ray Train run; inline: always the former (CPU or gloo).
    executor: str = "auto"
    # Keep a trial's process for the next trial (Tune's reuse_actors): an inline trial's loop
    # module and imports stay loaded, a Train trial skips starting its driver process (not under
    # scheduler=pbt, whose paused Train runs would go on in it); false: a new process a trial.
    reuse_process: bool = True


@dataclass
class RaySection:
    """Which Ray cluster. ``address: null`` starts a private local instance and stops it."""

    address: str | None = None  # "auto" or "ray://host:10001" to use a running cluster
    num_cpus: int | None = None  # local instance only; None: all cores
    num_gpus: int | None = None  # local instance only; None: all visible GPUs
    # The code the workers import (your trainable's module and its helpers), shipped as Ray's
    # runtime_env working_dir (sweeps/driver/code_shipping.py). null: the current directory when
    # ray.address is set; nothing on a local instance (its workers already import from the
    # current directory). A path (or a URI such as s3://bucket/code.zip) ships that instead,
    # locally too. "none" ships nothing (the cluster has your code installed).
    working_dir: str | None = None
    py_modules: list[str] = field(default_factory=list)  # more local package dirs to ship
    # gitignore-style patterns not shipped, on top of code_shipping.DEFAULT_EXCLUDES (.git,
    # .venv, __pycache__, outputs/, multirun/, mlruns/, mlflow.db, ...), .gitignore and
    # .rayignore; "!outputs/" ships a default-excluded path after all
    excludes: list[str] = field(default_factory=list)


@dataclass
class TrackingSection:
    """MLflow: where runs go and what is registered; TensorBoard's event files."""

    enabled: bool = True
    # None: MLFLOW_TRACKING_URI if set, else sqlite:///<cwd>/mlflow.db (what `mlflow ui` opens);
    # a resumed sweep keeps the store it logs to (sweeps.tracking.target)
    uri: str | None = None
    experiment_name: str | None = None  # None: MLFLOW_EXPERIMENT_NAME if set, else experiment.name
    required: bool = True  # false: an unreachable server only warns; records wait on disk
    register_model: bool = True
    model_name: str | None = None  # None: experiment.name
    flush_timeout_s: float = 60.0  # at sweep end, how long to wait for unsent records
    # TensorBoard event files per trial in <sweep dir>/tensorboard/ (sweeps.tracking.tensorboard),
    # whether or not MLflow is enabled; false: none at all (Tune's own TBX logger stays off too)
    tensorboard: bool = True
    # each trial's processes' CPU, memory and GPUs in its MLflow run (sweeps.loop.system_metrics)
    system_metrics: bool = True


@dataclass
class SweepConfig:
    """The whole composed config (``conf/sweep.yaml`` + groups + ``+experiment=NAME``)."""

    sweep: SweepSection = field(default_factory=SweepSection)
    experiment: ExperimentSection = field(default_factory=ExperimentSection)
    search: SearchSection = field(default_factory=SearchSection)
    scheduler: SchedulerSection = field(default_factory=SchedulerSection)
    scaling: ScalingSection = field(default_factory=ScalingSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    trial: TrialSection = field(default_factory=TrialSection)
    ray: RaySection = field(default_factory=RaySection)
    tracking: TrackingSection = field(default_factory=TrackingSection)


def register_schema() -> None:
    """Store ``SweepConfig`` as ``sweep_schema`` so ``conf/sweep.yaml`` can extend it."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="sweep_schema", node=SweepConfig)


def available_experiments() -> list[str]:
    """Names accepted by ``+experiment=NAME``: ``experiment/*.yaml`` in every entry of the
    running command's config search path (``--config-dir``, ``hydra.searchpath``, built-in)."""
    return list(active().experiments())


def to_config(cfg: DictConfig | SweepConfig) -> SweepConfig:
    """Turn Hydra's composed DictConfig into a plain ``SweepConfig`` (interpolations resolved).

    Example:
        >>> from sweeps.config.compose import compose_raw
        >>> to_config(compose_raw("digits")).search.algorithm
        'tpe'
    """
    if isinstance(cfg, SweepConfig):
        return cfg
    cfg = _primary_from_metrics(cfg)
    missing = sorted(k for k in ("name", "trainable", "metric", "mode")
                     if OmegaConf.is_missing(cfg.experiment, k))
    if missing:
        names = ", ".join(available_experiments()) or "none found"
        raise ConfigError(
            "experiment", None if len(missing) == 4 else f"missing {', '.join(missing)}",
            "names no complete experiment",
            f"run `python -m sweeps +experiment=NAME` with NAME one of: {names}; an experiment "
            "file sets experiment.name, trainable, metric and mode",
        )
    obj = OmegaConf.to_object(cfg)
    if not isinstance(obj, SweepConfig):  # composed without the schema (tests, library use)
        obj = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SweepConfig), cfg))
    obj.scaling.num_workers = settle_workers(obj.scaling.num_workers, obj.experiment.trainable)
    return obj


def _primary_from_metrics(cfg: DictConfig) -> DictConfig:
    """A multi-objective experiment (``experiment.metrics``) need not repeat its first metric
    as ``experiment.metric``/``mode``: they default to the first entry of ``metrics``."""
    e = cfg.get("experiment")
    metrics = e.get("metrics") if e is not None and not OmegaConf.is_missing(e, "metrics") else None
    if not metrics:
        return cfg
    first, direction = next(iter(metrics.items()))
    cfg = cfg.copy()
    with open_dict(cfg):
        if OmegaConf.is_missing(cfg.experiment, "metric"):
            cfg.experiment.metric = first
        if OmegaConf.is_missing(cfg.experiment, "mode"):
            cfg.experiment.mode = direction
    return cfg
