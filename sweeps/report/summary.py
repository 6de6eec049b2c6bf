"""End-of-sweep summary: one row per trial, the best trial, its best checkpoint.

    summary = summarize(results, Objective("val_acc", "max", 9), ["lr"], verdicts)
    print(format_table(summary.table))

A trial's status is ``completed``, ``stopped`` (ended early by the scheduler or the budget) or
``error``, as ``sweeps.search.outcome`` decides; ``not started`` when ``sweep.budget`` ended it
before it started. Its score is the best finite value of the metric over its epochs
(NaN/inf values are skipped; a trial with no other value scores NaN, last in the table), and its
checkpoint is the one saved at the best epoch whose checkpoint Train kept (it keeps the best
``checkpoint.keep`` by the same metric; of equal scores, the latest).

Multi-objective (``experiment.metrics`` with two or more entries, passed as ``metrics``): the
table gets a column per other objective, valued at the same report as the score (the one where
the primary metric was best; see ``sweeps.report.pareto`` for why), and a boolean ``pareto``
column; ``Summary.pareto`` is the front and ``write_summary`` adds ``pareto.json``. With zero
or one entry nothing changes.
"""

from __future__ import annotations

import functools
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sweeps.files import listdir, remove_file, write_atomic
from sweeps.layout import SweepLayout
from sweeps.protocol import CHECKPOINT_PATH_KEY as CHECKPOINT_KEY
from sweeps.protocol import CLOCK_KEY, FAILURE_KEY, RESTARTS_KEY
from sweeps.report.best import best_kept
from sweeps.report.failure import error_line, rank_of
from sweeps.report.history import own_metrics
from sweeps.report.importance import Importance
from sweeps.report.pareto import ParetoFront, front_of, pareto_records
from sweeps.search.outcome import Objective, Verdict, not_started
from sweeps.search.space import flatten
from sweeps.storage.location import uri_of

__all__ = ["Summary", "summarize", "format_table", "write_summary", "best_overrides",
           "loop_traceback", "pareto_json"]


@dataclass
class Summary:
    """The per-trial table, the best trial (``None`` when no trial reported the metric) and the
    failed trials with their reasons."""

    table: pd.DataFrame
    best: dict[str, Any] | None
    failed: dict[str, str] = field(default_factory=dict)
    pareto: ParetoFront | None = None  # multi-objective sweeps only
    budget: list[str] = field(default_factory=list)  # spent / budget, efficiency (report.budget)
    # trials whose loop raised and was restarted: id -> (restarts, the last failure's line)
    restarts: dict[str, tuple[int, str]] = field(default_factory=dict)
    importance: Importance | None = None  # the searched params ranked (report.importance)


def _value_at(history: pd.DataFrame, pick: Any, metric: str) -> float | int:
    """``metric`` in the report ``pick``: NaN when absent or not finite; an int stays an int."""
    if metric not in history:
        return math.nan
    value = pd.to_numeric(pd.Series([history.loc[pick, metric]]), errors="coerce").iloc[0]
    if pd.isna(value) or not math.isfinite(float(value)):
        return math.nan
    integral = pd.api.types.is_integer_dtype(history[metric]) or (
        isinstance(value, int | np.integer) and not isinstance(value, bool))
    return int(value) if integral else float(value)


