"""Typed sweep config: the schema Hydra composes ``conf/`` onto, and its validation.

    python -m sweeps +experiment=digits search.num_samples=20 scaling.num_workers=2

``register_schema()`` puts ``SweepConfig`` in Hydra's ConfigStore as ``sweep_schema`` (the first
entry of ``conf/sweep.yaml``'s defaults), so an unknown key anywhere (a typo on the command
line or in a YAML file) fails during composition, before this package runs. ``validate()``
checks values and runs before Ray starts; it raises ``ConfigError`` naming key, value and fix.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from sweeps.errors import ConfigError

__all__ = [
    "SweepConfig",
    "SweepSection",
    "ExperimentSection",
    "SearchSection",
    "SchedulerSection",
    "ScalingSection",
    "CheckpointSection",
    "TrialSection",
    "RaySection",
    "TrackingSection",
    "register_schema",
    "to_config",
    "validate",
    "import_trainable",
]

SEARCH_ALGORITHMS = ("tpe", "random")
SCHEDULERS = ("asha", "none")
MODES = ("min", "max")
RESUME_MODES = ("auto", "never", "must")


@dataclass
class SweepSection:
    """Where the sweep lives and how it is seeded."""

    name: str = "${experiment.name}"
    dir: str = "outputs/${sweep.name}"
    seed: int = 0
    verbose: bool = False
    dry_run: bool = False  # print the plan (space, rungs, concurrency, epochs) and stop
    resume: str = "auto"  # auto: continue the sweep in sweep.dir if there is one; never; must


@dataclass
class ExperimentSection:
    """What is trained: the per-worker training function, its fixed and searched params."""

    name: str = MISSING
    # "package.module:function": a Ray Train per-worker function, fn(config) or fn(), called
    # on every Train worker with this trial's params (flat; dotted keys nested) and nothing else
    trainable: str = MISSING
    metric: str = MISSING  # a key the loop reports; drives the search, ASHA and the best trial
    mode: str = MISSING
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


@dataclass
class SearchSection:
    """How configurations are proposed."""

    algorithm: str = "tpe"
    num_samples: int = 8
    max_concurrent_trials: int | None = None  # None: as many trials as the cluster fits at once
    n_startup_trials: int = 4  # TPE: random trials before the model kicks in


@dataclass
class SchedulerSection:
    """Early stopping. ``max_t`` is every trial's epoch budget, with or without ASHA."""

    name: str = "asha"
    max_t: int = 9
    grace_period: int = 1
    reduction_factor: int = 3


@dataclass
class ScalingSection:
    """Ray Train workers per trial and what each one reserves."""

    num_workers: int = 2
    use_gpu: bool | None = None  # None: GPU when the cluster has one, else CPU (gloo)
    cpus_per_worker: float | None = None  # None: 1, or an equal share when that does not fit
    gpus_per_worker: float = 1.0


@dataclass
class CheckpointSection:
    """Rank-0 checkpoints of model, optimizer and epoch."""

    every: int = 1  # epochs between checkpoints (the last epoch is always saved)
    keep: int = 2  # best checkpoints kept by the sweep metric; the latest is always kept too


@dataclass
class TrialSection:
    """How one trial (one Ray Train run) behaves."""

    poll_interval_s: float = 0.1  # Train controller poll period; Ray's 2 s costs ~1.6 s a report
    max_failures: int = 1  # restarts of a trial's worker group (a worker died), from its checkpoint
    max_retries: int = 1  # restarts of a trial whose driver died or raised, from its checkpoint
    # How long a trial's workers may wait for their CPUs/GPUs before the trial fails (and is
    # retried, see max_retries). Ray Train's own default waits forever; -1 restores that.
    start_timeout_s: float = 600.0


@dataclass
class RaySection:
    """Which Ray cluster. ``address: null`` starts a private local instance and stops it."""

    address: str | None = None  # "auto" or "ray://host:10001" to use a running cluster
    num_cpus: int | None = None  # local instance only; None: all cores
    num_gpus: int | None = None  # local instance only; None: all visible GPUs
    # The code the workers import (your trainable's module and its helpers), shipped as Ray's
    # runtime_env working_dir (sweeps/execution/code_shipping.py). null: the current directory when
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
    """MLflow: where runs go and what is registered."""

    enabled: bool = True
    uri: str | None = None  # None: sqlite:///<cwd>/mlflow.db, the store `mlflow ui` opens
    experiment_name: str | None = None  # None: experiment.name
    required: bool = True  # false: an unreachable server only warns; records wait on disk
    register_model: bool = True
    model_name: str | None = None  # None: experiment.name
    flush_timeout_s: float = 60.0  # at sweep end, how long to wait for unsent records


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
    from sweeps.config.search_path import active

    return list(active().experiments())


