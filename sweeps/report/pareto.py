"""The Pareto front of a multi-objective sweep: the trials no other trial beats on every objective.

    summary = summarize(results, objective, params, verdicts, cfg.experiment.metrics)
    print(format_pareto(summary.table, summary.pareto))      # in print_result
    pareto_plot(summary.table, summary.pareto.objectives, plots_dir / "pareto.png")

``experiment.metrics`` ({val_acc: max, n_params: min}) names the objectives; with two or more the
summary marks each trial ``pareto`` True/False, prints this section, writes ``pareto.json`` and
draws ``pareto.png``.

Per-trial values (decided in ``sweeps.report.summary``): every objective's value comes from ONE
report, the one where the primary metric (``experiment.metric``, the first of ``metrics``) was
best (of equal bests, the earliest). A front compares points, and a point is only real if its
coordinates were measured together: taking each objective's best over the epochs would pair,
say, epoch 9's accuracy with epoch 1's loss, a model that never existed. The last report
would be one point too, but it is not what the sweep optimizes: the primary's best report is
the one the table scores the trial by and the one its best checkpoint comes from (unless a tie
or a deleted checkpoint moves it), so the front names models one can load. A trial whose report
lacks an objective, or has it NaN/inf, is not on the front.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweeps.errors import ConfigError

__all__ = ["ParetoFront", "pareto_front", "front_of", "format_pareto", "pareto_records",
           "pareto_tags", "pareto_plot"]


@dataclass(frozen=True)
class ParetoFront:
    """A sweep's front: the objectives (metric -> "min"/"max", primary first), the trial ids on
    it (best primary first), every trial compared and the searched parameters."""

    objectives: dict[str, str]
    members: tuple[str, ...]
    trial_ids: tuple[str, ...]
    params: tuple[str, ...] = ()

    def describe(self) -> str:
        """The objectives as one line, e.g. ``val_acc max, n_params min``.

        Example:
            >>> ParetoFront({"val_acc": "max", "n_params": "min"}, (), ()).describe()
            'val_acc max, n_params min'
        """
        return ", ".join(f"{m} {d}" for m, d in self.objectives.items())


def _check(objectives: Mapping[str, str]) -> None:
    for metric, direction in objectives.items():
        if direction not in ("min", "max"):
            raise ConfigError(f"experiment.metrics.{metric}", direction,
                              "is not a direction", f"write {metric}: max or {metric}: min")


def _number(value: Any) -> float:
    """A finite float, or NaN for anything else (missing, None, NaN, inf, text)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _rows(rows: Sequence[Mapping[str, Any]] | pd.DataFrame) -> tuple[list[Any], list[Mapping]]:
    if isinstance(rows, pd.DataFrame):
        return list(rows.index), rows.to_dict("records")
    return list(range(len(rows))), list(rows)


def pareto_front(rows: Sequence[Mapping[str, Any]] | pd.DataFrame,
                 objectives: Mapping[str, str]) -> list[Any]:
    """Indices of the non-dominated rows (row labels for a DataFrame, positions for a list).

    Row a dominates row b when a is no worse on every objective and strictly better on one,
    each in its own direction. A row missing an objective, or with a NaN/inf value, is on no
    front and dominates nothing; equal rows do not dominate each other, so all are on it.

    Example:
        >>> rows = [{"acc": 0.9, "size": 10}, {"acc": 0.8, "size": 5},
        ...         {"acc": 0.7, "size": 20}, {"acc": float("nan"), "size": 1}]
        >>> pareto_front(rows, {"acc": "max", "size": "min"})
        [0, 1]
    """
    _check(objectives)
    labels, records = _rows(rows)
    if not records:
        return []
    signs = np.array([-1.0 if d == "max" else 1.0 for d in objectives.values()])
    points = np.array([[_number(r.get(m)) for m in objectives] for r in records],
                      dtype=float).reshape(len(records), len(objectives)) * signs
    valid = ~np.isnan(points).any(axis=1)
    ok = points[valid]  # every objective turned into "lower is better"
    no_worse = (ok[:, None, :] <= ok[None, :, :]).all(axis=2)  # [j, i]: j no worse than i
    better = (ok[:, None, :] < ok[None, :, :]).any(axis=2)
    return [labels[i] for i in np.flatnonzero(valid)[~(no_worse & better).any(axis=0)]]


