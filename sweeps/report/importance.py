"""Which searched parameters mattered: Optuna's PED-ANOVA over the sweep's scored trials.

    found = param_importance(summary.table, prep.params, {"val_acc": "max"})   # driver.fit
    print("\n".join(importance_lines(found)))

The trials that completed or were stopped early with finite scores (the summary table's values;
with several objectives, each at the primary metric's best report) become an in-memory Optuna
study ranked by ``PedAnovaImportanceEvaluator``, Optuna 5's default; what a user reads:
docs/running.md#which-parameters-mattered. A trial whose values are outside the space (a first
trial run from ``experiment.params``) is left out.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sweeps.search.optuna_space import optuna_name, optuna_params
from sweeps.search.space import Param
from sweeps.trial.clock import finite_float

__all__ = ["Importance", "MIN_TRIALS", "param_importance", "importance_lines", "importance_plot"]

MIN_TRIALS = 11  # the best 10 %, rounded up, holds two trials
SCORED = ("completed", "stopped")


@dataclass
class Importance:
    """Each searched param's share of the importance (largest first; empty: no ranking), how
    many trials it was computed from, and why there is no ranking (or None)."""

    values: dict[str, float] = field(default_factory=dict)
    trials: int = 0
    objectives: list[str] = field(default_factory=list)
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"evaluator": "PedAnovaImportanceEvaluator", **asdict(self)}


def _trials(table: pd.DataFrame, params: list[Param], objectives: dict[str, str]) -> list:
    import optuna

    out = []
    for row in table.to_dict("records"):
        values = [finite_float(row.get(m)) for m in objectives]
        if row.get("status") not in SCORED or None in values:
            continue
        given = {p.path: v for p in params  # None or NaN: a condition that did not hold
                 if (v := row.get(p.path)) is not None and not (isinstance(v, float) and v != v)}
        named, spaces = optuna_params(given, params)
        with contextlib.suppress(ValueError):  # a value outside today's space
            out.append(optuna.trial.create_trial(params=named, distributions=spaces, values=values))
    return out


def param_importance(table: pd.DataFrame, params: list[Param], objectives: dict[str, str],
                     pbt: bool = False) -> Importance:
    """Rank ``params`` by the scored trials of the summary ``table`` for ``objectives``
    (metric -> ``max``/``min``); ``pbt``: a PBT sweep, whose trials change values as they
    train, so no value earned a score alone. Never raises: a failure is the note.

    Example:
        >>> table = pd.DataFrame({"trial_id": ["a", "b"], "lr": [0.1, 0.2],
        ...                       "val_acc": [0.9, 0.8], "status": ["completed"] * 2})
        >>> param_importance(table, [Param("lr", "float", low=0.01, high=1.0)],
        ...                  {"val_acc": "max"}).note
        'not ranked: 2 trial(s) scored, PED-ANOVA needs 11'
    """
    found = Importance(objectives=list(objectives))
    try:
        _rank(found, table, params, objectives, pbt)
    except Exception as exc:  # a ranking must never fail a finished sweep
        text = " ".join(str(exc).split())[:200]  # one line, whatever the exception's text
        found.values, found.note = {}, f"not ranked: it failed ({type(exc).__name__}: {text})"
    return found


def _rank(found: Importance, table: pd.DataFrame, params: list[Param],
          objectives: dict[str, str], pbt: bool) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the driver's samplers do
    trials = _trials(table, params, objectives) if params and not pbt else []
    found.trials = len(trials)
    if pbt or not params:
        found.note = ("not ranked: PBT changes a trial's values as it trains" if pbt else
                      "nothing to rank: the search space has no searched parameter")
        return
    if len(trials) < MIN_TRIALS:
        found.note = f"not ranked: {len(trials)} trial(s) scored, PED-ANOVA needs {MIN_TRIALS}"
        return
    with warnings.catch_warnings():  # experimental-API and equal-quantile warnings
        warnings.simplefilter("ignore")
        study = optuna.create_study(directions=[
            "maximize" if mode == "max" else "minimize" for mode in objectives.values()])
        study.add_trials(trials)
        raw = optuna.importance.get_param_importances(  # Optuna spreads a zero sum evenly
            study, evaluator=optuna.importance.PedAnovaImportanceEvaluator(), normalize=False)
    total = sum(raw.values())
    if not total > 0:
        found.note = "not ranked: no parameter sets the best trials apart from the rest"
        return
    paths = {optuna_name(p.path): p.path for p in params}
    found.values = {paths[k]: v / total for k, v in
                    sorted(raw.items(), key=lambda kv: (-kv[1], kv[0]))}


def importance_lines(found: Importance) -> list[str]:
    """The console's lines: a bar per param, or the note.

    Example:
        >>> importance_lines(Importance({"lr": 0.75, "hidden": 0.25}, 12, ["val_acc"]))[1:]
        ['  lr      0.750  ###############', '  hidden  0.250  #####']
    """
    if not found.values:
        return [f"parameter importance: {found.note}"]
    width = max(len(p) for p in found.values)
    what = " and ".join(found.objectives)
    return [f"parameter importance for {what} (Optuna PED-ANOVA over {found.trials} trials, "
            "sums to 1):", *(f"  {p.ljust(width)}  {v:.3f}  {'#' * round(v * 20)}"
                             for p, v in found.values.items())]


def importance_plot(found: Importance, path: Path) -> Path:
    """``importance.png``: one horizontal bar per param, the most important on top."""
    from matplotlib.figure import Figure

    names = list(found.values)[::-1]
    fig = Figure(figsize=(6, 0.8 + 0.35 * len(names)), dpi=110, layout="constrained")
    ax = fig.add_subplot()
    ax.barh(names, [found.values[n] for n in names], color="tab:blue")
    ax.set(xlabel="importance (sums to 1)", xlim=(0, 1))
    ax.set_title(f"importance for {' and '.join(found.objectives)}: PED-ANOVA over "
                 f"{found.trials} trials", fontsize=10)
    fig.savefig(path)
    return path
