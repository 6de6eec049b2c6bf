"""Run a sweep from a validated config: plan, start (or join) Ray, fit, summarize, release.

    from sweeps import compose, run_sweep
    result = run_sweep(compose("digits", ["search.num_samples=4"]))
    result.best["checkpoint"]

Every check that can fail on user input runs before Ray starts (``prepare``). A Ray instance
this function starts is shut down by it; a running one (``ray.init`` done by the caller, or
``ray.address``) is left running, with every placement group of the sweep released.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.config.schema import SweepConfig, validate
from sweeps.errors import ConfigError, SweepError
from sweeps.execution.code_shipping import check_shipping, runtime_env
from sweeps.execution.resources import ResourcePlan, local_cluster_totals, plan_resources
from sweeps.resume.state import ResumeInfo, check_tune_state, decide_resume
from sweeps.search.space import Param, parse_space

if TYPE_CHECKING:  # pandas (via sweeps.report.summary) stays off the --help / --cfg path
    from sweeps.report.summary import Summary

__all__ = ["Prepared", "SweepResult", "SweepInterrupted", "prepare", "run_sweep",
           "sweep_dir_of"]

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    """A config that passed every check, with what was derived from it."""

    cfg: SweepConfig
    params: list[Param]
    constants: dict[str, Any]
    resources: ResourcePlan
    sweep_dir: Path
    tracking_uri: str | None = None
    resume: ResumeInfo | None = None  # the sweep in sweep_dir this run continues


@dataclass
class SweepResult:
    """What a finished sweep produced."""

    sweep_dir: Path
    summary: Summary
    results: Any  # ray.tune.ResultGrid
    released: dict[str, float]  # trial id -> seconds from trial end to its workers' release
    tracking_unsent: int = 0  # tracking records still waiting in the journal at the end
    tracking_uri: str | None = None
    plots: list[Path] | None = None  # PNGs under <sweep dir>/plots (None: too few trials)
    plots_note: str | None = None  # why there are no plots
    unread_keys: list[str] | None = None  # searched keys the loop never read (first trial)

    @property
    def failed(self) -> dict[str, str]:
        """Trial id -> why it failed (the loop raised, or never reported the metric)."""
        return self.summary.failed

    @property
    def best(self) -> dict[str, Any] | None:
        return self.summary.best


def sweep_dir_of(cfg: SweepConfig) -> Path:
    """Absolute sweep directory (relative paths are taken from the current directory)."""
    return Path(cfg.sweep.dir).expanduser().absolute()


def _check_writable(sweep_dir: Path) -> None:
    """Fail unless ``sweep_dir`` can be created and written, leaving nothing behind."""
    existing = sweep_dir
    while not existing.exists():
        existing = existing.parent
    fix = "set sweep.dir to a directory you can write, e.g. sweep.dir=outputs/my_sweep"
    if not existing.is_dir():
        raise ConfigError("sweep.dir", str(sweep_dir), f"is inside {existing}, which is a file",
                          fix)
    probe = existing / f".sweeps-write-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError("sweep.dir", str(sweep_dir),
                          f"is not writable ({exc.strerror or exc})", fix) from exc


def _ray_connected() -> bool:
    """True when this process is connected to Ray (without importing Ray to find out)."""
    import sys

    return "ray" in sys.modules and sys.modules["ray"].is_initialized()


def _cluster_totals(cfg: SweepConfig) -> tuple[float, float]:
    """(CPUs, GPUs) of the cluster the sweep will use, joining it if it already runs.

    Joining ships the user's code (``ray.working_dir``, ``ray.py_modules``) with the job's
    runtime env, which every worker of the sweep inherits (``sweeps.execution.code_shipping``).
    """
    if _ray_connected() or cfg.ray.address:
        import ray

        if not ray.is_initialized():
            ray.init(address=cfg.ray.address, log_to_driver=cfg.sweep.verbose,
                     runtime_env=runtime_env(cfg))
        totals = ray.cluster_resources()
        return float(totals.get("CPU", 0)), float(totals.get("GPU", 0))
    return local_cluster_totals(cfg.ray)


def prepare(cfg: SweepConfig) -> Prepared:
    """Every input check, in order; raises ``ConfigError`` or, for a sweep directory that
    cannot be resumed, ``StateError`` (nothing started, nothing written).

    Only ``ray.address`` makes it touch Ray: it joins that cluster to read its size, and
    leaves it again if a check fails. Ray is not even imported otherwise (dry runs stay fast).
    """
    validate(cfg)
    check_shipping(cfg)  # code to ship exists and fits Ray's upload limit (before Ray starts)
    params, constants = parse_space(cfg.experiment.search_space)
    if not params and cfg.search.algorithm == "tpe":
        raise ConfigError("experiment.search_space", dict(cfg.experiment.search_space),
                          "has no parameter to search",
                          "add one, e.g. lr: tag(log, interval(1e-4, 1e-1)), or use "
                          "search=random to repeat a fixed config")
    sweep_dir = sweep_dir_of(cfg)
    _check_writable(sweep_dir)
    uri = None
    if cfg.tracking.enabled:
        from sweeps.tracking.setup import check_tracking, quiet_http_retries, tracking_uri

        quiet_http_retries()
        uri = tracking_uri(cfg)
        check_tracking(cfg, uri)
    resume = decide_resume(cfg, params, sweep_dir, uri)
    if resume and resume.has_tune_state:
        check_tune_state(sweep_dir)
    joined = not _ray_connected() and bool(cfg.ray.address)
    try:
        cpus, gpus = _cluster_totals(cfg)
        resources = plan_resources(cfg.scaling, cpus, gpus, cfg.search.max_concurrent_trials)
    except Exception:
        if joined:
            import ray

            ray.shutdown()
        raise
    return Prepared(cfg, params, constants, resources, sweep_dir, uri, resume)


def _start_ray(cfg: SweepConfig, resources: ResourcePlan) -> bool:
    """Start a private local Ray instance unless one is connected; True if started here.

    Its workers import the user's modules from the current directory (Ray puts the driver's
    cwd on their ``sys.path``); code is shipped only when ``ray.working_dir`` or
    ``ray.py_modules`` names some (with a working_dir, Ray adds that instead of the cwd).
    """
    import ray

    if ray.is_initialized():
        return False
    ray.init(num_cpus=int(resources.cluster_cpus), num_gpus=int(resources.cluster_gpus),
             include_dashboard=False, log_to_driver=cfg.sweep.verbose,
             runtime_env=runtime_env(cfg),
             logging_level=logging.INFO if cfg.sweep.verbose else logging.WARNING,
             configure_logging=cfg.sweep.verbose)
    return True


@contextlib.contextmanager
def _ray_logs_to_file(sweep_dir: Path, verbose: bool) -> Iterator[Callable[[], None]]:
    """Unless verbose, Ray's own log records go to ``<sweep dir>/ray.log`` while the sweep
    runs; the ``ray`` logger is put back as it was afterwards. Yields ``attach``, to call again
    after ``ray.init``: with ``configure_logging=False`` it clears the ``ray`` logger's
    handlers, and Python's last-resort handler would then print Ray's warnings and errors
    (whole Tune tracebacks) on the console."""
    if verbose:
        yield lambda: None
        return
    import ray  # noqa: F401  (its import adds a stderr handler to the "ray" logger: first)

    # "ray", and the one that logs inside ray.init after it cleared the "ray" handlers (the
    # notice that a new local cluster has token authentication on).
    loggers = [logging.getLogger(n) for n in ("ray", "ray._private.authentication")]
    saved = [(list(lg.handlers), lg.propagate) for lg in loggers]
    handler = logging.FileHandler(sweep_dir / "ray.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def attach() -> None:
        for lg in loggers:
            lg.handlers, lg.propagate = [handler], False

    attach()
    try:
        yield attach
    finally:
        handler.close()
        for lg, (handlers, propagate) in zip(loggers, saved, strict=True):
            lg.handlers, lg.propagate = handlers, propagate


class SweepInterrupted(SweepError):
    """Ctrl-C or SIGTERM stopped the sweep; its state is saved and the same command resumes."""

    interrupted = True  # MLflow marks the sweep's open runs KILLED, not FAILED

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum


@contextlib.contextmanager
def _sigterm_as_sigint() -> Iterator[dict[str, int]]:
    """While the sweep runs, SIGTERM (``kill``, a scheduler's preemption notice) does what
    Ctrl-C does: Tune stops the trials, saves the sweep's state and returns."""
    import signal
    import threading

    caught = {"signum": signal.SIGINT}
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return

    def forward(signum: int, frame: Any) -> None:
        caught["signum"] = signum
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield caught
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_sweep(cfg: SweepConfig, prepared: Prepared | None = None) -> SweepResult:
    """Run the sweep ``cfg`` describes to the end (resuming the one in ``sweep.dir`` if
    ``sweep.resume`` says so) and return its summary; ``SweepInterrupted`` on Ctrl-C/SIGTERM."""
    prep = prepared or prepare(cfg)
    res = prep.resources
    if res.max_concurrent_trials > res.trials_that_fit:
        log.warning("search.max_concurrent_trials=%d but only %d trial(s) fit at once; the "
                    "rest wait for resources", res.max_concurrent_trials, res.trials_that_fit)
    prep.sweep_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS", "0")
    # Tune saves its experiment state at most every 10 s by default; a crash loses what
    # happened since. Every second bounds that (the scheduler's log covers the rest).
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
    # A report without experiment.metric (a training loss between evaluations) is fine; a
    # trial that never reports it is failed by the scheduler, naming the keys it did report
    # (sweeps.search.schedulers). Tune's own check would end the whole sweep on the first such
    # report.
    os.environ.setdefault("TUNE_DISABLE_STRICT_METRIC_CHECKING", "1")
    if not cfg.sweep.verbose:  # Tune's new output engine prints a header box even at verbose=0
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    with _ray_logs_to_file(prep.sweep_dir, cfg.sweep.verbose) as attach_ray_log:
        started = _start_ray(cfg, res)
        attach_ray_log()
        try:
            # After ray.init, which installs its own SIGTERM handler (it aborts the process).
            with _sigterm_as_sigint() as caught:
                return _fit(prep, caught)
        finally:
            if started:
                import ray

                _record_release(prep.sweep_dir)
                ray.shutdown()


def _record_release(sweep_dir: Path) -> None:
    """Before shutting down the Ray instance it started, the sweep checks that no placement
    group is still held and writes the count to ``state/end.json`` (a warning if not 0)."""
    import json
    import time

    from sweeps.placement.release import held_groups

    try:
        held = held_groups()
    except Exception as exc:  # Ray is already going down: nothing to check against
        log.debug("could not count placement groups: %s", exc)
        return
    if held:
        log.warning("%d placement group(s) still held at sweep end", held)
    (sweep_dir / "state").mkdir(exist_ok=True)
    (sweep_dir / "state" / "end.json").write_text(
        json.dumps({"held_placement_groups": held, "time": time.time()}))


def _resume_notes(prep: Prepared, ended: dict[str, Any]) -> tuple[str, list[str]]:
    """One line on what a resumed sweep recovered, and the checkpoint repairs it made."""
    from sweeps.resume.train_runs import checkpoint_epochs, repair_run

    notes: list[str] = []
    continuing = []
    train = prep.sweep_dir / "train"
    for run_dir in sorted(train.iterdir()) if train.is_dir() else []:
        if not run_dir.is_dir() or "." in run_dir.name or run_dir.name in ended:
            continue
        notes += repair_run(run_dir)
        epochs = checkpoint_epochs(run_dir)
        continuing.append(f"{run_dir.name} after epoch {epochs[-1]}" if epochs
                          else f"{run_dir.name} from epoch 1")
    total = prep.cfg.search.num_samples
    left = max(0, total - len(ended) - len(continuing))
    line = (f"resuming: {len(ended)} of {total} trials had ended and are kept; "
            f"{len(continuing)} continue ({', '.join(continuing) or 'none'}); "
            f"{left} not started yet")
    return line, notes


def _fit(prep: Prepared, caught: dict[str, int] | None = None) -> SweepResult:
    from omegaconf import OmegaConf

    from sweeps.execution.tuner import build_tuner, restore_tuner, trial_plan
    from sweeps.execution.unread import UnreadKeysCheck
    from sweeps.placement.release import (
        PlacementGroupReaper,
        job_groups,
        release_all,
        release_new_groups,
    )
    from sweeps.report.progress import ProgressLines
    from sweeps.resume.state import new_record, save_record
    from sweeps.search.schedulers import ended_trials
    from sweeps.tracking.setup import abort_tracking, finish_tracking, start_tracking

    cfg = prep.cfg
    record = prep.resume.record if prep.resume else new_record(cfg, prep.params,
                                                               prep.tracking_uri)
    record.starts += 1
    record.tracking_uri = record.tracking_uri or prep.tracking_uri
    save_record(prep.sweep_dir, record)
    sweep_id = record.sweep_uid
    resuming = prep.resume is not None and prep.resume.has_tune_state
    config_yaml = OmegaConf.to_yaml(OmegaConf.structured(cfg))
    name = "config.yaml" if record.starts == 1 else f"config.start{record.starts}.yaml"
    (prep.sweep_dir / name).write_text(config_yaml)
    ended = ended_trials(prep.sweep_dir) if resuming else {}
    print(f"sweep {cfg.sweep.name}: {cfg.search.num_samples} trials "
          f"({cfg.search.algorithm}, scheduler {cfg.scheduler.name}, max {cfg.scheduler.max_t} "
          f"epochs); {prep.resources.describe()}\n  dir {prep.sweep_dir}", flush=True)
    if resuming:
        release_all(sweep_id)  # flags and groups a driver that died left on a running cluster
        line, notes = _resume_notes(prep, ended)
        for note in notes:
            log.warning(note)
        print(f"  {line} (start {record.starts})", flush=True)
    elif prep.resume:
        print(f"  the previous start (of {record.starts - 1}) saved no trial state; starting "
              "the trials anew", flush=True)
    tracking = start_tracking(prep, sweep_id, record.starts) if prep.tracking_uri else None
    reaper = PlacementGroupReaper(sweep_id)
    progress = ProgressLines(cfg.experiment.metric, cfg.experiment.mode,
                             cfg.search.num_samples, cfg.scheduler.max_t,
                             sweep_dir=str(prep.sweep_dir))
    unread = UnreadKeysCheck([p.path for p in prep.params], prep.sweep_dir / "train")
    trial = trial_plan(cfg, prep.constants, prep.resources, prep.sweep_dir, sweep_id, ended)
    callbacks = [reaper, progress, unread] + ([tracking] if tracking else [])
    groups_before = job_groups()
    try:
        if resuming:
            tuner = restore_tuner(cfg, prep.params, trial, prep.sweep_dir, callbacks)
        else:
            tuner = build_tuner(cfg, prep.params, trial, prep.resources, prep.sweep_dir,
                                callbacks)
        results = tuner.fit()
        unfinished = _unfinished(results, cfg.search.num_samples)
        if unfinished:
            signum = (caught or {}).get("signum", 2)
            raise SweepInterrupted(
                f"sweep {cfg.sweep.name} interrupted ({'SIGTERM' if signum == 15 else 'SIGINT'})"
                f": {cfg.search.num_samples - unfinished} of {cfg.search.num_samples} trials "
                f"ended; its state is saved in {prep.sweep_dir}; run the same command again "
                "to resume it", signum)
    except BaseException as exc:
        if tracking:
            abort_tracking(tracking, exc)
        raise
    finally:
        reaper.join()
        leftover = release_all(sweep_id, keep_stop_flags=True)
        release_new_groups(groups_before)  # Tune's own, removed asynchronously: no warning
        if reaper.released:
            log.info("released the workers of %d ended trial(s), at most %.2f s after each "
                     "ended", len(reaper.released), max(reaper.released.values()))
        if leftover:
            log.warning("released %d placement group(s) still held at sweep end", leftover)
    from sweeps.execution.checkpoint import model_form
    from sweeps.execution.tuner import objective_of
    from sweeps.report.summary import summarize, write_summary
    from sweeps.search.schedulers import verdicts

    summary = summarize(results, objective_of(cfg), [p.path for p in prep.params],
                        verdicts(prep.sweep_dir))
    if summary.best:
        loader = cfg.experiment.model_loader
        summary.best.update(model_form=model_form(summary.best["checkpoint"], loader),
                            model_loader=loader)
    write_summary(summary, prep.sweep_dir)
    plots, note = _plots(prep, summary, results)
    unsent = 0
    if tracking:
        if plots:
            tracking.log_artifacts([str(p) for p in plots], "plots")
        unsent = finish_tracking(tracking, prep, summary)
    return SweepResult(prep.sweep_dir, summary, results, dict(reaper.released), unsent,
                       prep.tracking_uri, plots, note, unread.unread)


def _unfinished(results: Any, num_samples: int) -> int:
    """Samples that neither ended nor errored: Tune returns early on Ctrl-C/SIGTERM, with
    trials still running or never created."""
    trials = results._experiment_analysis.trials
    return num_samples - sum(1 for t in trials if t.status in ("TERMINATED", "ERROR"))


def _plots(prep: Prepared, summary: Summary, results: Any) -> tuple[list[Path] | None, str | None]:
    """The end-of-sweep PNGs, or why there are none (never fails the sweep)."""
    from sweeps.report.plots import NotEnoughTrials, histories_of, plot_sweep

    best_id = summary.best["trial_id"] if summary.best else None
    try:
        return plot_sweep(summary.table, histories_of(results), prep.params,
                          prep.cfg.experiment.metric, best_id, prep.sweep_dir / "plots"), None
    except NotEnoughTrials as exc:
        return None, str(exc)
    except Exception as exc:  # a plotting bug must not hide a finished sweep
        log.warning("plots failed: %s", exc)
        return None, f"plots failed: {exc}"


def _search_args() -> str:
    """The config search path of this command as CLI arguments (for the rerun line), so a
    user's experiment is found again: ``--config-dir DIR`` and ``hydra.searchpath=[...]``."""
    import shlex

    from sweeps.config.search_path import active

    entries = [e for e in active().entries if e.label != "built-in"]
    dirs = [e.path.removeprefix("file://") for e in entries if e.label == "--config-dir"]
    extra = [e.path for e in entries if e.label != "--config-dir"]
    parts = [f"--config-dir {shlex.quote(d)}" for d in dirs[:1]]
    if extra:
        parts.append(shlex.quote(f"hydra.searchpath=[{','.join(extra)}]"))
    return "".join(f"{p} " for p in parts)


def print_result(result: SweepResult, cfg: SweepConfig) -> None:
    """The end-of-sweep report on stdout: table, best config, best checkpoint."""
    from sweeps.report.summary import best_overrides, format_table, loop_traceback

    metric = cfg.experiment.metric
    print("\n" + format_table(result.summary.table))
    if result.failed:
        print(f"\n{len(result.failed)} trial(s) failed:")
        for trial_id, reason in result.failed.items():
            error_file = result.sweep_dir / trial_id / "error.txt"
            print(f"  {trial_id}: {reason}")
            if error_file.is_file():
                for line in loop_traceback(error_file.read_text(errors="replace")):
                    print(f"    {line}")
                print(f"    (whole traceback: {error_file})")
    if result.unread_keys:
        print(f"\nwarning: the training loop never read the searched key(s) "
              f"{', '.join(result.unread_keys)}: the search changed nothing for them")
    best = result.best
    if best is None:
        print(f"\nno trial reported {metric}; see the trials' error.txt under "
              f"{result.sweep_dir}")
        return
    overrides = best_overrides(best["config"])
    checkpoint = (f"{best['checkpoint']}  (sweeps.load_best('{result.sweep_dir}'))"
                  if best["checkpoint"] else "none (the training loop saved no checkpoint)")
    print(f"\nbest trial {best['trial_id']}: {metric}={best['value']:.4f} at epoch "
          f"{best['epoch']}\n  best config as Hydra overrides: {overrides}"
          f"\n  rerun it alone: python -m sweeps {_search_args()}+experiment="
          f"{cfg.experiment.name} search=random search.num_samples=1 scheduler=none "
          f"sweep.name={cfg.sweep.name}_best {overrides}"
          f"\n  checkpoint: {checkpoint}"
          f"\n  summary: {result.sweep_dir / 'summary.csv'} (and .parquet)")
    if result.plots:
        print(f"  plots: {', '.join(str(p) for p in result.plots)}")
    elif result.plots_note:
        print(f"  plots: {result.plots_note}")
    if result.tracking_uri:
        hint = ("run `mlflow ui` in this directory to compare trials"
                if result.tracking_uri.startswith("sqlite:") else "open it to compare trials")
        print(f"  mlflow: {result.tracking_uri} ({hint})")
        model = cfg.tracking.model_name or cfg.experiment.name
        form = best.get("model_form")
        if form == "none":
            pass
        elif form == "files":
            print("  best checkpoint: logged to MLflow as files (best_checkpoint/ in the best "
                  "trial's run); sweeps cannot rebuild the loop's own format, set "
                  "experiment.model_loader to register it as a model")
        elif cfg.tracking.register_model:
            print(f"  best model: logged to MLflow in the best trial's run and registered as "
                  f"'{model}'")
        else:
            print("  best model: logged to MLflow in the best trial's run")

