"""One start of a prepared sweep on a running Ray: Tune's run, then the sweep's end.

    with ray_session(cfg, prepared, interrupt):    # in run_sweep
        return fit(prepared, interrupt)

Before Tune: the sweep's record (one more start), this start's config file, the opening lines
(and, resuming, what was recovered). Tune runs with the sweep's callbacks: the placement-group
reaper, the live progress, the unread-keys check, on a cluster the cluster watch (nodes that
join or leave, trials at once following its size), MLflow tracking, the TensorBoard events
(which also keep Tune's own TBX logger out, ``sweeps.tracking.tensorboard``) and Optuna's
journal (``sweeps.tracking.optuna_log``). After Tune, whatever it ended with: every placement
group of the sweep is released. A run that Tune returned from early (Ctrl-C, SIGTERM) raises
``SweepInterrupted``; a finished one is summarized (``summary.csv``, ``best.json``), plotted
and closed in MLflow.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from sweeps._ray.tune import concurrency_limit, quiet_trial_lines
from sweeps.driver.budget_run import reopen_budget_stops, start_ledger
from sweeps.driver.datasets import build_datasets
from sweeps.driver.interrupt import PREEMPTED, Interrupt
from sweeps.driver.prepare import Prepared
from sweeps.driver.tracking_run import abort_tracking, finish_tracking, start_tracking
from sweeps.driver.tuner import build_tuner, objective_of, restore_tuner, trial_plan
from sweeps.errors import SweepInterrupted
from sweeps.files import write_atomic
from sweeps.loop.checkpoint import model_form
from sweeps.report.budget import budget_lines
from sweeps.report.result import SweepResult
from sweeps.resume.grow import apply_growth
from sweeps.resume.notes import resume_notes
from sweeps.resume.state import SweepRecord, new_record, save_record
from sweeps.search.budget import logged_epochs
from sweeps.search.decisions import decision_log, ended_trials
from sweeps.search.outcome import Objective
from sweeps.storage.location import display, filesystem
from sweeps.storage.trees import publish

if TYPE_CHECKING:  # Ray, pandas and MLflow are imported once a sweep really runs
    from ray.tune import Callback, ResultGrid

    from sweeps.driver.unread import UnreadKeysCheck
    from sweeps.placement.reaper import PlacementGroupReaper
    from sweeps.report.summary import Summary
    from sweeps.search.budget import BudgetLedger
    from sweeps.tracking.callback import MLflowTracking
    from sweeps.tracking.tensorboard import TensorBoardEvents

__all__ = ["fit"]

log = logging.getLogger(__name__)


def fit(prep: Prepared, interrupt: Interrupt | None = None) -> SweepResult:
    """Run Tune for the prepared sweep (Ray already up) and return its result; raises
    ``SweepInterrupted`` when Tune returned before every trial ended (``interrupt``: which
    signal stopped it).

    Example:
        >>> fit(prepare(cfg)).summary.best["trial_id"]  # doctest: +SKIP
        '9a6685fe'
    """
    from sweeps._ray.placement import alive_nodes
    from sweeps.driver.cluster_watch import ClusterWatch
    from sweeps.driver.storage_watch import StorageWatch
    from sweeps.driver.unread import UnreadKeysCheck
    from sweeps.placement.reaper import (
        PlacementGroupReaper,
        job_groups,
        release_all,
        release_new_groups,
    )
    from sweeps.report.progress import ProgressLines
    from sweeps.tracking.optuna_log import OptunaLog

    cfg, layout, objective = prep.cfg, prep.layout, objective_of(prep.cfg)
    datasets = build_datasets(dict(cfg.experiment.datasets))  # before anything is recorded
    record, ended, reopened = _start(prep)
    sweep_id = record.sweep_uid
    tracking: MLflowTracking | None = (start_tracking(prep, sweep_id, record.starts)
                                       if prep.tracking_uri else None)
    growth = prep.resume.growth if prep.resume else None
    if tracking and growth and growth.stay_stopped:  # their runs had ended as completed
        tracking.record({"op": "trial_tags", "tags": growth.stopped_tags()})
    reaper = PlacementGroupReaper(sweep_id)
    progress = ProgressLines(objective, prep.trials, sweep_dir=str(prep.sweep_dir))
    progress.budget = ledger = start_ledger(prep, record.starts)
    if ended:  # the trials a resumed sweep keeps count as done, their best as the best so far
        progress.kept(decision_log(prep.sweep_dir).records())
    unread = UnreadKeysCheck([p.path for p in prep.params], layout.train)
    trial = trial_plan(cfg, prep.constants, prep.resources, prep.sweep_dir, sweep_id, ended,
                       datasets)
    watch = (ClusterWatch(sweep_id, prep.resources, progress.note,  # ray.address, or 2+ nodes
                          follow=cfg.search.max_concurrent_trials is None)
             if cfg.ray.address is not None or len(alive_nodes()) >= 2 else None)
    events = _tensorboard(prep)
    optuna_log = None if filesystem(prep.sweep_dir) else OptunaLog(  # an object store's: export
        str(layout.optuna_log), cfg.sweep.name, prep.objectives, prep.params, objective,
        str(prep.sweep_dir))
    storage = StorageWatch(prep.sweep_dir, interrupt)
    callbacks: list[Callback] = ([storage, reaper, progress, unread] + ([watch] if watch else [])
                                 + ([tracking] if tracking else []) + ([events] if events else [])
                                 + ([optuna_log] if optuna_log else [])
                                 + ([] if cfg.sweep.verbose else [quiet_trial_lines()]))
    groups_before = job_groups()
    try:
        if prep.resuming:
            tuner = restore_tuner(cfg, prep.params, trial, prep.sweep_dir, callbacks, ledger,
                                  grown=prep.resume is not None and bool(prep.resume.record.growth),
                                  reopened=reopened)
        else:
            tuner = build_tuner(cfg, prep.params, trial, prep.resources, prep.sweep_dir,
                                callbacks, prep.warm_start,
                                resizable=watch is not None and watch.follow, ledger=ledger)
        if watch:
            watch.attach(concurrency_limit(tuner))
        if interrupt is not None:
            interrupt.tune_running = True  # a SIGTERM now stops Tune as Ctrl-C does
        try:
            results: ResultGrid = tuner.fit()
        except KeyboardInterrupt:  # our SIGINT came before Tune's handler did (or after)
            if interrupt is None or not interrupt.stopping:
                raise
            raise _interrupted(prep, interrupt) from None
        finally:
            if interrupt is not None:
                interrupt.tune_running = False
        if storage.refused is not None:  # the sweep directory refused a trial's write
            raise storage.refused
        ended_now = results.num_terminated + results.num_errors
        spent = ledger is not None and ledger.exhausted_by is not None and ended_now == len(
            results) and not (interrupt is not None and interrupt.stopping)  # fewer trials
        if ended_now != prep.trials and not spent:  # Tune returned early on Ctrl-C/SIGTERM
            raise _interrupted(prep, interrupt)
    except BaseException as exc:
        if tracking:
            abort_tracking(tracking, exc)
        raise
    finally:
        reaper.join()  # every placement group of the sweep released, whatever Tune ended with
        leftover = release_all(sweep_id, keep_stop_flags=True)
        release_new_groups(groups_before)  # Tune's own, removed asynchronously: no warning
        if reaper.released:
            log.info("released the workers of %d ended trial(s), at most %.2f s after each "
                     "ended", len(reaper.released), max(reaper.released.values()))
        if leftover:
            log.warning("released %d placement group(s) still held at sweep end", leftover)
        if ledger is not None:
            ledger.tick(force=True)
    if interrupt is not None:  # every trial ended: a SIGTERM lets the end be written (in grace)
        interrupt.closing = True
    return _finish(prep, objective, results, reaper, unread, tracking, ledger)


def _tensorboard(prep: Prepared) -> TensorBoardEvents | None:
    """The TensorBoard callback (with ``tracking.tensorboard=false``, one that writes nothing,
    so that Tune adds no event files of its own either); None without tensorboardX."""
    from sweeps.tracking.tensorboard import TensorBoardEvents, TensorBoardSettings

    cfg = prep.cfg
    settings = TensorBoardSettings(
        str(prep.sweep_dir), tuple(prep.objectives.items()), tuple(p.path for p in prep.params),
        cfg.scheduler.name, float(cfg.scheduler.max_t)) if cfg.tracking.tensorboard else None
    try:
        return TensorBoardEvents(settings)
    except ImportError as exc:  # tensorboardX ships with ray[tune]; a trimmed install may not
        log.warning("tensorboard: no event files (%s; pip install tensorboardX)", exc)
        return None


def _start(prep: Prepared) -> tuple[SweepRecord, dict[str, dict[str, Any]], list[str]]:
    """The sweep's record, counting this start, and this start's config file; the opening
    lines. Returns the record, the trials that had ended (resuming; else none) and the ended
    trials this start runs again (a grown max_t, a raised budget)."""
    from sweeps.placement.reaper import release_all

    cfg = prep.cfg
    record = prep.resume.record if prep.resume else new_record(cfg, prep.params, prep.tracking)
    growth = prep.resume.growth if prep.resume else None
    reopened: list[str] = []  # ended trials Tune restores as pending on this start
    if growth is not None:  # before the record: a kill -9 in between plans the same growth
        reopened = apply_growth(prep.sweep_dir, growth, record, prep.resuming)
    if prep.resuming:  # a larger budget: the trials it ended go on
        reopened += reopen_budget_stops(prep, record.starts + 1)
    record.starts += 1
    if prep.tracking:  # a sweep started with tracking off records where it logs from now on
        record.tracking_uri = record.tracking_uri or prep.tracking.uri
        record.tracking_experiment = record.tracking_experiment or prep.tracking.experiment
    save_record(prep.sweep_dir, record)
    write_atomic(prep.layout.config(record.starts), OmegaConf.to_yaml(OmegaConf.structured(cfg)))
    ended = ended_trials(prep.sweep_dir) if prep.resuming else {}
    print(f"sweep {cfg.sweep.name}: {prep.trials} trials "
          f"({cfg.search.algorithm}, scheduler {cfg.scheduler.name}, max {cfg.scheduler.max_t} "
          f"epochs); {prep.resources.describe()}\n  dir {display(prep.sweep_dir)}", flush=True)
    if prep.warm_start is not None:
        print(f"  warm start: {prep.warm_start.describe()}", flush=True)
    if growth is not None:
        print(f"  {growth.describe()}", flush=True)
    if prep.resuming:
        release_all(record.sweep_uid)  # flags and groups a driver that died left on a cluster
        line, notes = resume_notes(prep.layout, prep.trials, ended)
        for note in notes:
            log.warning(note)
        print(f"  {line} (start {record.starts})", flush=True)
    elif prep.resume:
        print(f"  the previous start (of {record.starts - 1}) saved no trial state; starting "
              "the trials anew", flush=True)
    return record, ended, reopened


def _interrupted(prep: Prepared, interrupt: Interrupt | None) -> SweepInterrupted:
    """The error for a sweep Tune returned from before every trial ended. Its trials that
    ended are counted as the resume counts them (the decision log): Tune calls a trial it
    stopped on the interrupt terminated, and the same command continues it."""
    ended = len(ended_trials(prep.sweep_dir))
    signum = interrupt.signum if interrupt else 2
    why = (interrupt.reason if interrupt and interrupt.reason
           else PREEMPTED if signum == signal.SIGTERM else "interrupted (SIGINT)")
    return SweepInterrupted(
        f"sweep {prep.cfg.sweep.name} {why}: {ended} of {prep.trials} trials ended; its state is "
        f"saved in {display(prep.sweep_dir)}; run the same command again to resume it", signum)


def _finish(prep: Prepared, objective: Objective, results: ResultGrid,
            reaper: PlacementGroupReaper, unread: UnreadKeysCheck,
            tracking: MLflowTracking | None, ledger: BudgetLedger | None = None) -> SweepResult:
    """Summary, best model's form, plots and MLflow's end of a sweep whose trials all ended."""
    from sweeps.report.history import with_history
    from sweeps.report.importance import param_importance
    from sweeps.report.summary import summarize, write_summary
    from sweeps.search.schedulers import verdicts

    whole = with_history(results, prep.sweep_dir)  # a resumed trial's earlier reports too
    summary = summarize(whole, objective, [p.path for p in prep.params],
                        verdicts(prep.sweep_dir), prep.cfg.experiment.metrics)
    summary.importance = param_importance(summary.table, prep.params, prep.objectives,
                                          pbt=prep.cfg.scheduler.name == "pbt")
    summary.budget = budget_lines(list(logged_epochs(prep.sweep_dir).values()),
                                  verdicts(prep.sweep_dir), ledger, prep.cfg.scheduler.max_t)
    if summary.best:
        loader = prep.cfg.experiment.model_loader
        summary.best.update(model_form=model_form(summary.best["checkpoint"], loader),
                            model_loader=loader)
    write_summary(summary, prep.sweep_dir)
    plots, note = _plots(prep, objective, summary, whole)
    held = (0, "", "")
    if tracking:
        if plots:
            tracking.log_artifacts([str(p) for p in plots], "plots")
        held = finish_tracking(tracking, prep, summary)
    return SweepResult(prep.sweep_dir, summary, results, dict(reaper.released), held,
                       prep.tracking, plots, note, unread.unread,
                       release_polls=dict(reaper.release_polls))


def _plots(prep: Prepared, objective: Objective, summary: Summary,
           results: Any) -> tuple[list[Path] | None, str | None]:
    """The end-of-sweep PNGs, or why there are none (never fails the sweep)."""
    from sweeps.report.plots import NotEnoughTrials, histories_of, plot_sweep

    best_id = summary.best["trial_id"] if summary.best else None
    try:
        plots = plot_sweep(summary.table, histories_of(results), prep.params, objective.metric,
                           best_id, prep.layout.plots, summary.pareto, summary.importance)
        publish(prep.layout.plots)  # to the object store of a URI sweep directory
        return plots, None
    except NotEnoughTrials as exc:
        return None, str(exc)
    except Exception as exc:  # a plotting bug must not hide a finished sweep
        log.warning("plots failed: %s", exc)
        return None, f"plots failed: {exc}"