def _trial_row(result: Any, objective: Objective, verdicts: dict[str, Verdict],
               param_paths: list[str], extra: list[str] | None = None,
               ) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """(table row, best checkpoint of the trial, why it failed) for one Tune ``Result``;
    ``extra``: the other objectives, valued at the report where ``objective.metric`` was best."""
    missing = dict.fromkeys(extra or [], math.nan)
    metric, mode = objective.metric, objective.mode
    history = result.metrics_dataframe
    trial_id, metrics = own_metrics(result)
    config = flatten(result.config or {}) if metrics else {}
    row: dict[str, Any] = {"trial_id": trial_id}
    row.update({p: config.get(p) for p in param_paths})
    verdict = verdicts.get(trial_id)
    failure = verdict.error if verdict else None
    if error := result.error:  # its own error in one line, with the rank that raised it
        if isinstance(getattr(error, "cause", None), BaseException):
            failure = error_line(error, limit=300)
        else:  # no exception object: the last line of Tune's text
            lines = [ln for ln in str(error).strip().splitlines() if ln.strip()]
            failure = lines[-1][:300] if lines else type(error).__name__
        if rank := rank_of(error):
            failure = f"{failure} (rank {rank[0]} of {rank[1]})"
    clock_col = next((c for c in (CLOCK_KEY, "epoch") if history is not None and c in history),
                     None)
    clocks = history[clock_col].dropna() if clock_col else pd.Series(dtype=float)
    clock = float(clocks.max()) if not clocks.empty else float(
        0 if history is None else len(history))
    epochs = int(math.ceil(clock)) if math.isfinite(clock) else 0
    status = objective.outcome(clock, verdict, bool(result.error))
    if not_started(verdict, clock) and not result.error:
        row.update({metric: math.nan, **missing, "epochs": 0, "status": "not started"})
        return row, None, None  # ended by sweep.budget before it started
    if history is None or history.empty or metric not in history:
        failure = failure or (f"never reported {metric}" if history is not None else None)
        row.update({metric: math.nan, **missing, "epochs": epochs,
                    "status": "error" if failure or result.error else "empty"})
        return row, None, failure
    values = pd.to_numeric(history[metric], errors="coerce").replace([math.inf, -math.inf],
                                                                       math.nan)
    history = history.assign(**{metric: values}).dropna(subset=[metric])
    if history.empty:  # every value was NaN/inf: the trial counts as the worst
        row.update({metric: math.nan, **missing, "epochs": epochs, "status": status})
        return row, None, failure
    pick = history[metric].idxmax() if mode == "max" else history[metric].idxmin()
    row.update({metric: float(history.loc[pick, metric]),
                **{m: _value_at(history, pick, m) for m in missing},
                "epochs": epochs, "status": status})

    paths = history[CHECKPOINT_KEY] if CHECKPOINT_KEY in history else [None] * len(history)
    found = best_kept(((at, v, p if isinstance(p, str) else None)  # NaN: no checkpoint
                       for at, v, p in zip(history.index, history[metric], paths, strict=True)),
                      mode, _kept)
    at, checkpoint = found or (pick, None)
    clock = history.loc[at, clock_col] if clock_col else len(history)
    return row, {"trial_id": trial_id, "metric": metric, "value": float(history.loc[at, metric]),
                 "epoch": int(math.ceil(float(clock))), "checkpoint": checkpoint,
                 "config": result.config if metrics else None}, failure


def _kept(path: str) -> bool:
    """Whether a reported checkpoint is still there, on the local filesystem or the object
    store (``sweeps.files``; one listing per run directory)."""
    return Path(path).name in _listing(str(Path(path).parent))


@functools.lru_cache(maxsize=4096)
def _listing(directory: str) -> frozenset[str]:
    return frozenset(listdir(directory))


def summarize(results: Any, objective: Objective, param_paths: list[str],
              verdicts: dict[str, Verdict] | None = None,
              metrics: dict[str, str] | None = None) -> Summary:
    """Build the summary from a Tune ``ResultGrid`` (or any iterable of ``Result``) and the
    scheduler's verdicts (``sweeps.search.outcome.read_verdicts``); ``metrics``: the
    experiment's objectives (``experiment.metrics``), a Pareto front when two or more.

    Example:
        >>> summary = summarize(results, objective, ["lr"], verdicts,  # doctest: +SKIP
        ...                     {"val_acc": "max", "n_params": "min"})
        >>> summary.pareto.members  # doctest: +SKIP
        ('9a6685fe', '1c2d3e4f')
    """
    _listing.cache_clear()  # checkpoints come and go between calls
    objectives = dict(metrics or {}) if len(metrics or {}) >= 2 else {}
    extra = [m for m in objectives if m != objective.metric]
    rows, bests, failed, restarts = [], [], {}, {}
    for result in results:
        row, best, failure = _trial_row(result, objective, verdicts or {}, param_paths, extra)
        rows.append(row)
        if restarted := _restarts(result.metrics_dataframe):
            restarts[row["trial_id"]] = restarted
        if best is not None:
            bests.append(best)
        if row["status"] == "error":
            failed[row["trial_id"]] = failure or "failed"
    table = pd.DataFrame(rows)
    if restarts:  # a column only where some trial restarted
        table["restarts"] = [restarts.get(t, (0, ""))[0] for t in table["trial_id"]]
    if not table.empty:
        table = table.sort_values([objective.metric, "trial_id"],
                                  ascending=[objective.mode == "min", True], na_position="last")
        table = table.reset_index(drop=True)
    front = front_of(table, objectives, param_paths) if objectives else None
    if front is not None and not table.empty:
        table["pareto"] = table["trial_id"].astype(str).isin(front.members)
    # The best checkpointed epoch; a sweep whose loop saves no checkpoint still has a best trial.
    candidates = [b for b in bests if b["checkpoint"]] or bests
    sign = -1.0 if objective.mode == "max" else 1.0  # a tie: the earliest epoch, then trial id,
    best = min(candidates, key=lambda b: (sign * b["value"], b["epoch"], b["trial_id"]),
               default=None)  # so the same trial however Tune ordered its results
    return Summary(table=table, best=best, failed=failed, pareto=front, restarts=restarts)


