"""Every input check of a sweep, before Ray starts and before anything is written.

    prepared = prepare(cfg)          # ConfigError / StateError: nothing started, nothing written
    print(prepared.resources.describe(), prepared.layout.root)

``python -m sweeps`` runs it first (exit code 2 on a bad input; ``sweep.dry_run`` prints the
plan from it), then hands the result to ``run_sweep``. Only ``ray.address`` makes it touch Ray:
it joins that cluster to read its size (and leaves it again if a check fails). Ray is not even
imported otherwise, so dry runs stay fast.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.config.loop_api import TUNE
from sweeps.config.schema import SweepConfig
from sweeps.config.validate import validate
from sweeps.config.workers import is_elastic, worker_range
from sweeps.driver.cluster_address import check_reachable, join_error
from sweeps.driver.code_shipping import check_shipping, runtime_env
from sweeps.driver.resources import ResourcePlan, local_cluster_totals, plan_resources
from sweeps.layout import SweepLayout
from sweeps.lease import claim_store, read_holder
from sweeps.resume.state import (
    ResumeInfo,
    check_same_tracking,
    check_tune_state,
    decide_resume,
    load_record,
)
from sweeps.search.checks import check_search, objectives_of, trial_count
from sweeps.search.defaults import budget_note, settle_defaults, size_note
from sweeps.search.space import Param, parse_space
from sweeps.storage.location import sweep_root
from sweeps.storage.preflight import check_writable
from sweeps.tracking.setup import check_tracking, quiet_http_retries
from sweeps.tracking.target import tracking_target
from sweeps.trial.backends import BackendRequest, choose_backend

if TYPE_CHECKING:
    from sweeps.search.warm_start import WarmStart
    from sweeps.tracking.target import TrackingTarget

__all__ = ["Prepared", "check_config", "prepare", "sweep_dir_of"]


@dataclass
class Prepared:
    """A config that passed every check, with what was derived from it."""

    cfg: SweepConfig
    params: list[Param]
    constants: dict[str, Any]  # the search space's fixed entries (any config value)
    resources: ResourcePlan
    sweep_dir: Path
    tracking: TrackingTarget | None = None  # None: tracking.enabled=false
    resume: ResumeInfo | None = None  # the sweep in sweep_dir this run continues
    warnings: list[str] = field(default_factory=list)  # logged before the sweep starts
    warm_start: WarmStart | None = None  # earlier trials that seed the searcher
    # the newest claim on sweep_dir before it was read, -1 if a driver held it (run_sweep
    # reuses this plan only if the claim it takes is the next one)
    claim_gen: int = -1
    notes: list[str] = field(default_factory=list)  # the plan's "note:" lines, logged as info

    @property
    def layout(self) -> SweepLayout:
        return SweepLayout(self.sweep_dir)

    @property
    def trials(self) -> int:
        """How many trials the sweep runs (``search.num_samples``, x the grid for a grid)."""
        return trial_count(self.cfg, self.params)

    @property
    def objectives(self) -> dict[str, str]:
        """Each objective metric and its mode: ``experiment.metrics``, else the one metric."""
        e = self.cfg.experiment
        return dict(e.metrics) or {e.metric: e.mode}

    @property
    def tracking_uri(self) -> str | None:
        """Where the sweep's MLflow runs go; None when tracking is off."""
        return self.tracking.uri if self.tracking else None

    @property
    def resuming(self) -> bool:
        """Whether Tune's saved state is restored (not only the sweep's record found)."""
        return self.resume is not None and self.resume.has_tune_state


def sweep_dir_of(cfg: SweepConfig) -> Path:
    """Absolute sweep directory (relative paths are taken from the current directory;
    ``file:///abs/path`` is that path). Any other URI (``s3://bucket/prefix``, anything
    ``pyarrow.fs.FileSystem.from_uri`` knows) is an object-store sweep directory, returned as
    its stand-in path (``sweeps.storage.location``): every file of it lives in the store.

    Example:
        >>> sweep_dir_of(compose("digits", ["sweep.dir=outputs/d"])) == Path.cwd() / "outputs/d"
        True
        >>> from sweeps.storage import uri_of
        >>> uri_of(sweep_dir_of(compose("digits", ["sweep.dir=s3://bucket/sweeps/d/"])))
        's3://bucket/sweeps/d'
    """
    return sweep_root(cfg.sweep.dir)


def _ray_connected() -> bool:
    """True when this process is connected to Ray (without importing Ray to find out)."""
    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


def check_config(cfg: SweepConfig) -> None:
    """Every check the config alone answers, with no Ray, no cluster and nothing written:
    each key's (``sweeps.config.validate``), then ``trial.executor``: it names a backend, and a
    named backend does not refuse what the config states (``scaling.use_gpu`` counts only when
    set true: the cluster's GPUs are judged in ``plan_resources``). ``sweeps.validate`` is this.

    Example:
        >>> check_config(compose("digits", ["trial.executor=local"]))
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: trial.executor: 'local' must be one of auto, train, inline; ...
    """
    validate(cfg)
    s = cfg.scaling
    choose_backend(cfg.trial.executor, BackendRequest(
        num_workers=worker_range(s.num_workers)[0], use_gpu=s.use_gpu is True,
        datasets=bool(cfg.experiment.datasets), cluster=cfg.ray.address is not None,
        trainable=cfg.experiment.trainable, elastic=is_elastic(s.num_workers)))


