"""Earlier trials that seed this sweep's searcher (``search.warm_start``), read without Ray.

    warm = load_warm_start(cfg.search.warm_start, params, {"val_acc": "max"}, tracking_uri)
    warm.trials[0].params, warm.trials[0].metrics, warm.skipped   # {"lr": 0.01}, ..., {...}

``source`` is, in this order: (1) a sweep directory (``state/sweep.json`` or
``state/scheduler.jsonl``), as a path relative to ``cwd`` (``file:`` allowed) or, for a bare
name, ``outputs/<name>``; (2) an explicit path (``file:``, ``./``, a ``/``) that is no sweep
directory: ``ConfigError`` (a bare name that is some other directory falls through, so
``warm_start=digits`` still finds the MLflow experiment); (3) the MLflow experiment of that name
in ``tracking_uri`` (None: ``sqlite:///<cwd>/mlflow.db``): its trial runs, never creating a
local store; (4) else ``ConfigError`` naming what was tried. Which file of a sweep directory
says what: ``sweeps.search.warm_start_sources`` (not ``summary.csv``, primary metric only and
written at the end, nor ``trial.json``, where a conditional param not sampled looks present).

Metrics are FINAL values (MLflow's "latest"), not bests: Tune's searchers learn a trial from its
last result, and with several objectives the final values are one point that existed. A trial
counts only if it ended and passes ``screen`` (every objective finite, nor ``outcome.WORST`` or
the sink's largest-float stand-in); ``WarmStart.skipped`` counts each first reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps.errors import ConfigError
from sweeps.protocol import SCHEDULER_LOG
from sweeps.search.outcome import WORST
from sweeps.search.space import Param, same_value
from sweeps.search.warm_start_sources import Found, is_sweep_dir, read_mlflow, read_sweep_dir

__all__ = ["EarlierTrial", "WarmStart", "load_warm_start", "screen", "in_space", "OUTSIDE"]

KEY = "search.warm_start"
OUTSIDE = object()  # a value that is not in the current space


@dataclass(frozen=True)
class EarlierTrial:
    """One usable earlier trial: its params in the current space's types (flat dotted keys,
    only the current space's params) and the final value of each objective metric."""

    params: dict[str, Any]
    metrics: dict[str, float]
    trial_id: str