def to_config(cfg: DictConfig | SweepConfig) -> SweepConfig:
    """Turn Hydra's composed DictConfig into a plain ``SweepConfig`` (interpolations resolved).

    Example:
        >>> to_config(OmegaConf.structured(SweepConfig)).search.algorithm
        'tpe'
    """
    if isinstance(cfg, SweepConfig):
        return cfg
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
    return obj


def _require(ok: bool, key: str, value: object, rule: str, fix: str) -> None:
    if not ok:
        raise ConfigError(key, value, rule, fix)


def validate(cfg: SweepConfig) -> None:
    """Check every value that needs no Ray; raise ``ConfigError`` on the first bad one.

    Cluster fit (num_workers vs resources) is checked by
    ``sweeps.execution.resources.plan_resources``.

    Example:
        >>> validate(to_config(compose("digits")))  # doctest: +SKIP
    """
    e, s, sc, sk = cfg.experiment, cfg.search, cfg.scheduler, cfg.scaling
    _require(bool(cfg.sweep.name) and "/" not in cfg.sweep.name, "sweep.name", cfg.sweep.name,
             "must be a non-empty name without '/'", "set sweep.name=my_sweep")
    _require(e.mode in MODES, "experiment.mode", e.mode, "must be 'min' or 'max'",
             f"set experiment.mode=max to maximize {e.metric}, min to minimize it")
    _require(bool(e.metric), "experiment.metric", e.metric, "must name a reported metric",
             "set experiment.metric=val_acc")
    _require(s.algorithm in SEARCH_ALGORITHMS, "search.algorithm", s.algorithm,
             f"must be one of {', '.join(SEARCH_ALGORITHMS)}", "pick search=tpe or search=random")
    _require(s.num_samples >= 1, "search.num_samples", s.num_samples, "must be >= 1",
             "set search.num_samples=8")
    _require(s.max_concurrent_trials is None or s.max_concurrent_trials >= 1,
             "search.max_concurrent_trials", s.max_concurrent_trials, "must be >= 1 or null",
             "leave it null to run as many trials as fit, or set a positive number")
    _require(s.n_startup_trials >= 0, "search.n_startup_trials", s.n_startup_trials,
             "must be >= 0", "set search.n_startup_trials=4")
    _require(sc.name in SCHEDULERS, "scheduler.name", sc.name,
             f"must be one of {', '.join(SCHEDULERS)}", "pick scheduler=asha or scheduler=none")
    _require(sc.max_t >= 1, "scheduler.max_t", sc.max_t, "must be >= 1 (epochs per trial)",
             "set scheduler.max_t=9")
    if sc.name == "asha":
        _require(1 <= sc.grace_period <= sc.max_t, "scheduler.grace_period", sc.grace_period,
                 f"must be between 1 and scheduler.max_t={sc.max_t}",
                 "set scheduler.grace_period=1")
        _require(sc.reduction_factor >= 2, "scheduler.reduction_factor", sc.reduction_factor,
                 "must be >= 2", "set scheduler.reduction_factor=3")
    _require(sk.num_workers >= 1, "scaling.num_workers", sk.num_workers,
             "must be >= 1 (Train workers per trial)", "set scaling.num_workers=2")
    _require(sk.cpus_per_worker is None or sk.cpus_per_worker > 0, "scaling.cpus_per_worker",
             sk.cpus_per_worker, "must be > 0 or null", "leave it null for 1 CPU per worker")
    _require(sk.gpus_per_worker > 0, "scaling.gpus_per_worker", sk.gpus_per_worker,
             "must be > 0", "set scaling.gpus_per_worker=1")
    _require(cfg.checkpoint.every >= 1, "checkpoint.every", cfg.checkpoint.every, "must be >= 1",
             "set checkpoint.every=1 to save each epoch")
    _require(cfg.checkpoint.keep >= 1, "checkpoint.keep", cfg.checkpoint.keep, "must be >= 1",
             "set checkpoint.keep=2")
    _require(cfg.trial.poll_interval_s > 0, "trial.poll_interval_s", cfg.trial.poll_interval_s,
             "must be > 0", "set trial.poll_interval_s=0.1")
    _require(cfg.trial.max_failures >= -1, "trial.max_failures", cfg.trial.max_failures,
             "must be >= 0, or -1 for unlimited", "set trial.max_failures=0")
    _require(cfg.trial.start_timeout_s > 0 or cfg.trial.start_timeout_s == -1,
             "trial.start_timeout_s", cfg.trial.start_timeout_s,
             "must be > 0 (seconds), or -1 to wait forever", "set trial.start_timeout_s=600")
    _require(cfg.trial.max_retries >= -1, "trial.max_retries", cfg.trial.max_retries,
             "must be >= 0, or -1 for unlimited", "set trial.max_retries=1")
    _require(cfg.sweep.resume in RESUME_MODES, "sweep.resume", cfg.sweep.resume,
             f"must be one of {', '.join(RESUME_MODES)}",
             "set sweep.resume=auto (continue a sweep of that name if there is one)")
    _require(cfg.tracking.flush_timeout_s >= 0, "tracking.flush_timeout_s",
             cfg.tracking.flush_timeout_s, "must be >= 0", "set tracking.flush_timeout_s=60")
    _check_space_keys(e)
    fn = import_trainable(e.trainable)
    from sweeps.execution.worker import takes_config

    if (e.params or e.search_space) and not takes_config(fn):
        raise ConfigError("experiment.trainable", e.trainable,
                          "takes no config argument, so the trial's params cannot reach it",
                          "write it as `def train_func(config): ...` (Ray Train's form)")
    if e.model_loader:
        import_trainable(e.model_loader, key="experiment.model_loader",
                         example="mypkg.models:load_from_checkpoint", arity=1)


