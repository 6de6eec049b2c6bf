"""python -m bench.overhead (its per-phase breakdown): where a trial's seconds go, from timestamps.

Ray-free arithmetic over what ``bench.timeline`` collects (Ray's state API: actor creation
tasks, the trial actor's task calls, process exits) and what the loop reports
(``bench.workload``: ``t_proc_start``, ``t_loop_entry``, ``t_report``). Every time is
``time.time()`` seconds. A trial's events, in the order they happen:

    start            Tune asked for the trial's actor (or, a reused actor, for its reset)
    actor_ready      the trial actor is up (process started, Tune and the trainable imported)
    controller_asked the trial function asked for the Train controller (absent: no Train run)
    controller_ready the Train controller actor is up               (absent: no Train run)
    workers_ready    the last Train worker actor is up              (absent: no Train run)
    loop_entry       the loop was called (Train has set up the process group by then)
    first_report     the first report was made
    last_report      the last report was made
    end              the trial function returned to Tune (its last ``train`` call ended)
    tracked          its MLflow run was seen FINISHED (sweeps with tracking only)

Each phase is the time from the last present event to its own; an absent event (the inline
executor starts no controller and no workers) makes its phase ``None`` and the next one starts
from the event before. ``first_report`` is the loop's set-up (the epoch's training left out),
``reports`` the time spent inside every report but the last (training left out), ``teardown``
from the last report to the trial's end (the last report's own latency included). ``tracking``
runs after the trial's end, beside the next trial, so it is not part of the trial's span.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

__all__ = ["EVENTS", "PHASES", "TRACKING", "actor_breakdown", "median_phases", "phases",
           "split_actor", "sweep_phases", "trial_events"]

EVENTS = ("start", "actor_ready", "controller_asked", "controller_ready", "workers_ready",
          "loop_entry", "first_report", "last_report", "end")
PHASES = ("trial_actor_start", "driver_setup", "controller_start", "worker_start",
          "loop_entry", "first_report", "reports", "teardown")
TRACKING = "tracking"
CONTROLLER, WORKER = "TrainController", "RayTrainWorker"


def split_actor(actor: dict[str, Any], calls: list[dict[str, Any]],
                trials: int) -> list[dict[str, float | None]]:
    """The ``trials`` trials one trial actor ran, in order: ``start``, ``actor_ready``, ``end``.

    The first starts when the actor was asked for; each later one (Tune's ``reuse_actors``)
    when its ``reset`` call was; each ends when the last ``train`` call before the next reset
    ended. ``calls``: the actor's method calls, ``{"method", "requested", "end"}``.

    Example:
        >>> actor = {"requested": 0.0, "ready": 2.0}
        >>> calls = [{"method": "train", "requested": 2.0, "end": 5.0},
        ...          {"method": "train", "requested": 5.0, "end": 6.0},
        ...          {"method": "reset", "requested": 6.5, "end": 6.6},
        ...          {"method": "train", "requested": 6.6, "end": 8.0}]
        >>> [tuple(span.values()) for span in split_actor(actor, calls, 2)]
        [(0.0, 2.0, 6.0), (6.5, 6.6, 8.0)]
    """
    calls = sorted(calls, key=lambda c: c["requested"])
    spans = [{"start": actor["requested"], "actor_ready": actor["ready"], "end": None}]
    for call in calls:
        if call["method"] == "reset":
            spans.append({"start": call["requested"], "actor_ready": call["end"], "end": None})
        elif call["method"] in ("train", "stop") and call.get("end") is not None:
            spans[-1]["end"] = call["end"]
    spans = spans[:trials]
    return spans + [{"start": None, "actor_ready": None, "end": None}] * (trials - len(spans))


def trial_events(span: dict[str, float | None], children: Iterable[dict[str, Any]],
                 rows: list[dict[str, Any]], tracked: float | None = None) -> dict[str, Any]:
    """One trial's events (``EVENTS`` plus ``tracked``, ``proc_start``, ``training_first``
    and ``training_rest``) from its span on the trial actor, the actors created under it
    (``{"cls", "ready", ...}``; the controller's own children included) and its reports
    (rows with ``t_loop_entry``, ``t_report``, ``t_proc_start``, ``epoch_time_s``).

    Example:
        >>> span = {"start": 0.0, "actor_ready": 2.0, "end": 9.0}
        >>> rows = [{"t_loop_entry": 3.0, "t_report": 5.0, "epoch_time_s": 1.0},
        ...         {"t_loop_entry": 3.0, "t_report": 7.0, "epoch_time_s": 1.5}]
        >>> e = trial_events(span, [], rows)
        >>> e["controller_ready"], e["loop_entry"], e["last_report"], e["training_rest"]
        (None, 3.0, 7.0, 1.5)
    """
    children = list(children)
    rows = sorted(rows, key=lambda r: r.get("t_report") or 0.0)

    def latest(cls: str, key: str) -> float | None:
        times = [c[key] for c in children if c["cls"] == cls and c.get(key)]
        return max(times) if times else None

    def stamp(row: dict[str, Any] | None, key: str) -> float | None:
        value = (row or {}).get(key)
        return float(value) if isinstance(value, int | float) and value == value else None

    first, last = (rows[0], rows[-1]) if rows else (None, None)
    training = [float(r.get("epoch_time_s") or 0.0) for r in rows]
    return {**{k: span.get(k) for k in ("start", "actor_ready", "end")},
            "controller_asked": latest(CONTROLLER, "requested"),
            "controller_ready": latest(CONTROLLER, "ready"),
            "workers_ready": latest(WORKER, "ready"),
            "loop_entry": stamp(first, "t_loop_entry"), "first_report": stamp(first, "t_report"),
            "last_report": stamp(last, "t_report"), "proc_start": stamp(first, "t_proc_start"),
            "tracked": tracked, "training_first": training[0] if training else 0.0,
            "training_rest": sum(training[1:])}


def phases(events: dict[str, Any]) -> dict[str, float | None]:
    """Seconds per phase (``PHASES``, then ``tracking``) of one trial's ``trial_events``.

    Example:
        >>> e = {"start": 0.0, "actor_ready": 2.0, "controller_asked": None,
        ...      "controller_ready": None, "workers_ready": None, "loop_entry": 3.0,
        ...      "first_report": 5.0,
        ...      "last_report": 7.0, "end": 9.0, "tracked": 9.5, "training_first": 1.0,
        ...      "training_rest": 1.5}
        >>> phases(e)  # doctest: +NORMALIZE_WHITESPACE
        {'trial_actor_start': 2.0, 'driver_setup': None, 'controller_start': None,
         'worker_start': None,
         'loop_entry': 1.0, 'first_report': 1.0, 'reports': 0.5, 'teardown': 2.0,
         'tracking': 0.5}
    """
    out: dict[str, float | None] = {}
    previous = events.get("start")
    for name, event in zip(PHASES, EVENTS[1:], strict=True):
        at = events.get(event)
        out[name] = None if at is None or previous is None else at - previous
        previous = at if at is not None else previous
    for name, key in (("first_report", "training_first"), ("reports", "training_rest")):
        if out[name] is not None:
            out[name] -= events.get(key) or 0.0
    end, tracked = events.get("end"), events.get("tracked")
    out[TRACKING] = None if end is None or tracked is None else tracked - end
    return out


def median_phases(per_trial: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Median of each phase over trials: a phase absent from a trial counts 0 there, one
    absent from every trial is ``None``; ``overhead`` is the median of each trial's sum.

    Example:
        >>> median_phases([{"loop_entry": 1.0, "reports": None},
        ...                {"loop_entry": 3.0, "reports": None}])
        {'loop_entry': 2.0, 'reports': None, 'overhead': 2.0}
    """
    names = list(dict.fromkeys(k for p in per_trial for k in p))
    out: dict[str, float | None] = {}
    for name in names:
        values = [p.get(name) for p in per_trial]
        out[name] = (None if all(v is None for v in values)
                     else statistics.median(v or 0.0 for v in values))
    sums = [sum(v or 0.0 for k, v in p.items() if k != TRACKING) for p in per_trial]
    out["overhead"] = statistics.median(sums) if sums else None
    return out


def actor_breakdown(children: list[list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per actor class, over trials: how many a trial started (median), and the median
    seconds each waited for a process (``launch_s``: asked -> running) and spent importing
    and in ``__init__`` (``init_s``: running -> ready).

    Example:
        >>> a = {"cls": "W", "requested": 0.0, "running": 1.0, "ready": 3.0}
        >>> actor_breakdown([[a, a], [a]])
        {'W': {'count': 1.5, 'launch_s': 1.0, 'init_s': 2.0}}
    """
    classes = sorted({c["cls"] for trial in children for c in trial})
    out = {}
    for cls in classes:
        mine = [c for trial in children for c in trial if c["cls"] == cls]
        launch = [c["running"] - c["requested"] for c in mine
                  if c.get("running") is not None and c.get("requested") is not None]
        init = [c["ready"] - c["running"] for c in mine
                if c.get("ready") is not None and c.get("running") is not None]
        out[cls] = {"count": statistics.median(sum(c["cls"] == cls for c in trial)
                                               for trial in children),
                    "launch_s": statistics.median(launch) if launch else 0.0,
                    "init_s": statistics.median(init) if init else 0.0}
    return out


def sweep_phases(called: float, returned: float,
                 trials: list[dict[str, Any]]) -> dict[str, float | None]:
    """The sweep's own share: ``head`` (call -> first trial's start), ``tail`` (last trial's
    end -> return) and ``gap`` (median of previous trial's end -> next start, trials in start
    order; negative when trials overlap).

    Example:
        >>> sweep_phases(0.0, 20.0, [{"start": 1.0, "end": 8.0}, {"start": 9.0, "end": 18.0}])
        {'head': 1.0, 'tail': 2.0, 'gap': 1.0}
    """
    done = sorted((t for t in trials if t.get("start") is not None and t.get("end") is not None),
                  key=lambda t: t["start"])
    if not done:
        return {"head": None, "tail": None, "gap": None}
    gaps = [b["start"] - a["end"] for a, b in zip(done, done[1:], strict=False)]
    return {"head": done[0]["start"] - called, "tail": returned - max(t["end"] for t in done),
            "gap": statistics.median(gaps) if gaps else None}