@dataclass(frozen=True)
class WarmStart:
    """The usable trials of ``source`` in the order they started, and why the others were not."""

    source: str
    trials: list[EarlierTrial]
    skipped: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for the console.

        Example:
            >>> WarmStart("sweep dir outputs/d", [], {"lr outside the space": 2}).describe()
            '0 earlier trials from sweep dir outputs/d (skipped: lr outside the space: 2)'
        """
        skipped = f" (skipped: {_counts(self.skipped)})" if self.skipped else ""
        return f"{len(self.trials)} earlier trials from {self.source}{skipped}"


def _counts(skipped: dict[str, int]) -> str:
    return ", ".join(f"{reason}: {n}" for reason, n in skipped.items())


def _number(value: Any) -> float | int | None:
    """``value`` as a finite number (numeric strings too), else None; a bool is not a number."""
    for kind in (int, float) if isinstance(value, str) else ():
        try:
            value = kind(value.strip())
            break
        except ValueError:
            continue
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def in_space(p: Param, raw: Any) -> Any:
    """``raw`` in ``p``'s type when ``p``'s distribution can produce it, else ``OUTSIDE`` (also
    ``sweeps.search.defaults.first_point``'s test of ``experiment.params``).
    Bounds are inclusive, with a relative tolerance of 1e-9 (a value sampled at a log bound
    may come back a rounding off it), for a stepped range also 1e-6 of a step (the grid's own
    tolerance: a bound of 0 has no relative one); such a value is moved onto the bound."""
    if p.kind == "choice":  # equal, else by its text (MLflow keeps params as text), else as a
        for pick in (lambda c: same_value(c, raw), lambda c: str(c) == str(raw),  # number
                     lambda c: not isinstance(c, bool) and isinstance(c, int | float)
                     and _number(raw) is not None and c == _number(raw)):  # "64.0" -> 64
            found = [c for c in p.choices if pick(c)]
            if found:
                return found[0]
        return OUTSIDE
    value = _number(raw)
    if value is None or (p.kind == "int" and value != int(value)):
        return OUTSIDE
    value = int(value) if p.kind == "int" else float(value)
    low, high = p.low, p.high
    for bound, outside in ((low, value < low), (high, value > high)):
        if outside:
            if not math.isclose(value, bound, rel_tol=1e-9, abs_tol=1e-6 * (p.step or 0)):
                return OUTSIDE
            value = int(bound) if p.kind == "int" else float(bound)
    if p.step and not math.isclose((value - low) / p.step, round((value - low) / p.step),
                                   abs_tol=1e-6):
        return OUTSIDE
    return p.snap(value)  # onto the grid exactly: Optuna's containment check allows 1e-8


def screen(trial_id: str, raw_params: dict[str, Any], raw_metrics: dict[str, Any],
           params: list[Param], objectives: dict[str, str]) -> EarlierTrial | str:
    """The trial in the current space, or the reason it cannot seed it.

    Reasons, the first that applies: ``no <metric>``, ``<metric> not finite``,
    ``<key> outside the space`` (not among the choices by value or text, off the bounds or the
    step grid), ``missing <key>`` (a param the trial must have: unconditional, or whose
    condition holds), ``<key> set where its condition fails``. Keys that are no param of the
    current space are dropped (constants, or params of an older space).

    Example:
        >>> lr = Param("lr", "float", low=1e-4, high=0.1, log=True)
        >>> screen("t1", {"lr": "0.01", "old": "x"}, {"val_acc": 0.9}, [lr], {"val_acc": "max"})
        EarlierTrial(params={'lr': 0.01}, metrics={'val_acc': 0.9}, trial_id='t1')
        >>> screen("t2", {"lr": "0.5"}, {"val_acc": 0.9}, [lr], {"val_acc": "max"})
        'lr outside the space'
    """
    metrics: dict[str, float] = {}
    for name in objectives:
        if name not in raw_metrics:
            return f"no {name}"
        value = _number(raw_metrics[name])
        if value is None or abs(value) >= WORST:  # WORST: the scheduler's NaN; max float: inf
            return f"{name} not finite"
        metrics[name] = float(value)
    values = {p.path: in_space(p, raw_params[p.path]) for p in params if p.path in raw_params}
    for p in params:
        if values.get(p.path) is OUTSIDE:
            return f"{p.path} outside the space"
    for p in params:
        holds = p.applies(values)
        if holds and p.path not in values:
            return f"missing {p.path}"
        if not holds and p.path in values:
            return f"{p.path} set where its condition fails"
    return EarlierTrial(values, metrics, trial_id)


def _screened(source: str, where: str, found: list[Found], params: list[Param],
              objectives: dict[str, str]) -> WarmStart:
    trials, skipped = [], {}
    for trial in found:
        result: EarlierTrial | str = trial.status if trial.status != "ended" else (
            "no params recorded" if trial.params is None
            else screen(trial.trial_id, trial.params, trial.metrics, params, objectives))
        if isinstance(result, str):
            skipped[result] = skipped.get(result, 0) + 1
        else:
            trials.append(result)
    if not trials:
        held = f"skipped: {_counts(skipped)}" if skipped else "it holds no trials"
        raise ConfigError(KEY, source, f"names {where}, but no earlier trial overlaps this "
                          f"search space ({held})", "point it at a sweep of the same experiment "
                          "(its sweep.dir or its MLflow experiment name), or drop "
                          "search.warm_start")
    return WarmStart(where, trials, skipped)


def load_warm_start(source: str, params: list[Param], objectives: dict[str, str],
                    tracking_uri: str | None, cwd: Path | None = None) -> WarmStart:
    """The earlier trials ``source`` names that fit this space (module docstring: the lookup
    order, the files read, what a trial's metrics are); raises ``ConfigError``.

    Args:
        source: ``search.warm_start``: a sweep directory, or an experiment name.
        objectives: metric -> "min"/"max"; each must be finite in a trial that is used (the
            directions are the caller's: nothing here ranks trials).
        tracking_uri: the MLflow store; None: ``sqlite:///<cwd>/mlflow.db``.

    Example:
        >>> load_warm_start("nowhere", [], {"val_acc": "max"}, "sqlite:////no/mlflow.db")
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: search.warm_start: 'nowhere' not found; tried ...
    """
    cwd = Path.cwd() if cwd is None else Path(cwd)
    text = source[len("file://"):] if source.startswith("file://") else (
        source[len("file:"):] if source.startswith("file:") else source)
    explicit = source.startswith(("file:", ".", "~")) or "/" in text
    path = cwd / Path(text).expanduser()
    candidates = [path] if explicit else [path, cwd / "outputs" / text]
    for directory in candidates:
        if is_sweep_dir(directory):
            return _screened(source, f"sweep dir {directory}", read_sweep_dir(directory),
                             params, objectives)
    not_sweep = ("is not a sweep directory (no state/sweep.json, no state/"
                 f"{SCHEDULER_LOG}.jsonl)")
    if explicit and path.exists():
        raise ConfigError(KEY, source, f"names {path}, which {not_sweep}",
                          "point it at the sweep.dir of an earlier sweep, e.g. "
                          "outputs/<sweep name>, or at an MLflow experiment name")
    from sweeps.tracking.target import absolute_uri  # up: the store an earlier sweep tracked to

    found, where = read_mlflow(absolute_uri(tracking_uri or "sqlite:///mlflow.db", cwd), source)
    if found is not None:
        return _screened(source, where, found, params, objectives)
    tried = [f"{d} ({not_sweep if d.exists() else 'does not exist'})" for d in candidates]
    raise ConfigError(KEY, source, "not found", f"tried the sweep directory {' and '.join(tried)}"
                      f", then {where}; set it to an earlier sweep's sweep.dir or to an MLflow "
                      "experiment name in the MLflow store (tracking.uri or MLFLOW_TRACKING_URI)")

