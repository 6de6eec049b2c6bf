"""sweeps status SWEEP_DIR | NAME [--json]

    sweeps status outputs/digits        # a sweep directory: a path, or s3://bucket/prefix/name
    python -m sweeps status digits      # a NAME that is no path: outputs/NAME, sweep.dir's default

What it prints and its exit codes: docs/running.md#is-a-sweep-running-sweeps-status. Read from
the sweep directory's files alone (``sweeps.report.sweep_state``; epochs spent: the sum of each
trial's last epoch), with neither Ray nor torch nor MLflow imported. The resume command is the
claim's own with ``sweep.dir`` set to this directory (so it runs from anywhere), or, for a
directory from before claims, one built from its stored config.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.layout import SweepLayout
from sweeps.lease import Holder
from sweeps.protocol import CLOCK_KEY, RESTARTS_KEY
from sweeps.report.sweep_state import SweepView, find_sweep, read_sweep
from sweeps.resume.notes import continues_from
from sweeps.search.grid import grid_size
from sweeps.search.space import parse_space
from sweeps.search.warm_start_sources import read_sweep_dir
from sweeps.storage.journal import Journal
from sweeps.storage.location import display, uri_of
from sweeps.trial.clock import finite_float

__all__ = ["main", "find_sweep", "status_json", "status_lines"]
HOLDER_KEYS = ("host", "pid", "job", "command", "heartbeat_s")  # --json's "holder"


def status_lines(root: Path) -> list[str]:
    """What ``sweeps status`` prints for the sweep directory ``root``; ``FileNotFoundError``
    when it holds no sweep (``read_sweep``)."""
    view = read_sweep(root)
    layout, live, record = SweepLayout(root), view.live, view.record
    moving_status = "running" if live else "interrupted"
    counts = {label: sum(t.status == status for t in view.trials) for label, status in (
        ("completed", "completed"), ("stopped early", "stopped"), ("failed", "failed"),
        (moving_status, moving_status))}
    moving = [continues_from(layout.run_dir(t.trial_id)) if not live
              else f"{t.trial_id} (epoch {t.clock:g})" if t.clock else f"{t.trial_id} (starting)"
              for t in view.trials if t.status == moving_status]
    counts["not started"] = max((total := _total(view)) - sum(counts.values()),
                                sum(t.status == "not started" for t in view.trials))  # budget's
    first = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created if record else 0))
    starts = (f"started {record.starts} time{'s' if record.starts != 1 else ''}, first on "
              f"{first}") if record else "no state/sweep.json yet"
    lines = [f"sweep {view.name} in {display(root)} ({starts})", f"  {view.claim}", *view.notes,
             "  trials: " + ", ".join(f"{n} {k}" for k, n in counts.items())
             + (f" (of {total})" if total else "")]
    if moving:
        lines.append(f"  {'running' if live else 'a resume continues'}: {', '.join(moving)}")
    lines += [_best_line(layout, live, _best_reported(view), view.objective.metric,
                         view.objective.mode),
              f"  epochs spent: {sum(t.clock for t in view.trials):g}", _importance_line(layout)]
    if not live and files.exists(layout.summary_csv):
        lines.append(f"  finished: {display(layout.summary_csv)}, {display(layout.best)}")
    if live:
        holder = view.holder
        lines.append(f"  started with: {holder.command}" if holder and holder.command else "")
    else:
        lines += [_tracking_line(layout),
                  f"  resume with: {_resume_command(root, view.holder, view.name, view.cfg)}"]
    return [line for line in lines if line]


def _best_reported(view: SweepView) -> tuple[float, str, float] | None:
    """(value, trial id, epoch) of the best value any trial reported, or None."""
    best, sign = None, 1.0 if view.objective.mode == "max" else -1.0
    for t in view.trials:
        for r in t.history:
            value = finite_float(r.get(view.objective.metric))
            if value is not None and (best is None or sign * value > sign * best[0]):
                best = (value, t.trial_id, finite_float(r.get(CLOCK_KEY)) or 0.0)
    return best


def _total(view: SweepView) -> int:
    """How many trials the sweep runs (``search.num_samples``, a grid's size); 0: unknown."""
    ident, search = view.record.identity if view.record else {}, view.cfg.get("search") or {}
    if search.get("algorithm") != "grid":
        return int(ident.get("search.num_samples") or search.get("num_samples") or 0)
    with contextlib.suppress(ValueError, TypeError):
        return grid_size(parse_space((view.cfg.get("experiment") or {}).get("search_space")
                                     or {})[0])
    return 0


def status_json(root: Path) -> dict[str, Any]:
    """What ``sweeps status DIR --json`` prints: the stable format docs/running.md#status-as-
    json documents (each trial's ``status`` as ``sweeps.load`` has it)."""
    view = read_sweep(root)
    params = {f.trial_id: f.params or {} for f in read_sweep_dir(root, view.log)}
    best, metric, total = _best_reported(view), view.objective.metric, _total(view)
    trials = [{"id": t.trial_id, "status": t.status, "params": params.get(t.trial_id, {}),
               "epoch": t.clock, "metric": t.last(metric),
               "restarts": int(t.last(RESTARTS_KEY) or 0)}
              for t in view.trials]
    statuses = [t["status"] for t in trials]
    done = bool(statuses) and "interrupted" not in statuses and (
        len(statuses) >= total or "not started" in statuses)
    return {"sweep": view.name, "dir": uri_of(root), "state": "running" if view.live else
            "finished" if done else "interrupted", "claim": view.claim.strip(),
            "holder": view.holder and {k: getattr(view.holder, k) for k in HOLDER_KEYS},
            "objective": {"metric": metric, "mode": view.objective.mode},
            "best": best and {"trial": best[1], "value": best[0], "epoch": best[2]},
            "total": total or None, "not_started": max(0, total - len(trials)),
            "epochs_spent": sum(t.clock for t in view.trials), "trials": trials}


def _tracking_line(layout: SweepLayout) -> str:
    """MLflow records waiting in the sweep's journal, why and what sends them (what its last
    end left, ``tracking/held.json``), if any; else empty."""
    held = (json.loads(files.read_text(layout.tracking_held))
            if files.exists(layout.tracking_held) else {})
    waiting = Journal(layout.tracking).waiting(bool(held.get("records")))
    return (f"  mlflow: {waiting} record(s) wait in the journal"
            + (f": {held['why']}" if held.get("why") else "")
            + "; they go to MLflow at the next start or with python -m sweeps.sync "
            + display(layout.root) + (f", once {held['fix']}" if held.get("fix") else "")
            ) if waiting else ""


def _importance_line(layout: SweepLayout) -> str:
    """The searched params ranked at the sweep's last end (``importance.json``), or empty."""
    try:
        found = json.loads(files.read_text(layout.importance))
        ranked = ", ".join(f"{p} {v:.2f}" for p, v in found["values"].items())
        return f"  importance (at the last end): {ranked or found['note']}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ""


def _best_line(layout: SweepLayout, live: bool, best: tuple[float, str, float] | None,
               metric: str | None, mode: str) -> str:
    """The best trial: ``best.json`` once the sweep finished, else the best value reported."""
    goal = f"{'maximize' if mode == 'max' else 'minimize'} {metric}"
    if not live and files.exists(layout.best):
        try:
            saved = json.loads(files.read_text(layout.best))
            return (f"  best: trial {saved['trial_id']} {saved['metric']}={saved['value']:.4g} "
                    f"at epoch {saved['epoch']} ({goal}; best.json)")
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if best is None:
        return f"  best so far: none ({goal})" if metric else "  best so far: none"
    return f"  best so far: trial {best[1]} {metric}={best[0]:.4g} at epoch {best[2]:g} ({goal})"


def _resume_command(root: Path, holder: Holder | None, name: str, cfg: dict[str, Any]) -> str:
    """The claim's command with ``sweep.dir`` set to ``root``, or one from the stored config.

    Example:
        >>> _resume_command(Path("/r/d"), Holder("h", 1, command="sweeps +experiment=x "
        ...                 "sweep.dir=d"), "x", {})
        'sweeps +experiment=x sweep.dir=/r/d'
    """
    where = f"sweep.dir={uri_of(root)}"
    if holder is not None and holder.command:
        try:
            words = shlex.split(holder.command)  # written with shlex.join
        except ValueError:  # cut at its length limit mid-quote
            words = holder.command.split(" ")
        return shlex.join([w for w in words if not w.startswith("sweep.dir=")] + [where])
    exp, search, sched = (cfg.get(k) or {} for k in ("experiment", "search", "scheduler"))
    keep = {"search.num_samples": search.get("num_samples"), "scheduler.max_t":
            sched.get("max_t"), "sweep.seed": (cfg.get("sweep") or {}).get("seed")}
    return " ".join(["python -m sweeps", f"+experiment={exp.get('name') or name}",
                     *(f"{k}={v}" for k, v in keep.items() if v is not None), where])


def main(argv: list[str] | None = None) -> int:
    """Run ``sweeps status``; the exit code (0 for a sweep, live or not; 2 for no sweep)."""
    parser = argparse.ArgumentParser(
        prog="sweeps status", description="Whether a sweep runs, and which driver runs it; its "
        "trials by outcome, best so far, epochs spent and the command that resumes it. Reads "
        "the sweep directory only: starts no Ray.",
        epilog="Exit code 0 for a sweep, running or not; 2 when the path holds no sweep.")
    parser.add_argument("sweep", help="a sweep directory (a path, or s3://bucket/prefix/name), "
                        "or a NAME: outputs/NAME, sweep.dir's default")
    parser.add_argument("--json", action="store_true", help="one JSON object instead: "
                        "docs/running.md#status-as-json has its stable format")
    args = parser.parse_args(argv)
    root = find_sweep(args.sweep)
    try:
        lines = [json.dumps(status_json(root))] if args.json else status_lines(root)
    except OSError as exc:  # FileNotFoundError: no sweep; else the store could not be read
        named = root.parts[-2:] == ("outputs", args.sweep)
        print(f"sweeps: error: {exc}{' (a NAME is looked up as outputs/NAME)' if named else ''}",
              file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
