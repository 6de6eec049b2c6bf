"""End-of-sweep plots, saved as PNG in ``<sweep dir>/plots`` (and logged to the MLflow parent).

    paths = plot_sweep(summary.table, histories, params, "val_acc", "max", sweep_dir / "plots")

* ``learning_curves.png``: the metric per epoch for every trial; trials the scheduler stopped
  are dashed and end in a cross where they were cut; the best trial is drawn thicker.
* ``parallel_coordinates.png``: one line per trial across every searched parameter (log
  parameters on a log axis, choices as evenly spaced categories) and the metric, coloured by
  the metric.
* ``metric_vs_params.png``: the metric against each parameter, one panel each.
* ``pareto.png`` (multi-objective sweeps, given the front): every trial by its objectives, the
  front highlighted (``sweeps.report.pareto.pareto_plot``).
* ``importance.png`` (given a ranking): each searched parameter's importance
  (``sweeps.report.importance``).

Uses matplotlib's object API (no pyplot global state), safe next to the sweep's threads.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from sweeps.errors import SweepError
from sweeps.files import remove_file
from sweeps.protocol import CLOCK_KEY
from sweeps.report.importance import Importance, importance_plot
from sweeps.report.pareto import pareto_plot
from sweeps.search.space import Param

if TYPE_CHECKING:
    from sweeps.report.pareto import ParetoFront

__all__ = ["NotEnoughTrials", "plot_sweep", "histories_of"]


class NotEnoughTrials(SweepError):
    """Fewer than two trials reported the metric: nothing to compare."""


def histories_of(results: Any) -> dict[str, pd.DataFrame]:
    """Per-trial metric histories from a Tune ``ResultGrid``, keyed by trial id."""
    frames = (result.metrics_dataframe for result in results)
    return {str(df["trial_id"].iloc[0]): df for df in frames
            if df is not None and not df.empty and "trial_id" in df}


def _figure(width: float, height: float, left: float = 0.85, bottom: float = 0.65,
            top: float = 0.45, right: float = 0.25, **spacing: float) -> Any:
    """A figure ``width`` x ``height`` inches whose axes leave fixed margins (inches) for tick
    labels, axis labels and titles. Fixed, not matplotlib's constrained layout, which measured
    0.34 of the plots' 0.72 s at a sweep's end (each trial's share of the sweep's tail);
    ``spacing``: ``wspace``/``hspace`` between panels."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, **spacing)
    return fig


def _axis_values(series: pd.Series, param: Param) -> tuple[np.ndarray, list, list]:
    """Values mapped to [0, 1] plus (tick positions, tick labels) for one parameter."""
    if param.kind == "choice":
        order = list(param.choices)
        codes = series.map(lambda v: order.index(v) if v in order else np.nan).to_numpy(float)
        top = max(len(order) - 1, 1)
        return codes / top, [i / top for i in range(len(order))], [str(c) for c in order]
    low, high = float(param.low), float(param.high)
    values = series.to_numpy(float)
    if param.log:
        values, low, high = np.log10(values), math.log10(low), math.log10(high)
    return (values - low) / ((high - low) or 1.0), [0.0, 1.0], [f"{param.low:g}", f"{param.high:g}"]


def learning_curves(table: pd.DataFrame, histories: dict[str, pd.DataFrame], metric: str,
                    best_id: str | None, path: Path) -> Path:
    fig = _figure(8, 4.8)
    ax = fig.subplots()
    status = dict(zip(table["trial_id"], table["status"], strict=False))
    for trial_id, df in histories.items():
        if metric not in df:  # a trial that never reported it (failed): nothing to draw
            continue
        df = df.dropna(subset=[metric])
        x = df[CLOCK_KEY] if CLOCK_KEY in df else (df["epoch"] if "epoch" in df
                                                   else range(1, len(df) + 1))
        df = df.assign(_x=list(x))
        stopped = status.get(trial_id) == "stopped"
        best = trial_id == best_id
        (line,) = ax.plot(df["_x"], df[metric], linestyle="--" if stopped else "-",
                          linewidth=2.6 if best else 1.2, alpha=1.0 if best else 0.8,
                          label=f"{trial_id} (best)" if best else None)
        if stopped and not df.empty:
            ax.plot(df["_x"].iloc[-1], df[metric].iloc[-1], marker="x", markersize=9,
                    color=line.get_color())
    ax.plot([], [], "k--x", label="stopped early (x: cut here)")
    ax.plot([], [], "k-", label="ran every epoch")
    ax.set(xlabel="epoch", ylabel=metric, title=f"{metric} per epoch, {len(histories)} trials")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.savefig(path)
    return path


