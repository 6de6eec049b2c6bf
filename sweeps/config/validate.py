"""Validate a composed sweep config before anything starts.

    validate(cfg)                                   # raises ConfigError naming key, value, fix

Every check here needs no Ray. The user's code is imported by reference
(``sweeps.config.usercode``); cluster fit (num_workers vs resources) and the trial backend
(``trial.executor``, ``sweeps.trial.backends``) are checked by ``sweeps.driver.prepare``.
"""

from __future__ import annotations

import difflib

from sweeps.config.budget import check_budget
from sweeps.config.schema import (
    BACKENDS,
    MODES,
    RESUME_MODES,
    SCHEDULERS,
    SEARCH_ALGORITHMS,
    SweepConfig,
)
from sweeps.config.usercode import import_trainable, require, takes_config
from sweeps.config.workers import check as check_workers
from sweeps.errors import ConfigError

# Up a layer on purpose: the search-space grammar is search's (Ray-free); validation
# checks the keys it names.
from sweeps.search.space import flatten, flatten_space

__all__ = ["validate"]


def validate(cfg: SweepConfig) -> None:
    """Check every value that needs no Ray; raise ``ConfigError`` on the first bad one.

    Cluster fit (num_workers vs resources) is checked by ``sweeps.driver.resources.plan_resources``.

    Example:
        >>> validate(compose("digits"))  # the built-in experiment passes
        >>> validate(compose("digits", ["experiment.mode=maximize"]))
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: experiment.mode: 'maximize' must be 'min' or 'max'; ...
    """
    e, s, sc, sk = cfg.experiment, cfg.search, cfg.scheduler, cfg.scaling
    require(bool(cfg.sweep.name) and "/" not in cfg.sweep.name, "sweep.name", cfg.sweep.name,
             "must be a non-empty name without '/'", "set sweep.name=my_sweep")
    require(e.mode in MODES, "experiment.mode", e.mode, "must be 'min' or 'max'",
             f"set experiment.mode=max to maximize {e.metric}, min to minimize it")
    require(bool(e.metric), "experiment.metric", e.metric, "must name a reported metric",
             "set experiment.metric=val_acc")
    require(s.algorithm in SEARCH_ALGORITHMS, "search.algorithm", s.algorithm,
             f"must be one of {', '.join(SEARCH_ALGORITHMS)}",
             "pick search=tpe, search=random, search=grid or search=optuna")
    require(s.algorithm == "optuna" or not s.sampler, "search.sampler", dict(s.sampler),
             f"is set, but search={s.algorithm} does not use it",
             "add search=optuna to run that sampler, or drop search.sampler")
    require(s.num_samples >= 1, "search.num_samples", s.num_samples, "must be >= 1",
             "set search.num_samples=8")
    require(s.max_concurrent_trials is None or s.max_concurrent_trials >= 1,
             "search.max_concurrent_trials", s.max_concurrent_trials, "must be >= 1 or null",
             "leave it null to run as many trials as fit, or set a positive number")
    require(s.n_startup_trials is None or s.n_startup_trials >= 0, "search.n_startup_trials",
             s.n_startup_trials, "must be >= 0 or null", "leave it null (a third of "
             "search.num_samples, 2 to 4), or set search.n_startup_trials=4")
    require(not (s.params_first and s.algorithm == "grid"), "search.params_first",
             s.params_first, "is set, but search=grid runs every point of its grid once",
             "drop search.params_first, or use search=tpe")
    require(sc.name in SCHEDULERS, "scheduler.name", sc.name,
             f"must be one of {', '.join(SCHEDULERS)}",
             "pick scheduler=asha, scheduler=none or scheduler=pbt")
    require(sc.max_t >= 1, "scheduler.max_t", sc.max_t, "must be >= 1 (epochs per trial)",
             "set scheduler.max_t=9")
    if sc.name == "asha":
        require(1 <= sc.grace_period <= sc.max_t, "scheduler.grace_period", sc.grace_period,
                 f"must be between 1 and scheduler.max_t={sc.max_t}",
                 "set scheduler.grace_period=1")
        require(sc.reduction_factor >= 2, "scheduler.reduction_factor", sc.reduction_factor,
                 "must be >= 2", "set scheduler.reduction_factor=3")
    if sc.name == "pbt":
        require(1 <= sc.perturbation_interval <= sc.max_t, "scheduler.perturbation_interval",
                 sc.perturbation_interval, f"must be between 1 and scheduler.max_t={sc.max_t}",
                 "set scheduler.perturbation_interval=2")
        require(0 < sc.quantile_fraction <= 0.5, "scheduler.quantile_fraction",
                 sc.quantile_fraction, "must be in (0, 0.5]",
                 "set scheduler.quantile_fraction=0.25")
        require(0 <= sc.resample_probability <= 1, "scheduler.resample_probability",
                 sc.resample_probability, "must be in [0, 1]",
                 "set scheduler.resample_probability=0.25")
    for name, direction in e.metrics.items():  # multi-objective
        require(direction in MODES, f"experiment.metrics.{name}", direction,
                 "must be 'min' or 'max'", f"write {name}: max (or min)")
    if e.metrics:
        require(e.metric in e.metrics, "experiment.metric", e.metric,
                 f"is not one of experiment.metrics ({', '.join(e.metrics)})",
                 "leave experiment.metric unset (the first of experiment.metrics is the primary)"
                 " or name one of them")
        require(e.metrics[e.metric] == e.mode, "experiment.mode", e.mode,
                 f"contradicts experiment.metrics.{e.metric}={e.metrics[e.metric]}",
                 "leave experiment.mode unset, or make the two agree")
    if len(e.metrics) > 1:  # asha becomes MO-ASHA (sweeps.search.moasha); PBT has no such rule
        require(sc.name != "pbt", "scheduler.name", sc.name,
                 f"judges trials by one metric, but experiment.metrics has {len(e.metrics)} "
                 "objectives", "use scheduler=asha (MO-ASHA: promotion by non-dominated sort) "
                 "or scheduler=none with several objectives, or keep one metric")
    check_workers(sk.num_workers)
    require(sk.elastic_resize_interval_s > 0, "scaling.elastic_resize_interval_s",
             sk.elastic_resize_interval_s, "must be > 0 (seconds)",
             "set scaling.elastic_resize_interval_s=10")
    require(sk.cpus_per_worker is None or sk.cpus_per_worker > 0, "scaling.cpus_per_worker",
             sk.cpus_per_worker, "must be > 0 or null", "leave it null for 1 CPU per worker")
    require(sk.gpus_per_worker > 0, "scaling.gpus_per_worker", sk.gpus_per_worker,
             "must be > 0", "set scaling.gpus_per_worker=1")
    _check_backend(sk.backend)
    require(cfg.checkpoint.every >= 1, "checkpoint.every", cfg.checkpoint.every, "must be >= 1",
             "set checkpoint.every=1 to save each epoch")
    require(cfg.checkpoint.keep >= 1, "checkpoint.keep", cfg.checkpoint.keep, "must be >= 1",
             "set checkpoint.keep=2")
    require(cfg.trial.poll_interval_s > 0, "trial.poll_interval_s", cfg.trial.poll_interval_s,
             "must be > 0", "set trial.poll_interval_s=0.1")
    require(cfg.trial.max_failures >= -1, "trial.max_failures", cfg.trial.max_failures,
             "must be >= 0, or -1 for unlimited", "set trial.max_failures=0")
    require(cfg.trial.start_timeout_s > 0 or cfg.trial.start_timeout_s == -1,
             "trial.start_timeout_s", cfg.trial.start_timeout_s,
             "must be > 0 (seconds), or -1 to wait forever", "set trial.start_timeout_s=600")
    require(cfg.trial.max_retries >= -1, "trial.max_retries", cfg.trial.max_retries,
             "must be >= 0, or -1 for unlimited", "set trial.max_retries=1")
    require(cfg.sweep.resume in RESUME_MODES, "sweep.resume", cfg.sweep.resume,
             f"must be one of {', '.join(RESUME_MODES)}",
             "set sweep.resume=auto (continue a sweep of that name if there is one)")
    require(cfg.sweep.lease_heartbeat_s > 0, "sweep.lease_heartbeat_s",
             cfg.sweep.lease_heartbeat_s, "must be > 0 (seconds)", "set sweep.lease_heartbeat_s=5")
    require(cfg.sweep.lease_expiry_s >= 3 * cfg.sweep.lease_heartbeat_s,
             "sweep.lease_expiry_s", cfg.sweep.lease_expiry_s,
             f"must be at least 3 heartbeats (sweep.lease_heartbeat_s="
             f"{cfg.sweep.lease_heartbeat_s:g}), or a busy driver's claim could expire",
             f"set sweep.lease_expiry_s={max(45, 9 * cfg.sweep.lease_heartbeat_s):g}")
    require(cfg.sweep.stop_grace_s > 0, "sweep.stop_grace_s", cfg.sweep.stop_grace_s,
             "must be > 0 (seconds)", "set sweep.stop_grace_s=20")
    check_budget(cfg.sweep.budget)
    require(cfg.tracking.flush_timeout_s >= 0, "tracking.flush_timeout_s",
             cfg.tracking.flush_timeout_s, "must be >= 0", "set tracking.flush_timeout_s=60")
    # Every searched key is a key of params (or in loop_defaults): a misspelled key would
    # otherwise be sampled, logged, and never read by the loop.
    known = flatten(dict(e.params))
    prefixes = {k.rsplit(".", i)[0] for k in known for i in range(1, k.count(".") + 1)}
    searched = flatten_space(dict(e.search_space))
    for key in e.loop_defaults:
        require(key in searched, "experiment.loop_defaults", key,
                 "is not a key of experiment.search_space",
                 f"remove it, or add experiment.search_space.{key}")
    for key in (k for k in searched if k not in known and k not in e.loop_defaults):
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
    fn = import_trainable(e.trainable)
    if (e.params or e.search_space) and not takes_config(fn):
        raise ConfigError("experiment.trainable", e.trainable,
                          "takes no config argument, so the trial's params cannot reach it",
                          "write it as `def train_func(config): ...` (Ray Train's form)")
    if e.datasets:
        from sweeps.config.datasets import check_datasets

        check_datasets(dict(e.datasets))
    for name in e.datasets_to_split or []:
        require(name in e.datasets, "experiment.datasets_to_split", name,
                 f"is not one of experiment.datasets ({', '.join(e.datasets) or 'none'})",
                 "name datasets declared under experiment.datasets, or leave it null (all)")
    if e.model_loader:
        import_trainable(e.model_loader, key="experiment.model_loader",
                         example="mypkg.models:load_from_checkpoint", arity=1)


def _check_backend(backend: str | None) -> None:
    """``scaling.backend``: null, nccl or gloo, with the closest one named for a typo.

    Example:
        >>> try:
        ...     _check_backend("NCCL")
        ... except ConfigError as exc:
        ...     print(exc)
        scaling.backend: 'NCCL' must be null, nccl or gloo; did you mean nccl? leave it null ...
    """
    if backend is None or backend in BACKENDS:
        return
    close = difflib.get_close_matches(str(backend).lower(), BACKENDS, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}? " if close else ""
    raise ConfigError("scaling.backend", backend, "must be null, nccl or gloo",
                      f"{hint}leave it null for nccl on GPU and gloo on CPU, or set "
                      "scaling.backend=gloo to train GPU ranks with gloo")
