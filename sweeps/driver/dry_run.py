"""What a sweep will do, before it does it.

    python -m sweeps +experiment=digits sweep.dry_run=true

The plan it prints, and why the ASHA estimate is a lower bound: docs/running.md#plan-first.
Validated as a real run; Ray not started, nothing written. The second line names the file the
experiment came from, so a user file that shadows a built-in one is visible.
"""

from __future__ import annotations

from dataclasses import dataclass

from sweeps.config.datasets import parse_datasets
from sweeps.config.schema import SweepConfig
from sweeps.config.search_path import active, source_of
from sweeps.driver.budget_plan import budget_plan
from sweeps.driver.tuner import reuses_process
from sweeps.search.asha import AsyncHalving
from sweeps.search.defaults import search_story
from sweeps.search.samplers import sampler_name
from sweeps.storage.location import display

__all__ = ["asha_rungs", "expected_epochs", "EpochBudget", "epoch_budget", "format_plan",
           "source_line"]


def asha_rungs(max_t: int, grace_period: int, reduction_factor: int) -> list[int]:
    """Epochs at which ASHA compares trials, below ``max_t``: the rungs the sweep's own
    scheduler builds (``sweeps.search.asha``, Ray's rule).

    Example:
        >>> asha_rungs(9, 1, 3)
        [1, 3]
    """
    levels = AsyncHalving(grace_period, max_t, reduction_factor).rungs()
    return sorted(int(milestone) for milestone, _ in levels if milestone < max_t)


def expected_epochs(max_t: int, rungs: list[int], reduction_factor: int) -> float:
    """Expected epochs of one trial under successive halving with these rungs.

    Example:
        >>> expected_epochs(9, [1, 3], 3)  # 1 + (3 - 1) / 3 + (9 - 3) / 9
        2.333...
    """
    total, previous, share = 0.0, 0, 1.0
    for rung in [*rungs, max_t]:
        total += share * (rung - previous)
        previous, share = rung, share / reduction_factor
    return total


@dataclass(frozen=True)
class EpochBudget:
    """Epochs of compute a sweep can spend."""

    rungs: list[int]
    worst: int
    expected: float


def epoch_budget(cfg: SweepConfig, trials: int | None = None) -> EpochBudget:
    """Worst-case and expected epochs for ``cfg`` (they agree without ASHA) over ``trials``
    trials (default ``search.num_samples``)."""
    s, n = cfg.scheduler, cfg.search.num_samples if trials is None else trials
    if s.name != "asha":
        return EpochBudget([], n * s.max_t, float(n * s.max_t))
    rungs = asha_rungs(s.max_t, s.grace_period, s.reduction_factor)
    return EpochBudget(rungs, n * s.max_t, n * expected_epochs(s.max_t, rungs, s.reduction_factor))


def source_line(cfg: SweepConfig) -> str:
    """Which file the experiment came from, as recorded when it was composed.

    Falls back to looking ``experiment.name`` up in the active search path (a config built in
    Python without ``sweeps.config.compose``).

    Example:
        >>> source_line(compose("digits"))
        'experiment digits from /.../conf/experiment/digits.yaml (built-in)'
    """
    source = source_of(cfg) or active().find(cfg.experiment.name)
    if source is None:
        return f"experiment {cfg.experiment.name} (not composed from an experiment file)"
    return source.describe()


