"""The sweep's own record in its directory, and the decision to start anew or resume.

    resume = decide_resume(cfg, params, sweep_dir)   # in prepare(), before Ray starts
    record = resume.record if resume else new_record(cfg, params)
    save_record(sweep_dir, record)

``<sweep dir>/state/sweep.json`` holds the format version, the Ray version, the sweep's
persistent id (MLflow tags and Ray key-value keys use it, so a resumed sweep continues the same
runs), how many times it was started, and its identity (the config values that make two sweeps
one). ``sweep.resume``, the identity's keys and what a resume refuses:
docs/running.md#resuming-in-detail; growth: ``sweeps.resume.grow``. Written atomically (renamed).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from sweeps import files
from sweeps._ray.tune import experiment_state_files, trials_in_state
from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError, StateError
from sweeps.files import write_atomic
from sweeps.layout import SweepLayout
from sweeps.resume.grow import (
    Growth,
    grid_note,
    identity_changes,
    last_config,
    plan_growth,
    trials_kept,
)
from sweeps.search.decisions import decision_log
from sweeps.search.defaults import tpe_arguments
from sweeps.search.space import Param, flatten, flatten_space
from sweeps.storage.location import display
from sweeps.tracking.masking import mask_value, without_credentials

if TYPE_CHECKING:
    from sweeps.tracking.target import TrackingTarget

__all__ = ["FORMAT_VERSION", "SweepRecord", "ResumeInfo", "StateError", "decide_resume",
           "identity_of", "new_record", "save_record", "load_record",
           "check_tune_state", "check_same_tracking"]

FORMAT_VERSION = 1
RECORD_FILE = "sweep.json"
OPTUNA_SEARCHES = ("tpe", "optuna")  # search.algorithm values whose suggestions Optuna makes


@dataclass
class SweepRecord:
    """What ``state/sweep.json`` holds."""

    sweep_uid: str
    name: str
    identity: dict[str, str]
    format_version: int = FORMAT_VERSION
    ray_version: str = ""
    starts: int = 0
    created: float = field(default_factory=time.time)
    tracking_uri: str | None = None
    tracking_experiment: str | None = None  # the MLflow experiment its runs are in
    optuna_version: str = ""  # the Optuna that suggested its trials ("": not recorded)
    growth: list[dict] = field(default_factory=list)  # each start that grew it (sweeps.resume.grow)


@dataclass
class ResumeInfo:
    """A sweep found in ``sweep.dir`` that this run continues."""

    record: SweepRecord
    has_tune_state: bool  # False: the previous run died before Tune saved anything
    growth: Growth | None = None  # a larger num_samples or max_t (sweeps.resume.grow)
    notes: list[str] = field(default_factory=list)  # warnings for the plan and the start


def identity_of(cfg: SweepConfig, params: list[Param]) -> dict[str, str]:
    """The values that make a sweep this sweep, as flat ``key -> text``.

    Search-space entries are compared in their parsed form, so ``interval(0.1,0.5)`` and
    ``interval(0.1, 0.5)`` are the same space.
    """
    e, s, sc = cfg.experiment, cfg.search, cfg.scheduler
    ident = {"experiment.trainable": e.trainable, "experiment.metric": e.metric,
             "experiment.mode": e.mode, "search.algorithm": s.algorithm,
             "search.num_samples": str(s.num_samples), "sweep.seed": str(cfg.sweep.seed),
             "scheduler.name": sc.name, "scheduler.max_t": str(sc.max_t)}
    if s.algorithm == "tpe":  # what the sampler uses, also for a config not settled yet
        ident["search.n_startup_trials"] = str(tpe_arguments(cfg)["n_startup_trials"])
    if s.algorithm == "optuna":
        ident["search.sampler"] = repr(sorted(dict(s.sampler).items()))
    if e.metrics:
        ident["experiment.metrics"] = repr(dict(e.metrics))
    if sc.name == "pbt":
        for knob in ("perturbation_interval", "quantile_fraction", "resample_probability",
                     "mutate"):
            ident[f"scheduler.{knob}"] = str(getattr(sc, knob))
    if s.algorithm == "grid":
        del ident["search.num_samples"]  # does not apply to a grid
    if sc.name == "asha":
        ident["scheduler.grace_period"] = str(sc.grace_period)
        ident["scheduler.reduction_factor"] = str(sc.reduction_factor)
    searched = {p.path: p.describe() for p in params}
    for key, value in flatten_space(dict(e.search_space)).items():
        ident[f"experiment.search_space.{key}"] = searched.get(key, repr(value))
    for key, value in flatten(dict(e.params)).items():
        ident[f"experiment.params.{key}"] = repr(value)
    return ident


def new_record(cfg: SweepConfig, params: list[Param],
               tracking: TrackingTarget | None) -> SweepRecord:
    return SweepRecord(sweep_uid=f"{cfg.sweep.name}-{uuid.uuid4().hex[:8]}", name=cfg.sweep.name,
                       identity=identity_of(cfg, params),
                       tracking_uri=without_credentials(tracking.uri) if tracking else None,
                       tracking_experiment=tracking.experiment if tracking else None,
                       optuna_version=_optuna_version() if cfg.search.algorithm in OPTUNA_SEARCHES
                       else "")


def _optuna_version() -> str:
    return importlib.metadata.version("optuna")


def save_record(sweep_dir: Path, record: SweepRecord) -> None:
    """Write ``state/sweep.json`` atomically (fsync'ed temp file, then rename)."""
    record.ray_version = importlib.metadata.version("ray")
    # without credentials: they come from the environment (the record may sit in a bucket)
    record.tracking_uri = without_credentials(record.tracking_uri) if record.tracking_uri else None
    layout = SweepLayout(sweep_dir)
    files.make_dirs(layout.state)
    write_atomic(layout.record, json.dumps(asdict(record), indent=2))


def load_record(sweep_dir: Path) -> SweepRecord | None:
    """The record in ``sweep_dir``, None when there is none; ``StateError`` when unusable."""
    path = SweepLayout(sweep_dir).record
    if not files.exists(path):
        if experiment_state_files(sweep_dir):
            raise StateError(
                f"{display(sweep_dir)} holds a sweep from an older sweeps version (it has Tune "
                f"state but no state/{RECORD_FILE}), which cannot be resumed; start a new sweep "
                "with sweep.name=NEW, or move that directory away")
        return None
    try:
        data = json.loads(files.read_text(path))
    except (OSError, ValueError) as exc:
        raise StateError(f"{display(path)} is unreadable ({exc}); it is written atomically, "
                         "so it was changed by hand or the disk failed; restore it, or start a "
                         "new sweep with sweep.name=NEW") from exc
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise StateError(f"{display(sweep_dir)} was written by sweeps state format {version}, this "
                         f"sweeps reads format {FORMAT_VERSION}; resume it with the sweeps "
                         "version that wrote it, or start a new sweep with sweep.name=NEW")
    known = set(SweepRecord.__dataclass_fields__)
    return SweepRecord(**{k: v for k, v in data.items() if k in known})


def _check_optuna_version(record: SweepRecord, cfg: SweepConfig, sweep_dir: Path) -> None:
    """Optuna 5 changed TPE's defaults (multivariate, constant liar): a sweep whose trials an
    Optuna sampler suggested is not resumed under another major version of Optuna, which would
    mix two samplers without a word (``search.allow_optuna_change=true`` accepts that)."""
    if cfg.search.algorithm not in OPTUNA_SEARCHES or not record.optuna_version:
        return
    running = _optuna_version()
    if record.optuna_version.split(".")[0] == running.split(".")[0]:
        return
    if cfg.search.allow_optuna_change:
        logging.getLogger(__name__).warning(
            "search.allow_optuna_change=true: resuming a sweep sampled by optuna %s with optuna "
            "%s; its later trials come from the newer sampler", record.optuna_version, running)
        record.optuna_version = running
        return
    raise StateError(
        f"{display(sweep_dir)} was sampled by optuna {record.optuna_version}; this is optuna "
        f"{running}, whose {cfg.search.algorithm} sampler suggests differently (Optuna 5 changed "
        f"TPE's defaults), so resuming would mix two samplers; this sweeps needs optuna "
        f"{running.split('.')[0]} (the sweeps that started it resumes it as it was): pass "
        "search.allow_optuna_change=true to go on with this one, or start a new sweep with "
        "sweep.name=NEW")


def check_same_tracking(record: SweepRecord, target: TrackingTarget) -> None:
    """A resumed sweep logs where its runs already are: a tracking URI or experiment set (by
    config or MLflow's variables) to another place is refused, naming what set it."""
    recorded = without_credentials(record.tracking_uri or "")  # credentials may rotate
    if recorded and recorded != without_credentials(target.uri):
        was = mask_value(recorded)
        fix = (f"unset {target.uri_key}, or set it to {was}, to continue the same MLflow runs"
               if target.uri_key != "tracking.uri" else
               f"set tracking.uri={was} to continue the same MLflow runs")
        raise ConfigError(target.uri_key, target.shown, "differs from the sweep being resumed "
                          f"(it logs to {was}, and its runs live there)",
                          f"{fix}, or start a new sweep with sweep.name=NEW")
    old = record.tracking_experiment
    if old and old != target.experiment:
        raise ConfigError(target.experiment_from, target.experiment, "differs from the sweep "
                          f"being resumed (its runs are in MLflow experiment {old!r})",
                          f"set it to {old!r} (or unset it) to continue the same runs, or start "
                          "a new sweep with sweep.name=NEW")


def decide_resume(cfg: SweepConfig, params: list[Param], sweep_dir: Path) -> ResumeInfo | None:
    """Resume the sweep in ``sweep_dir`` (``ResumeInfo``) or start anew (None), per
    ``sweep.resume``; raises ``ConfigError``/``StateError`` when neither is allowed."""
    mode = cfg.sweep.resume
    record = load_record(sweep_dir)
    if record is None:
        if mode == "must":
            raise ConfigError("sweep.resume", mode, f"but there is no sweep to resume in "
                              f"{display(sweep_dir)}", "check sweep.name (or sweep.dir), or use "
                              "sweep.resume=auto to start it")
        return None
    if mode == "never":
        raise ConfigError("sweep.resume", mode, f"but {display(sweep_dir)} already holds sweep "
                          f"{record.name!r}", "use sweep.resume=auto to continue it, or pick a "
                          "new sweep.name to start another")
    running = importlib.metadata.version("ray")
    if record.ray_version and record.ray_version.split(".")[:2] != running.split(".")[:2]:
        raise StateError(f"{display(sweep_dir)} was written with ray {record.ray_version}; "
                         f"this is ray {running}, whose Tune cannot restore it; resume with "
                         f"ray=={record.ray_version}, or start a new sweep with sweep.name=NEW")
    changes = identity_changes(record.identity, identity_of(cfg, params), sweep_dir)
    sampled = bool(experiment_state_files(sweep_dir))
    if sampled:
        _check_optuna_version(record, cfg, sweep_dir)
    elif cfg.search.algorithm in OPTUNA_SEARCHES:  # nothing suggested yet: this Optuna starts
        record.optuna_version = _optuna_version()
    if record.tracking_experiment is None:  # a record from before sweeps kept it: the MLflow
        # experiment its tracking/meta.json names, which its tracking state's run ids belong to
        with contextlib.suppress(OSError, ValueError, AttributeError):
            meta = json.loads(files.read_text(SweepLayout(sweep_dir).tracking_meta))
            record.tracking_experiment = meta.get("experiment_name") or None
    growth = plan_growth(cfg, changes, decision_log(sweep_dir).records(),
                         kept=trials_kept(sweep_dir)) if changes else None
    note = grid_note(cfg, last_config(sweep_dir, record.starts))
    return ResumeInfo(record, has_tune_state=sampled, growth=growth, notes=[note] if note else [])


def check_tune_state(sweep_dir: Path) -> None:
    """Fail with ``StateError`` if the newest Tune state file does not parse (torn/corrupted)."""
    found = experiment_state_files(sweep_dir)
    if not found:
        return
    newest = found[-1]
    try:
        trials_in_state(json.loads(files.read_text(newest)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateError(
            f"{display(newest)} is corrupted ({type(exc).__name__}: {str(exc)[:120]}), so the "
            "sweep cannot be resumed from it; nothing was changed. Restore that file from a "
            "backup, or start a new sweep with sweep.name=NEW (the trials' checkpoints stay under "
            f"{display(sweep_dir / 'train')})") from exc