def front_of(table: pd.DataFrame, objectives: Mapping[str, str],
             params: Sequence[str] = ()) -> ParetoFront:
    """The front of a summary table (a ``trial_id`` column and one column per objective), its
    members ordered by the primary objective, then the next ones.

    Example:
        >>> table = pd.DataFrame({"trial_id": ["a", "b", "c"], "acc": [0.8, 0.9, 0.7],
        ...                       "size": [5, 10, 20]})
        >>> front_of(table, {"acc": "max", "size": "min"}).members
        ('b', 'a')
    """
    objectives = dict(objectives)
    if table.empty:
        return ParetoFront(objectives, (), (), tuple(params))
    front = table.loc[pareto_front(table, objectives)]
    ordered = front.sort_values(list(objectives), kind="stable",
                                ascending=[d == "min" for d in objectives.values()])
    return ParetoFront(objectives, tuple(str(t) for t in ordered["trial_id"]),
                       tuple(str(t) for t in table["trial_id"]), tuple(params))


def pareto_records(table: pd.DataFrame, front: ParetoFront) -> list[dict[str, Any]]:
    """The front's members in order, each with its objective values and searched params (what
    ``pareto.json`` holds).

    Example:
        >>> table = pd.DataFrame({"trial_id": ["a", "b"], "lr": [0.1, 0.2],
        ...                       "acc": [0.8, 0.9], "size": [5, 10]})
        >>> pareto_records(table, ParetoFront({"acc": "max", "size": "min"}, ("b", "a"),
        ...                                   ("a", "b"), ("lr",)))[0]
        {'trial_id': 'b', 'values': {'acc': 0.9, 'size': 10}, 'params': {'lr': 0.2}}
    """
    by_id = {str(r["trial_id"]): r for r in table.to_dict("records")}
    return [{"trial_id": t, "values": {m: _plain(by_id[t].get(m)) for m in front.objectives},
             "params": {p: _plain(by_id[t].get(p)) for p in front.params}}
            for t in front.members]


def pareto_tags(front: ParetoFront) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """MLflow tags: per trial id ``sweeps.pareto`` ("true"/"false"), and the parent run's
    front size, objectives and members.

    Example:
        >>> trials, parent = pareto_tags(ParetoFront({"acc": "max", "size": "min"}, ("b",),
        ...                                          ("a", "b")))
        >>> trials["a"], parent["sweeps.pareto_objectives"]
        ({'sweeps.pareto': 'false'}, 'acc:max,size:min')
    """
    members = set(front.members)
    trials = {t: {"sweeps.pareto": "true" if t in members else "false"} for t in front.trial_ids}
    parent = {"sweeps.pareto_size": str(len(front.members)),
              "sweeps.pareto_objectives": ",".join(f"{m}:{d}" for m, d in front.objectives.items()),
              "sweeps.pareto_trials": ",".join(front.members)}
    return trials, parent


