"""A sweep's trials as pandas DataFrames: ``sweeps.load``, for a finished or a running sweep.

    sweep = sweeps.load("outputs/digits")      # or "s3://bucket/sweeps/digits", or "digits"
    sweep.trials.sort_values("best_val_acc")   # one row per trial
    sweep.history.pivot(index="sweeps_epoch", columns="trial_id", values="val_acc")

Read as ``sweeps status`` reads a sweep (``sweeps.report.sweep_state``): no Ray, no MLflow,
safe while it runs. The columns: docs/running.md#the-trials-as-data-sweepsload. A param's value
is the one the trial ran last (a PBT exploit's), from the tracking journal or Tune's
``params.json`` (``sweeps.search.warm_start_sources``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps.protocol import CHECKPOINT_PATH_KEY, RESTARTS_KEY
from sweeps.report.best import best_kept
from sweeps.report.sweep_state import SweepView, TrialState, find_sweep, read_sweep
from sweeps.search.space import parse_space
from sweeps.search.warm_start_sources import read_sweep_dir
from sweeps.storage.location import uri_of
from sweeps.trial.clock import finite_float

if TYPE_CHECKING:  # pandas stays off `import sweeps`
    import pandas as pd

__all__ = ["SweepTables", "load"]

_BOOKKEEPING = ("n", CHECKPOINT_PATH_KEY, "trial_id")


@dataclass
class SweepTables:
    """``load``'s answer: the two tables, and whether a driver held the sweep when read."""

    trials: pd.DataFrame
    history: pd.DataFrame
    live: bool
    root: str  # the sweep directory (a URI for an object store)


def load(sweep_dir: str | Path) -> SweepTables:
    """The trials of the sweep in ``sweep_dir`` (a path, an ``s3://`` URI, or a NAME for
    ``outputs/NAME``); ``FileNotFoundError`` when it holds no sweep.

    Example:
        >>> sweep = load("outputs/digits")  # doctest: +SKIP
        >>> sweep.trials[["trial_id", "status", "lr", "best_val_acc"]].head(2)  # doctest: +SKIP
    """
    import pandas as pd

    view = read_sweep(find_sweep(str(sweep_dir)))
    objectives = view.objectives
    space = (view.cfg.get("experiment") or {}).get("search_space") or {}
    paths = [p.path for p in parse_space(space)[0]]
    ran = {f.trial_id: f.params or {} for f in read_sweep_dir(view.root, view.log)}
    rows = [_trial_row(t, view, objectives, paths, ran.get(t.trial_id, {})) for t in view.trials]
    history = [{"trial_id": t.trial_id, "report": n,
                **{k: v for k, v in r.items() if k not in _BOOKKEEPING
                   and not k.startswith("config/")},  # the decision log's copy of the config
                "checkpoint": uri_of(r[CHECKPOINT_PATH_KEY]) if r.get(CHECKPOINT_PATH_KEY)
                else None}
               for t in view.trials for n, r in _once(t.history).items()]
    columns = ["trial_id", "status", *paths,
               *(f"{kind}_{m}" for m in objectives for kind in ("best", "final")),
               "epochs", "restarts", "checkpoint"]
    return SweepTables(pd.DataFrame(rows, columns=columns),
                       pd.DataFrame(history, columns=None if history else ["trial_id", "report"]),
                       view.live, uri_of(view.root))


def _once(reports: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Report number -> the report: one made again after a restore (a loop restarted, a sweep
    resumed) replaces the first, as for the trial (``sweeps.trial.report_log``)."""
    return dict(sorted({r["n"] if CHECKPOINT_PATH_KEY in r else i: r  # a report log's line
                        for i, r in enumerate(reports, 1)}.items()))


def _trial_row(t: TrialState, view: SweepView, objectives: dict[str, str], paths: list[str],
               params: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"trial_id": t.trial_id, "status": t.status,
                           **{p: params.get(p) for p in paths}}
    for metric, mode in objectives.items():
        values = [v for r in t.history if (v := finite_float(r.get(metric))) is not None]
        row[f"best_{metric}"] = (max if mode == "max" else min)(values, default=math.nan)
        row[f"final_{metric}"] = values[-1] if values else math.nan
    best = best_kept(((None, r.get(view.objective.metric), r.get(CHECKPOINT_PATH_KEY))
                      for r in t.history), view.objective.mode)
    row.update(epochs=math.ceil(t.clock), restarts=int(t.last(RESTARTS_KEY) or 0),
               checkpoint=uri_of(best[1]) if best else None)
    return row