def format_plan(prepared) -> str:  # prepared: sweeps.driver.runner.Prepared
    """The dry-run report as plain text."""
    cfg, n, warm = prepared.cfg, prepared.trials, prepared.warm_start
    s, budget = cfg.scheduler, epoch_budget(cfg, n)
    width = max((len(p.path) for p in prepared.params), default=0)
    lines = [f"plan for sweep {cfg.sweep.name} (dry run: Ray not started, nothing written)",
             f"  {source_line(cfg)}",
             f"  trainable {cfg.experiment.trainable}, {_objectives(cfg)}",
             f"  search {_search(cfg, prepared.params, n, warm, prepared.resume)}, seed "
             f"{cfg.sweep.seed}; {len(prepared.params)} parameter(s):"]
    lines += [f"    {p.path:<{width}}  {p.describe()}" for p in prepared.params]
    if prepared.constants:
        lines.append("  constants: " + ", ".join(f"{k}={v!r}" for k, v in
                                                 prepared.constants.items()))
    if warm is not None:
        lines.append(f"  warm start: {warm.describe()}")
    if s.name == "asha":
        rungs = ", ".join(map(str, budget.rungs)) or "none below max_t"
        mo = cfg.experiment.metrics if len(cfg.experiment.metrics) > 1 else {}
        how = f" by non-dominated sort of {', '.join(mo)} (MO-ASHA)" if mo else ""
        lines.append(f"  scheduler asha: rungs at epoch {rungs}; keeps the top "
                     f"1/{s.reduction_factor} at each{how}; max {s.max_t} epochs")
    elif s.name == "pbt":
        lines.append(f"  scheduler pbt: every {s.perturbation_interval} epoch(s) the bottom "
                     f"{s.quantile_fraction:.0%} copy a top trial's checkpoint and perturb its "
                     f"values (resample p={s.resample_probability:g}); every trial trains "
                     f"{s.max_t} epochs")
    else:
        lines.append(f"  scheduler none: every trial trains {s.max_t} epochs")
    lines.append(f"  trials: {prepared.resources.describe()}")
    reuse = ("reused by the next trial (trial.reuse_process=false: a new one per trial)"
             if reuses_process(cfg, prepared.resources.executor) else
             "a new one per trial (scheduler=pbt: a paused Train run would go on in it)"
             if cfg.trial.reuse_process else "a new one per trial (trial.reuse_process=false)")
    lines.append(f"  trial process: {reuse}")
    if cfg.experiment.datasets:
        split = cfg.experiment.datasets_to_split
        for name, src in parse_datasets(dict(cfg.experiment.datasets)).items():
            how = "split across a trial's workers" if split is None or name in split \
                else "whole on every worker"
            lines.append(f"  dataset {name}: {src.describe()}, {how}")
        lines.append("    built and materialized once by the driver; trials read them with no "
                     "Ray Data CPUs of their own")
    lines.append(f"  epochs of compute: worst case {budget.worst} ({n} x {s.max_t})"
                 + (f", ASHA expected ~{budget.expected:.1f}" if s.name == "asha" else ""))
    resume = prepared.resume
    if resume is not None:
        lines.append(f"  resumes the sweep in its dir ({resume.record.starts} start(s) so far)"
                     + (f"; {resume.growth.describe()}" if resume.growth else ""))
    lines += budget_plan(cfg, budget, prepared.sweep_dir if resume is not None else None)
    lines.append(f"  sweep dir {display(prepared.sweep_dir)}")
    lines.append(f"  tracking {prepared.tracking.describe() if prepared.tracking else 'off'}")
    lines += [f"  note: {note}" for note in prepared.notes]
    lines += [f"  warning: {w}" for w in prepared.warnings]
    return "\n".join(lines)


def _objectives(cfg: SweepConfig) -> str:
    """``maximize val_acc`` or, with several objectives, each one and the Pareto note."""
    e = cfg.experiment
    if len(e.metrics) > 1:
        parts = ", ".join(f"{m}imize {name}" for name, m in e.metrics.items())
        return f"{parts} (multi-objective: Pareto front; {e.metric} ranks checkpoints)"
    return f"{e.mode}imize {e.metric}"


def _search(cfg: SweepConfig, params: list, trials: int, warm=None, resume=None) -> str:
    """``tpe (TPESampler), 8 trials (trial 1: experiment.params; ...)`` / ``grid, 6 points x 1 =
    6 trials``."""
    algorithm = cfg.search.algorithm
    if algorithm == "grid":
        return f"grid, {trials} points = {trials} trials (each once)"
    story = search_story(cfg, params, len(warm.trials) if warm else 0, resumed=resume is not None)
    if algorithm in ("tpe", "optuna"):
        return f"{algorithm} ({sampler_name(cfg)}), {trials} trials{story}"
    return f"{algorithm}, {trials} trials{story}"