def _restarts(history: pd.DataFrame | None) -> tuple[int, str] | None:
    """(restarts, the last failure's line) a trial's reports carry, or None."""
    if history is None or RESTARTS_KEY not in history:
        return None
    counts = pd.to_numeric(history[RESTARTS_KEY], errors="coerce").dropna()
    if counts.empty or counts.max() <= 0:
        return None
    last = history.loc[counts.index[-1], FAILURE_KEY] if FAILURE_KEY in history else ""
    return int(counts.iloc[-1]), str(last or "")


_ENTRY = "sweeps/loop/worker.py"  # run_loop, which calls the user's loop


def loop_traceback(error_text: str, limit: int = 20) -> list[str]:
    """The user's own part of a failed trial's traceback (Ray's "Error Snippet", without the
    frames of sweeps' entry point), at most ``limit`` lines; [] when there is none.

    Example:
        >>> text = "[Rank 0 Error Snippet]:|ray::f() (pid=1)|  File 'my.py', line 9|ValueError: x"
        >>> loop_traceback(text.replace("|", chr(10)))
        ["  File 'my.py', line 9", 'ValueError: x']
        >>> inline = '  File "/s/sweeps/loop/worker.py", line 1, in run_loop|    loop()|'
        >>> inline += "  File 'my.py', line 9|    ^^^|ValueError: x"
        >>> loop_traceback(inline.replace("|", chr(10)))
        ["  File 'my.py', line 9", 'ValueError: x']
    """
    _, found, snippet = error_text.partition("Error Snippet]:")
    if not found:  # an inline trial (sweeps.trial.backends.inline): Tune's own traceback
        at = error_text.rfind(f"{_ENTRY}\", line ")
        if at < 0:
            return []
        snippet = error_text[error_text.rfind("\n", 0, at) + 1:]
    lines = [ln for ln in snippet.splitlines() if ln.strip().strip("^~")]
    while lines and not lines[0].lstrip().startswith("File "):
        lines = lines[1:]  # Ray's "ray::ImplicitFunc.train() (pid=...)" header
    if len(lines) >= 2 and _ENTRY in lines[0]:
        lines = lines[2:]  # run_loop's frame, calling the loop
    return lines[-limit:]


def format_table(table: pd.DataFrame) -> str:
    """The table as aligned plain text (floats to 4 significant digits)."""
    if table.empty:
        return "(no trials)"
    return table.to_string(index=False, float_format=lambda v: f"{v:.4g}")


def pareto_json(sweep_dir: Path) -> Path:
    """Where ``write_summary`` puts a multi-objective sweep's front: beside ``summary.csv``.

    Example:
        >>> pareto_json(Path("outputs/digits_mo")).name
        'pareto.json'
    """
    return SweepLayout(sweep_dir).pareto_json


def write_summary(summary: Summary, sweep_dir: Path) -> None:
    """``summary.csv``, ``summary.parquet``, ``best.json``, ``importance.json`` and, for several
    objectives, ``pareto.json`` (objectives, front size, each member's values and params)."""
    layout = SweepLayout(sweep_dir)
    write_atomic(layout.summary_csv, summary.table.to_csv(index=False))
    mixed = [c for c in summary.table if summary.table[c].dtype == object]
    parquet = io.BytesIO()
    summary.table.astype({c: str for c in mixed}).to_parquet(parquet, index=False)
    write_atomic(layout.summary_parquet, parquet.getvalue())
    best = summary.best
    if best and best.get("checkpoint"):  # on an object store: its URI, not the stand-in
        best = {**best, "checkpoint": uri_of(best["checkpoint"])}
    write_atomic(layout.best, json.dumps(best, indent=2, default=str) + "\n")
    if summary.importance is not None:
        write_atomic(layout.importance, json.dumps(summary.importance.to_json(), indent=2) + "\n")
    front, path = summary.pareto, pareto_json(sweep_dir)
    if front is None:
        remove_file(path)  # a stale front must not outlive a single-objective rerun
        return
    write_atomic(path, json.dumps({
        "objectives": front.objectives, "size": len(front.members),
        "trials": len(front.trial_ids), "members": pareto_records(summary.table, front),
    }, indent=2, default=str) + "\n")


def best_overrides(config: dict[str, Any]) -> str:
    """The sampled values as search-space constants: pasted after ``+experiment=NAME`` they
    replace the searched ranges, so the run trains exactly this configuration.

    Example:
        >>> best_overrides({"lr": 0.1, "model": {"act": "relu"}})
        'experiment.search_space.lr=0.1 experiment.search_space.model.act=relu'
    """

    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return "null" if value is None else repr(value) if isinstance(value, float) else str(value)

    return " ".join(f"experiment.search_space.{k}={text(v)}" for k, v in flatten(config).items())
