"""The end-of-sweep report on stdout.

    result = run_sweep(cfg, prepared)
    print_result(result, cfg)          # in python -m sweeps, after a sweep that ran to its end

The trial table, each searched parameter's importance, the Pareto front (multi-objective
sweeps), each failed trial with the user's part of its traceback, searched keys the loop never
read, then the best trial (by the primary metric): its value, its config as Hydra overrides,
the command that reruns it alone, its checkpoint, the summary files, the plots and where MLflow
and TensorBoard have it.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from sweeps import files
from sweeps.config.schema import SweepConfig
from sweeps.config.search_path import active
from sweeps.report.exploits import exploits_of, format_exploits
from sweeps.report.importance import importance_lines
from sweeps.storage.location import display
from sweeps.tracking.mlflow_best import model_key

if TYPE_CHECKING:  # an annotation only: the report side does not import the runner
    from pathlib import Path

    from sweeps.report.result import SweepResult

__all__ = ["print_result"]


def _search_args() -> str:
    """The config search path of this command as CLI arguments (for the rerun line), so a
    user's experiment is found again: ``--config-dir DIR`` and ``hydra.searchpath=[...]``."""
    entries = [e for e in active().entries if e.label != "built-in"]
    dirs = [e.path.removeprefix("file://") for e in entries if e.label == "--config-dir"]
    extra = [e.path for e in entries if e.label != "--config-dir"]
    parts = [f"--config-dir {shlex.quote(d)}" for d in dirs[:1]]
    if extra:
        parts.append(shlex.quote(f"hydra.searchpath=[{','.join(extra)}]"))
    return "".join(f"{p} " for p in parts)


def _sink_state(runs_file: Path, key: str) -> Any:
    """What the tracking sink recorded under ``key`` (``experiment_id``; ``model_of``, the
    trial and checkpoint whose model it logged): None before it reached MLflow."""
    try:
        return json.loads(files.read_text(runs_file)).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def print_result(result: SweepResult, cfg: SweepConfig) -> None:
    """The end-of-sweep report on stdout: table, best config, best checkpoint.

    Example:
        >>> print_result(run_sweep(cfg), cfg)  # doctest: +SKIP
        best trial 9a6685fe: val_acc=0.9777 at epoch 9 ...
    """
    from sweeps.report.summary import best_overrides, format_table, loop_traceback, pareto_json

    layout = result.layout
    metric = cfg.experiment.metric
    print("\n" + format_table(result.summary.table))
    if result.summary.budget:  # spent / budget, trials it stopped, epochs vs max_t
        print("\n" + "\n".join(result.summary.budget))
    if result.summary.importance is not None:
        print("\n" + "\n".join(importance_lines(result.summary.importance)))
    pbt = format_exploits(exploits_of(result.sweep_dir))
    if pbt:
        print("\n" + "\n".join(pbt))
    front = result.summary.pareto
    if front is not None:
        from sweeps.report.pareto import format_pareto

        print("\n" + format_pareto(result.summary.table, front))
    if result.summary.restarts:
        print(f"\n{len(result.summary.restarts)} trial(s) restarted after their loop raised:")
        for trial_id, (count, line) in result.summary.restarts.items():
            print(f"  {trial_id}: {count} restart(s); last: {line}")
    if result.failed:
        print(f"\n{len(result.failed)} trial(s) failed:")
        for trial_id, reason in result.failed.items():
            error_file = layout.error_file(trial_id)
            print(f"  {trial_id}: {reason}")
            if files.is_file(error_file):
                for line in loop_traceback(files.read_text(error_file, errors="replace")):
                    print(f"    {line}")
                print(f"    (whole traceback: {display(error_file)})")
    if result.unread_keys:
        print(f"\nwarning: the training loop never read the searched key(s) "
              f"{', '.join(result.unread_keys)}: the search changed nothing for them")
    best = result.best
    if best is None:
        where = ("every trial failed, as listed above" if result.failed else
                 f"see the sweep's log, {display(layout.ray_log)}")
        print(f"\nno trial reported {metric}: {where}")
        _tensorboard_line(result, cfg)
        return
    overrides = best_overrides(best["config"])
    checkpoint = (f"{display(best['checkpoint'])}  "
                  f"(sweeps.load_best('{display(result.sweep_dir)}'))"
                  if best["checkpoint"] else "none (the training loop saved no checkpoint)")
    print(f"\nbest trial {best['trial_id']}: {metric}={best['value']:.4f} at epoch "
          f"{best['epoch']}\n  best config as Hydra overrides: {overrides}"
          f"\n  rerun it alone: python -m sweeps {_search_args()}+experiment="
          f"{cfg.experiment.name} search=random search.num_samples=1 scheduler=none "
          f"sweep.name={cfg.sweep.name}_best {overrides}"
          f"\n  checkpoint: {checkpoint}"
          f"\n  summary: {display(layout.summary_csv)} (and .parquet)"
          + (f"\n  pareto front: {display(pareto_json(result.sweep_dir))}"
             if front is not None else ""))
    if result.plots:
        print(f"  plots: {', '.join(display(p) for p in result.plots)}")
    elif result.plots_note:
        print(f"  plots: {result.plots_note}")
    if result.tracking:
        unsent, why, fix = result.tracking_held
        count = "the end and other" if unsent < 0 else unsent
        waiting = (f"waiting in the journal ({count} records): {why}; they go to MLflow at the "
                   f"next start once {fix}")
        form = best.get("model_form")
        print(f"  mlflow: {result.tracking.describe()}" + (
            f"\n    not all there: {count} records wait in {display(layout.tracking_journal)}"
            if unsent and form != "none" else f"\n    not all there: {waiting}" if unsent else ""))
        experiment = _sink_state(layout.tracking_runs, "experiment_id")
        if experiment:
            print(f"    compare trials: {result.tracking.runs_page(experiment)}")
        if form == "none":
            pass
        elif unsent:
            print(f"  best model: {waiting}")
        elif _sink_state(layout.tracking_runs, "model_of") != model_key(best):
            print("  best model: not in MLflow: it refused the model (the warning above says "
                  "why)")
        elif form == "files":
            print("  best checkpoint: logged to MLflow as files (best_checkpoint/ in the best "
                  "trial's run); sweeps cannot rebuild the loop's own format, set "
                  "experiment.model_loader to register it as a model")
        elif cfg.tracking.register_model:
            print(f"  best model: logged to MLflow in the best trial's run and registered as "
                  f"'{cfg.tracking.model_name or cfg.experiment.name}'")
        else:
            print("  best model: logged to MLflow in the best trial's run")
    _tensorboard_line(result, cfg)


def _tensorboard_line(result: SweepResult, cfg: SweepConfig) -> None:
    """The commands that open the trials' TensorBoard runs (``sweeps.tracking.tensorboard``),
    if the sweep wrote any, and optuna-dashboard."""
    if cfg.tracking.tensorboard and files.is_dir(result.layout.tensorboard):
        print(f"  tensorboard: tensorboard --logdir {display(result.layout.tensorboard)}")
    log = result.layout.optuna_log  # sweeps.tracking.optuna_log; an object store's: exported
    print(f"  optuna-dashboard: optuna-dashboard {display(log)}" if files.exists(log) else
          f"  optuna-dashboard: python -m sweeps optuna-log {display(result.sweep_dir)} "
          "optuna.log && optuna-dashboard optuna.log")