def _check_space_keys(e: ExperimentSection) -> None:
    """Every searched key must be a key of ``params`` (or be listed in ``loop_defaults``):
    a misspelled key would otherwise be sampled, logged, and never read by the loop."""
    from sweeps.search.space import flatten

    known = flatten(dict(e.params))
    prefixes = {k.rsplit(".", i)[0] for k in known for i in range(1, k.count(".") + 1)}
    searched = flatten(dict(e.search_space))
    for key in e.loop_defaults:
        _require(key in searched, "experiment.loop_defaults", key,
                 "is not a key of experiment.search_space",
                 f"remove it, or add experiment.search_space.{key}")
    for key in searched:
        if key in known or key in e.loop_defaults:
            continue
        if key in prefixes:
            raise ConfigError(f"experiment.search_space.{key}", searched[key],
                              f"searches experiment.params.{key}, which is a mapping",
                              "search one of its keys instead, e.g. "
                              f"{next(k for k in known if k.startswith(key + '.'))}")
        close = difflib.get_close_matches(key, list(known), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(f"experiment.search_space.{key}", searched[key],
                          "is not a key of experiment.params, so the loop may never read it",
                          f"{hint}add {key}: <default> to experiment.params, or list it in "
                          f"experiment.loop_defaults if the loop has its own default")


def import_trainable(ref: str, key: str = "experiment.trainable",
                     example: str = "trainables.digits:train_mlp", arity: int | None = None) -> Any:
    """Import ``"package.module:function"`` and return the function, or raise ``ConfigError``.

    Example:
        >>> import_trainable("trainables.digits:train_mlp").__name__
        'train_mlp'
    """
    fix = f"write it as 'package.module:function', e.g. {example}"
    module_name, sep, attr = ref.partition(":")
    _require(bool(sep and module_name and attr), key, ref, "is not 'module:function'", fix)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(key, ref, f"cannot be imported ({type(exc).__name__}: {exc})",
                          "check the module path, that its package is installed, or run from "
                          "the directory that holds it") from exc
    except Exception as exc:  # the module itself raised while importing
        raise ConfigError(key, ref, f"raised {type(exc).__name__} on import ({exc})",
                          f"fix the error in {module_name}") from exc
    if not hasattr(module, attr):
        public = sorted(n for n, v in vars(module).items()
                        if callable(v) and not n.startswith("_")
                        and getattr(v, "__module__", None) == module.__name__)
        close = difflib.get_close_matches(attr, public, n=1)
        hint = f"did you mean {module_name}:{close[0]}? " if close else ""
        raise ConfigError(key, ref, f"names nothing in {module_name}",
                          f"{hint}functions there: {', '.join(public[:8]) or 'none'}")
    fn = getattr(module, attr)
    _require(callable(fn), key, ref, f"is a {type(fn).__name__}, not a function",
             f"point it at a function, e.g. `def {attr}(config): ...`")
    from sweeps.execution.worker import required_args

    try:
        required = required_args(fn)
    except (TypeError, ValueError):  # a builtin without a signature: let Ray decide
        return fn
    limit = 1 if arity is None else arity
    if required > limit or (arity is not None and required != arity):
        raise ConfigError(key, ref, f"takes {required} required arguments",
                          f"Ray Train calls it with {limit} (config)" if arity is None else
                          f"it is called with {arity} (the checkpoint directory)")
    return fn