def prepare(cfg: SweepConfig) -> Prepared:
    """Every input check, in order; raises ``ConfigError`` or, for a sweep directory that
    cannot be resumed, ``StateError`` (nothing started, nothing written).

    Example:
        >>> root = tempfile.mkdtemp()
        >>> prep = prepare(compose("digits", [f"sweep.dir={root}/d", "search.num_samples=4"]))
        >>> prep.sweep_dir.name, prep.trials
        ('d', 4)
    """
    check_config(cfg)
    if cfg.ray.address and not _ray_connected():
        check_reachable(cfg.ray.address)  # ray.init would wait minutes on a dead address
    check_shipping(cfg)  # code to ship exists and fits Ray's upload limit (before Ray starts)
    params, constants = parse_space(cfg.experiment.search_space)
    warnings = check_search(cfg, params)
    sweep_dir = sweep_dir_of(cfg)
    check_writable(sweep_dir)
    claim_gen = _free_claim(sweep_dir)  # before the directory is read
    # unset search defaults: the resumed sweep's, else this sweep size's (sweeps.search.defaults)
    record = load_record(sweep_dir)
    cfg = settle_defaults(cfg, record.identity if record is not None else None)
    resume = decide_resume(cfg, params, sweep_dir)
    if resume is not None:
        warnings.extend(resume.notes)
    target = None
    if cfg.tracking.enabled:
        quiet_http_retries()
        record = resume.record if resume else None
        target = tracking_target(cfg, record.tracking_uri if record else None,
                                 record.tracking_experiment if record else None)
        if record is not None:
            check_same_tracking(record, target)
        check_tracking(cfg, target)
    if resume and resume.has_tune_state:
        check_tune_state(sweep_dir)
    warm = None
    if cfg.search.warm_start and not (resume and resume.has_tune_state):
        from sweeps.search.warm_start import load_warm_start

        # MLflow's store even with tracking off: the earlier sweep's runs may be there
        store = target.uri if target else tracking_target(cfg).uri
        warm = load_warm_start(cfg.search.warm_start, params, objectives_of(cfg), store)
    joined = not _ray_connected() and bool(cfg.ray.address)
    try:
        if _ray_connected() or cfg.ray.address:  # the cluster's, joined if it already runs
            import ray

            if not ray.is_initialized():
                # joining ships the user's code (ray.working_dir, ray.py_modules) with the job's
                # runtime env, which every worker of the sweep inherits (driver.code_shipping)
                try:
                    ray.init(address=cfg.ray.address, log_to_driver=cfg.sweep.verbose,
                             runtime_env=runtime_env(cfg))
                except ConnectionError as exc:
                    raise join_error(cfg.ray.address, exc) from exc
            totals = ray.cluster_resources()
            cpus, gpus = float(totals.get("CPU", 0)), float(totals.get("GPU", 0))
        else:
            cpus, gpus = local_cluster_totals(cfg.ray)
        resources = plan_resources(cfg.scaling, cpus, gpus, cfg.search.max_concurrent_trials,
                                   cfg.trial.executor, datasets=bool(cfg.experiment.datasets),
                                   cluster=cfg.ray.address is not None,
                                   trainable=cfg.experiment.trainable)
    except Exception:
        if joined:
            import ray

            ray.shutdown()
        raise
    warnings.extend(resources.notes)
    at_once = min(resources.trials_that_fit, resources.max_concurrent_trials)
    trials = trial_count(cfg, params)
    notes: list[str] = []
    if resources.loop_api == TUNE:
        notes.append(f"{cfg.experiment.trainable} is a Tune function trainable "
                     "(ray.tune.report): one process per trial")
    # a resumed sweep was told at its start; warm-start trials are points TPE models on too
    if resume is None and not (warm and warm.trials):
        warnings += [w for w in [budget_note(cfg, trials)] if w]
        notes += [n for n in [size_note(cfg, trials)] if n]
    if cfg.scheduler.name == "pbt" and at_once < trials:
        warnings.append(f"scheduler=pbt: {at_once} of {trials} trials run at once here, and PBT "
                        "ranks the trials that run together: trials that finish before the "
                        "next start are never compared (with 1 at once, nothing is exploited); "
                        "lower scaling.num_workers or scaling.cpus_per_worker, or "
                        "search.num_samples, so the population runs together")
    return Prepared(cfg, params, constants, resources, sweep_dir, target, resume, warnings,
                    warm, claim_gen, notes)


def _free_claim(sweep_dir: Path) -> int:
    """The newest claim's generation if no driver holds the directory (none, or released),
    else -1."""
    store = claim_store(sweep_dir)
    gen = store.latest()
    if gen == 0:
        return 0
    holder = read_holder(store.read(gen))
    return gen if holder is not None and holder.released else -1
