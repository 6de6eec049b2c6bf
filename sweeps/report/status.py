"""sweeps status SWEEP_DIR | NAME

    sweeps status outputs/digits        # a sweep directory: a path, or s3://bucket/prefix/name
    python -m sweeps status digits      # a NAME that is no path: outputs/NAME, sweep.dir's default

Whether a driver runs the sweep and which (the claim on its directory, ``sweeps.lease``), its
trials by outcome, the best so far, the epochs spent, the parameter importance of its last end
(``importance.json``) and the command that resumes it, read from the sweep directory's files
alone, on disk or on an object store (``sweeps.files``). Neither Ray nor torch nor MLflow is
imported, so it answers in well under a second and is safe while the sweep runs (its one
write, the claim store's clock probe, is removed at once).

Trials: Tune's newest experiment state gives each one's status (``ERROR``: failed), the
scheduler's decision log which ended (``sweeps.search.outcome``: completed or stopped early), its
report log the epochs and metric values (epochs spent: the sum of each trial's last epoch). One
that any of them names and that has not ended is running while the sweep is live, else
interrupted: what a resume continues (``sweeps.resume.notes``). The resume command is the
claim's own with ``sweep.dir`` set to this directory (so it runs from anywhere), or, for a
directory from before claims, one built from its stored config.

Exit code 0 for a sweep, running or not (its second line starts with ``live:`` when a driver
holds it); 2 with one ``sweeps: error:`` line for a path that holds no sweep or cannot be read.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps._ray.tune import experiment_state_files, newest_trial_statuses
from sweeps.errors import StateError
from sweeps.layout import SweepLayout
from sweeps.lease import Holder, claim_store, describe, inspect, this_driver
from sweeps.lease.holder import who
from sweeps.protocol import CLOCK_KEY
from sweeps.resume.notes import continues_from, unended_runs
from sweeps.search.decisions import decision_log, ended_ids
from sweeps.search.grid import grid_size
from sweeps.search.outcome import Objective, read_verdicts
from sweeps.search.space import parse_space
from sweeps.storage.journal import Journal
from sweeps.storage.location import display, is_uri, sweep_root, uri_of
from sweeps.trial import report_log  # up a layer on purpose: reads the file trials write
from sweeps.trial.clock import finite_float

__all__ = ["main", "find_sweep", "status_lines", "claim_line"]


def find_sweep(arg: str) -> Path:
    """The sweep directory ``arg`` names: a path or URI, or else ``outputs/<arg>``.

    Example:
        >>> uri_of(find_sweep("s3://bucket/sweeps/d")), find_sweep("digits").parts[-2:]
        ('s3://bucket/sweeps/d', ('outputs', 'digits'))
    """
    if is_uri(arg) or "/" in arg or Path(arg).expanduser().exists():
        return sweep_root(arg)
    return sweep_root(Path("outputs") / arg)


def claim_line(root: Path, name: str, sweep: dict[str, Any]) -> tuple[str, bool, Holder | None]:
    """(the claim on ``root`` in words, whether the sweep is live, its holder if readable);
    ``sweep``: the stored config's ``sweep`` keys (the lease's heartbeat and expiry).

    Example:
        >>> claim_line(Path(tempfile.mkdtemp()), "digits", {})
        ('never claimed (a sweep from before claims, or none ran)', False, None)
    """
    here = this_driver(name, float(sweep.get("lease_heartbeat_s", 5.0)),
                       float(sweep.get("lease_expiry_s", 45.0)))
    _, holder, verdict = inspect(claim_store(root), here)
    if verdict is None:
        return "never claimed (a sweep from before claims, or none ran)", False, None
    silent = f"{verdict.silent_s:.0f} s"
    by = who(holder) if holder else ""
    expiry = holder.expiry_s if holder else here.expiry_s
    return {
        "live": f"live: held by {describe(holder)} (last heartbeat {silent} ago)",
        "unreadable-live": f"live: a driver may be starting (its claim cannot be read yet, "
                           f"written {silent} ago)",
        "released": f"not running ({holder.stopped_by} stopped {by}: a preemption?)"
        if holder and holder.stopped_by else f"not running (released by {by})",
        "dead": f"not running (its driver, {by}, is gone: the next command takes over at once)",
        "expired": f"not running (silent for {silent}, past its {expiry:.0f} s expiry; last held "
                   f"by {by})",
        "unreadable": f"not running (its claim cannot be read; last written {silent} ago)",
    }[verdict.kind], verdict.live, holder


def _config(layout: SweepLayout, starts: int) -> dict[str, Any]:
    """The newest start's stored config (``config.startN.yaml``, else ``config.yaml``), or {}."""
    import yaml

    for start in range(max(starts, 1), 0, -1):
        try:
            return yaml.safe_load(files.read_text(layout.config(start))) or {}
        except (OSError, yaml.YAMLError):
            continue
    return {}


