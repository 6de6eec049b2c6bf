"""A sweep's state from its directory's files alone, for ``sweeps status`` and ``sweeps.load``.

    view = read_sweep(find_sweep("digits"))     # a path, s3://bucket/prefix/name, or a NAME
    view.live, view.trials[0].status, view.trials[0].history[-1]["val_acc"]

On disk or on an object store (``sweeps.files``); neither Ray nor torch nor MLflow is imported,
and it is safe while the sweep runs (its one write, the claim store's clock probe, is removed at
once). Trials: Tune's newest experiment state gives each one's status (``ERROR``: failed), the
scheduler's decision log which ended (``sweeps.search.outcome``: completed or stopped early), its
report log the epochs and metric values. One that any of them names and that has not ended is
running while the sweep is live, else interrupted: what a resume continues
(``sweeps.resume.notes``). One Tune suggested and that waits for resources is not listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps._ray.tune import experiment_state_files, newest_trial_statuses
from sweeps.errors import StateError
from sweeps.layout import SweepLayout
from sweeps.lease import Holder, claim_store, describe, inspect, this_driver
from sweeps.lease.holder import who
from sweeps.protocol import CLOCK_KEY
from sweeps.resume.notes import unended_runs
from sweeps.search.decisions import decision_log, ended_ids
from sweeps.search.outcome import Objective, not_started, read_verdicts
from sweeps.storage.location import display, is_uri, sweep_root
from sweeps.trial import report_log  # up a layer on purpose: reads the file trials write
from sweeps.trial.clock import finite_float

__all__ = ["SweepView", "TrialState", "claim_line", "find_sweep", "read_sweep"]


def find_sweep(arg: str) -> Path:
    """The sweep directory ``arg`` names: a path or URI, or else ``outputs/<arg>``.

    Example:
        >>> from sweeps.storage.location import uri_of
        >>> uri_of(find_sweep("s3://bucket/sweeps/d")), find_sweep("digits").parts[-2:]
        ('s3://bucket/sweeps/d', ('outputs', 'digits'))
    """
    named = is_uri(arg) or "/" in arg or Path(arg).expanduser().exists()
    return sweep_root(arg if named else Path("outputs") / arg)


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
    silent, by = f"{verdict.silent_s:.0f} s", who(holder) if holder else ""
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


@dataclass
class TrialState:
    """One trial as the sweep directory tells it (``sweeps status``, ``sweeps.load``): its
    status (``completed``, ``stopped``, ``failed``, ``running``, ``interrupted`` when no
    driver holds the sweep, ``not started`` when ``sweep.budget`` ended it first), its reports
    oldest first, and its furthest clock."""

    trial_id: str
    status: str
    history: list[dict[str, Any]]
    clock: float

    def last(self, key: str) -> float | None:
        """The last number the trial reported for ``key`` (a metric, its restarts), or None."""
        return next((v for r in reversed(self.history)
                     if (v := finite_float(r.get(key))) is not None), None)


@dataclass
class SweepView:
    """What a sweep directory says about its sweep, read from its files alone."""

    root: Path
    name: str
    record: Any  # sweeps.resume.state's record, None before state/sweep.json
    cfg: dict[str, Any]  # the newest start's stored config
    objective: Objective
    claim: str  # the claim in words (claim_line)
    live: bool
    holder: Holder | None
    notes: list[str]
    trials: list[TrialState]
    log: list[dict[str, Any]] = field(default_factory=list)  # the decision log, as read

    @property
    def objectives(self) -> dict[str, str]:
        """Each objective and its mode (``experiment.metrics``, else the one metric), stored."""
        exp = self.cfg.get("experiment") or {}
        return dict(exp.get("metrics") or {}) or {self.objective.metric: self.objective.mode}


def read_sweep(root: Path) -> SweepView:
    """The sweep in ``root``; ``FileNotFoundError`` when it holds no sweep.

    Example:
        >>> read_sweep(Path(tempfile.mkdtemp()))
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
    exp, sched = cfg.get("experiment") or {}, cfg.get("scheduler") or {}
    state, live, holder = claim_line(root, record.name if record else "", cfg.get("sweep") or {})
    name = record.name if record else (holder.sweep if holder else "") or root.name
    objective = Objective(ident.get("experiment.metric") or exp.get("metric") or "",
                          ident.get("experiment.mode") or exp.get("mode") or "max",
                          float(ident.get("scheduler.max_t") or sched.get("max_t") or math.inf))
    log = decision_log(root).records()
    return SweepView(root, name, record, cfg, objective, state, live, holder, notes,
                     _trial_states(layout, objective, live, log), log)


def _trial_states(layout: SweepLayout, objective: Objective, live: bool,
                  log: list[dict[str, Any]]) -> list[TrialState]:
    verdicts, tune, ended = read_verdicts(log), newest_trial_statuses(layout.root), ended_ids(log)
    runs = {p.name for p in unended_runs(layout, ended)}
    out = []
    for trial in sorted(set(tune) | {r["trial"] for r in log if "trial" in r} | runs):
        history = report_log.records(layout.run_dir(trial)) or [  # else what the log kept
            r["metrics"] for r in log if r.get("trial") == trial and r.get("metrics")]
        clock = max((c for r in history if (c := finite_float(r.get(CLOCK_KEY))) is not None),
                    default=0.0)
        verdict = verdicts.get(trial)
        if tune.get(trial) == "ERROR" or (verdict is not None and verdict.error):
            status = "failed"
        elif not_started(verdict, clock):
            status = "not started"
        elif trial in ended or tune.get(trial) == "TERMINATED":
            status = objective.outcome(clock, verdict, errored=False)
        elif tune.get(trial) == "PENDING" and not history:
            continue  # suggested, waiting for resources: not started
        else:
            status = "running" if live else "interrupted"
        out.append(TrialState(trial, status, history, clock))
    return out