def _plain(value: Any) -> Any:
    """numpy scalars as Python ones (for JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def format_pareto(table: pd.DataFrame, front: ParetoFront) -> str:
    """The summary's Pareto section: a heading, then one line per member (best primary first)
    with its objective values and searched params.

    Example:
        >>> table = pd.DataFrame({"trial_id": ["a", "b", "c"], "lr": [0.1, 0.2, 0.3],
        ...                       "acc": [0.8, 0.9, 0.7], "size": [5, 10, 20]})
        >>> print(format_pareto(table, front_of(table, {"acc": "max", "size": "min"}, ["lr"])))
        Pareto front (acc max, size min): 2 of 3 trials
        trial_id  acc  size  lr
               b  0.9    10 0.2
               a  0.8     5 0.1
    """
    heading = (f"Pareto front ({front.describe()}): {len(front.members)} of "
               f"{len(front.trial_ids)} trials")
    if not front.members:
        return heading + " (no trial reported every objective)"
    columns = ["trial_id", *front.objectives, *front.params]
    members = table.set_index(table["trial_id"].astype(str), drop=False).loc[list(front.members)]
    body = members[[c for c in columns if c in members]].to_string(
        index=False, float_format=lambda v: f"{v:.4g}")
    return f"{heading}\n{body}"


def _log_scale(values: np.ndarray) -> bool:
    """Positive values spanning two decades or more (e.g. parameter counts) read on a log axis."""
    return values.size > 1 and bool((values > 0).all()) and values.max() / values.min() >= 100


def _panel(ax: Any, table: pd.DataFrame, on_front: np.ndarray, x: str, y: str,
           objectives: Mapping[str, str], staircase: bool) -> None:
    xs = table[x].map(_number).to_numpy(float)
    ys = table[y].map(_number).to_numpy(float)
    shown = ~(np.isnan(xs) | np.isnan(ys))
    rest = shown & ~on_front
    ax.scatter(xs[rest], ys[rest], s=26, color="0.55", alpha=0.8, label="dominated")
    fx, fy = xs[on_front & shown], ys[on_front & shown]
    order = np.lexsort((fy, fx))
    fx, fy = fx[order], fy[order]
    if staircase and fx.size:
        # Sorted by x, the boundary of the dominated region steps after each point when
        # lower x is better, before it when higher x is better.
        ax.step(fx, fy, where="post" if objectives[x] == "min" else "pre", color="tab:red",
                linewidth=1.4, alpha=0.8)
    ax.scatter(fx, fy, s=48, color="tab:red", zorder=3, label="Pareto front")
    ids = table["trial_id"].astype(str).to_numpy()[on_front & shown][order]
    for tx, ty, tid in zip(fx, fy, ids, strict=True):
        ax.annotate(tid, (tx, ty), fontsize=7, xytext=(4, 3), textcoords="offset points")
    if _log_scale(xs[shown]):
        ax.set_xscale("log")
    if _log_scale(ys[shown]):
        ax.set_yscale("log")
    better = {"min": "lower is better", "max": "higher is better"}
    ax.set(xlabel=f"{x} ({better[objectives[x]]})", ylabel=f"{y} ({better[objectives[y]]})")
    ax.grid(alpha=0.3)


def pareto_plot(table: pd.DataFrame, objectives: Mapping[str, str], path: Path) -> Path:
    """Save the front as a PNG at ``path``: every trial a dot, the front's members red.

    Two objectives: one panel, the primary on the y axis, the front joined as a staircase (the
    edge of the region it dominates). Three or more: one panel per pair of the first three
    objectives (the front of all objectives, highlighted in each projection, without a
    staircase: a projected front is no staircase); more than three says so in the title. An
    axis whose positive values span two decades or more is logarithmic.

    Example:
        >>> table = pd.DataFrame({"trial_id": ["a", "b", "c"], "acc": [0.8, 0.9, 0.7],
        ...                       "size": [5, 10, 20]})
        >>> out = pareto_plot(table, {"acc": "max", "size": "min"},
        ...                   Path(tempfile.mkdtemp()) / "pareto.png")
        >>> out.stat().st_size > 0
        True
    """
    from matplotlib.figure import Figure

    _check(objectives)
    names = list(objectives)
    if len(names) < 2:
        raise ValueError(f"a Pareto plot needs 2 or more objectives, got {names}")
    on_front = table.index.isin(pareto_front(table, objectives))
    pairs = [(names[1], names[0])] if len(names) == 2 else [
        (names[1], names[0]), (names[2], names[0]), (names[2], names[1])]
    fig = Figure(figsize=(6.4 if len(pairs) == 1 else 13, 4.8), dpi=110, layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(pairs)))
    for ax, (x, y) in zip(axes, pairs, strict=True):
        _panel(ax, table, on_front, x, y, objectives, staircase=len(names) == 2)
    axes[0].legend(loc="best", fontsize=8)
    note = f" (first 3 of {len(names)} objectives shown)" if len(names) > 3 else ""
    fig.suptitle(f"Pareto front: {int(on_front.sum())} of {len(table)} trials{note}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    return path