def status_lines(root: Path) -> list[str]:
    """What ``sweeps status`` prints for the sweep directory ``root``; ``FileNotFoundError``
    when it holds no sweep.

    Example:
        >>> status_lines(Path(tempfile.mkdtemp()))
        Traceback (most recent call last):
        FileNotFoundError: ... holds no sweep (no state/sweep.json, claim or Tune state)
    """
    from sweeps.resume.state import load_record

    layout, shown, notes, record = SweepLayout(root), display(root), [], None
    if not files.is_dir(root):
        raise FileNotFoundError(f"{shown}: no such sweep directory")
    try:
        record = load_record(root)
    except StateError as exc:  # from an older sweeps, or unreadable: say so, show the rest
        notes.append(f"  note: {exc}")
    if record is None and not claim_store(root).latest() and not experiment_state_files(root):
        raise FileNotFoundError(f"{shown} holds no sweep (no state/sweep.json, claim or Tune "
                                "state)")
    cfg = _config(layout, record.starts if record else 1)
    ident = record.identity if record else {}
    exp, search, sched = (cfg.get(k) or {} for k in ("experiment", "search", "scheduler"))
    state, live, holder = claim_line(root, record.name if record else "", cfg.get("sweep") or {})
    name = record.name if record else (holder.sweep if holder else "") or root.name
    metric = ident.get("experiment.metric") or exp.get("metric")
    mode = ident.get("experiment.mode") or exp.get("mode") or "max"
    objective = Objective(metric or "", mode, float(ident.get("scheduler.max_t") or
                                                    sched.get("max_t") or math.inf))
    log = decision_log(root).records()
    verdicts, tune, ended = read_verdicts(log), newest_trial_statuses(root), ended_ids(log)
    runs = {p.name for p in unended_runs(layout, ended)}
    counts = dict.fromkeys(("completed", "stopped early", "failed", "running"), 0)
    moving: list[str] = []
    best: tuple[float, str, float] | None = None
    spent, sign = 0.0, 1.0 if mode == "max" else -1.0
    for trial in sorted(set(tune) | {r["trial"] for r in log if "trial" in r} | runs):
        history = report_log.records(layout.run_dir(trial)) or [  # else what the log kept
            r.get("metrics", {}) for r in log if r.get("trial") == trial]
        clock = max((c for r in history if (c := finite_float(r.get(CLOCK_KEY))) is not None),
                    default=0.0)
        spent += clock
        for r in history:
            value = finite_float(r.get(metric))
            if value is not None and (best is None or sign * value > sign * best[0]):
                best = (value, trial, finite_float(r.get(CLOCK_KEY)) or 0.0)
        verdict = verdicts.get(trial)
        if tune.get(trial) == "ERROR" or (verdict is not None and verdict.error):
            counts["failed"] += 1
        elif trial in ended or tune.get(trial) == "TERMINATED":
            stopped = objective.outcome(clock, verdict, errored=False) == "stopped"
            counts["stopped early" if stopped else "completed"] += 1
        elif tune.get(trial) == "PENDING" and not history:
            continue  # suggested, waiting for resources: not started
        else:
            counts["running"] += 1
            moving.append(continues_from(layout.run_dir(trial)) if not live
                          else f"{trial} (epoch {clock:g})" if clock else f"{trial} (starting)")
    total = _total(ident, exp, search)
    if not live:
        counts["interrupted"] = counts.pop("running")
    counts["not started"] = max(0, total - sum(counts.values()))
    first = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.created if record else 0))
    starts = (f"started {record.starts} time{'s' if record.starts != 1 else ''}, first on "
              f"{first}") if record else "no state/sweep.json yet"
    lines = [f"sweep {name} in {shown} ({starts})", f"  {state}", *notes,
             "  trials: " + ", ".join(f"{n} {k}" for k, n in counts.items())
             + (f" (of {total})" if total else "")]
    if moving:
        lines.append(f"  {'running' if live else 'a resume continues'}: {', '.join(moving)}")
    lines += [_best_line(layout, live, best, metric, mode), f"  epochs spent: {spent:g}",
              _importance_line(layout)]
    if not live and files.exists(layout.summary_csv):
        lines.append(f"  finished: {display(layout.summary_csv)}, {display(layout.best)}")
    if live:
        lines.append(f"  started with: {holder.command}" if holder and holder.command else "")
    else:
        lines += [_tracking_line(layout),
                  f"  resume with: {_resume_command(root, holder, name, cfg)}"]
    return [line for line in lines if line]


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


def _total(ident: dict[str, str], exp: dict[str, Any], search: dict[str, Any]) -> int:
    """How many trials the sweep runs (0: unknown)."""
    if search.get("algorithm") == "grid":
        try:
            return grid_size(parse_space(exp.get("search_space") or {})[0])
        except (ValueError, TypeError):
            return 0
    return int(ident.get("search.num_samples") or search.get("num_samples") or 0)


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
    args = parser.parse_args(argv)
    root = find_sweep(args.sweep)
    try:
        lines = status_lines(root)
    except OSError as exc:  # FileNotFoundError: no sweep; else the store could not be read
        named = root.parts[-2:] == ("outputs", args.sweep)
        print(f"sweeps: error: {exc}{' (a NAME is looked up as outputs/NAME)' if named else ''}",
              file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0