def parallel_coordinates(table: pd.DataFrame, params: list[Param], metric: str, path: Path) -> Path:
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    done = table.dropna(subset=[metric])
    # The first axis's name, rotated about its centre, reaches left of the axes by about
    # 0.04 inch a character.
    left = max(0.3, 0.04 * len(params[0].path) + 0.15) if params else 0.3
    fig = _figure(max(6, 1.6 * (len(params) + 1)) + left - 0.3, 4.8, left=left, bottom=0.75,
                  right=0.1)
    ax = fig.subplots()
    columns, ticks = [], []
    for p in params:
        values, positions, labels = _axis_values(done[p.path], p)
        columns.append(values)
        ticks.append((positions, labels))
    m = done[metric].to_numpy(float)
    m_low, m_high = float(np.nanmin(m)), float(np.nanmax(m))
    columns.append((m - m_low) / ((m_high - m_low) or 1.0))
    ticks.append(([0.0, 1.0], [f"{m_low:.3g}", f"{m_high:.3g}"]))
    data = np.vstack(columns)
    mappable = ScalarMappable(norm=Normalize(m_low, m_high), cmap="viridis")
    xs = np.arange(data.shape[0])
    for j in np.argsort(m):
        ax.plot(xs, data[:, j], color=mappable.to_rgba(m[j]), linewidth=1.4, alpha=0.85)
    for i, (positions, labels) in enumerate(ticks):
        ax.axvline(i, color="0.6", linewidth=0.8)
        for pos, label in zip(positions, labels, strict=False):
            ax.text(i + 0.03, pos, label, fontsize=7, va="center")
    ax.set_xticks(xs, [p.path for p in params] + [metric], rotation=20)
    ax.set_yticks([])
    ax.set_xlim(-0.1, len(xs) - 0.6)
    ax.set_title(f"hyperparameters vs {metric} ({len(done)} trials)")
    fig.colorbar(mappable, ax=ax, label=metric)
    fig.savefig(path)
    return path


def metric_vs_params(table: pd.DataFrame, params: list[Param], metric: str, path: Path) -> Path:
    done = table.dropna(subset=[metric])
    cols = min(3, len(params))
    rows = math.ceil(len(params) / cols)
    fig = _figure(4 * cols, 3.2 * rows, top=0.6, wspace=0.35, hspace=0.5)
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    colours = done["status"].map({"completed": "tab:blue", "stopped": "tab:orange"}).fillna(
        "tab:red")
    for ax, p in zip(axes, params, strict=False):
        if p.kind == "choice":
            order = list(p.choices)
            x = done[p.path].map(lambda v, order=order: order.index(v) if v in order else -1)
            ax.set_xticks(range(len(order)), [str(c) for c in order])
        else:
            x = done[p.path]
            if p.log:
                ax.set_xscale("log")
        ax.scatter(x, done[metric], c=list(colours), s=28, alpha=0.85)
        ax.set(xlabel=p.path, ylabel=metric)
        ax.grid(alpha=0.3)
    for ax in axes[len(params):]:
        ax.set_visible(False)
    fig.suptitle(f"{metric} vs each hyperparameter (blue: ran every epoch, orange: stopped)")
    fig.savefig(path)
    return path


def plot_sweep(table: pd.DataFrame, histories: dict[str, pd.DataFrame], params: list[Param],
               metric: str, best_id: str | None, out_dir: Path, pareto: ParetoFront | None = None,
               importance: Importance | None = None) -> list[Path]:
    """Write the three plots, ``pareto.png`` when given a multi-objective sweep's front
    (``Summary.pareto``) and ``importance.png`` when given a ranking (``Summary.importance``);
    ``NotEnoughTrials`` when fewer than 2 trials reported.

    Example:
        >>> plot_sweep(summary.table, histories_of(results), params, "val_acc",  # doctest: +SKIP
        ...            summary.best["trial_id"], sweep_dir / "plots", summary.pareto)[-1].name
        'pareto.png'
    """
    reported = 0 if table.empty or metric not in table else int(table[metric].notna().sum())
    if reported < 2:
        raise NotEnoughTrials(f"plots need at least 2 trials that reported {metric}; this "
                              f"sweep has {reported}, so none were drawn")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [learning_curves(table, histories, metric, best_id, out_dir / "learning_curves.png")]
    if params:
        paths.append(parallel_coordinates(table, params, metric,
                                          out_dir / "parallel_coordinates.png"))
        paths.append(metric_vs_params(table, params, metric, out_dir / "metric_vs_params.png"))
    if pareto is not None and len(pareto.objectives) >= 2:
        paths.append(pareto_plot(table, pareto.objectives, out_dir / "pareto.png"))
    if importance is not None and importance.values:
        paths.append(importance_plot(importance, out_dir / "importance.png"))
    else:  # an earlier end's ranking must not outlive this one (on a store too)
        remove_file(out_dir / "importance.png")
    return paths
