"""python -m bench.overhead / bench.scale: each trial's timeline from Ray's state API.

    actors = actors_since(started)                    # after a sweep, in the same Ray instance
    trials = trial_timelines(rows_by_trial, actors, tracked)

Ray's state API (``ray.util.state``) needs the dashboard: the benchmarks start their private
Ray with ``include_dashboard=True`` when they break trials into phases. Sources, all recorded by
Ray itself (times in ms, turned into ``time.time()`` seconds):

- an actor's creation task: asked for (``creation_time_ms``), running on a process
  (``start_time_ms``: after the process was launched), ready (``end_time_ms``: after the
  imports and ``__init__``), and its parent (the actor whose task asked for it: a task id
  ends with the id of the actor it runs on);
- the trial actor's method calls (``ImplicitFunc.train``/``reset``: where a trial ends, and
  where a reused actor starts the next one);
- the process's exit (``list_workers``), reported for context.

The trial actor of a trial is the one whose process made its reports (Tune's ``pid`` result
key). Everything else is the arithmetic of ``bench.phases``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from bench.phases import split_actor, trial_events

__all__ = ["actors_since", "actor_calls", "trial_timelines"]

LIMIT = 10_000  # the state API's most per request
# A task id is 8 bytes of its own + the id of the actor it runs on (24 bytes, 48 hex digits);
# the driver's tasks run on no actor (the nil id, all f's, + the job id).
ACTOR_OF_TASK = slice(16, 48)
CREATION = "f" * 16  # an actor's creation task id is this + the actor id


def _s(ms: Any) -> float | None:
    return float(ms) / 1000.0 if ms else None


def actors_since(since: float) -> dict[str, dict[str, Any]]:
    """Actor id -> ``{"id", "cls", "parent", "pid", "requested", "running", "ready",
    "exited"}`` for every actor asked for at or after ``since`` (seconds)."""
    from ray.util.state import list_actors, list_tasks, list_workers

    actors = list_actors(detail=True, limit=LIMIT, raise_on_missing_output=False)
    creations: dict[str, Any] = {}
    for cls in sorted({a.class_name for a in actors}):  # the name filter runs in the GCS
        for task in list_tasks(filters=[("name", "=", f"{cls}.__init__")], detail=True,
                               limit=LIMIT, raise_on_missing_output=False):
            if task.type == "ACTOR_CREATION_TASK":
                creations[task.actor_id] = task
    for actor in actors:  # a named actor's task is named otherwise: ask for it by its id
        if actor.actor_id not in creations:
            for task in list_tasks(filters=[("task_id", "=", CREATION + actor.actor_id)],
                                   detail=True, limit=10, raise_on_missing_output=False):
                creations[actor.actor_id] = task
    exits: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for worker in list_workers(detail=True, limit=LIMIT, raise_on_missing_output=False):
        start, end = _s(worker.start_time_ms), _s(worker.end_time_ms)
        if worker.pid and start and end:
            exits[worker.pid].append((start, end))
    out = {}
    for actor in actors:
        task = creations.get(actor.actor_id)
        if task is None or (_s(task.creation_time_ms) or 0.0) < since:
            continue
        parent = (task.parent_task_id or "")[ACTOR_OF_TASK]
        ready = _s(task.end_time_ms)
        exited = [end for start, end in exits.get(actor.pid, [])
                  if ready is None or start <= ready <= end]
        out[actor.actor_id] = {
            # "wrap_function.<locals>.ImplicitFunc" for some, "ImplicitFunc" for others
            "id": actor.actor_id, "cls": actor.class_name.rsplit(".", 1)[-1], "pid": actor.pid,
            "parent": None if not parent or parent.startswith("f" * 24) else parent,
            "requested": _s(task.creation_time_ms), "running": _s(task.start_time_ms),
            "ready": ready, "exited": exited[0] if exited else None}
    return out


def actor_calls(actor_id: str) -> list[dict[str, Any]]:
    """The actor's method calls: ``{"method", "requested", "end"}`` (``end`` None: running)."""
    from ray.util.state import list_tasks

    calls = []
    for task in list_tasks(filters=[("actor_id", "=", actor_id)], detail=True, limit=LIMIT,
                           raise_on_missing_output=False):
        if task.type == "ACTOR_TASK":
            calls.append({"method": task.name.rsplit(".", 1)[-1],
                          "requested": _s(task.creation_time_ms), "end": _s(task.end_time_ms)})
    return calls


def _descendants(actors: dict[str, dict[str, Any]], root: str, start: float | None,
                 end: float | None) -> list[dict[str, Any]]:
    """Actors created under ``root`` (and under those) between ``start`` and ``end``."""
    found, frontier = [], [root]
    while frontier:
        parent = frontier.pop()
        for actor in actors.values():
            if actor["parent"] != parent or actor["requested"] is None:
                continue
            if parent == root and ((start is not None and actor["requested"] < start)
                                   or (end is not None and actor["requested"] > end)):
                continue
            found.append(actor)
            frontier.append(actor["id"])
    return found


def trial_timelines(rows: dict[str, list[dict[str, Any]]], actors: dict[str, dict[str, Any]],
                    tracked: dict[str, float] | None = None,
                    wait_s: float = 10.0) -> dict[str, dict[str, Any]]:
    """Trial id -> ``{"events": bench.phases.trial_events, "actor": its trial actor (as
    ``actors_since`` gives it) or None, "children": [actors created under it for it]}``.

    ``rows``: each trial's reports (dicts with Tune's ``pid`` and the loop's ``t_*`` stamps).
    ``tracked``: trial id -> when its MLflow run was seen FINISHED. Waits up to ``wait_s``
    for the last ``train`` calls to be recorded (Ray sends task events about once a second).
    """
    by_actor: dict[str, list[str]] = defaultdict(list)
    owner: dict[str, str | None] = {}
    for trial_id, reports in rows.items():
        pids = {r.get("pid") for r in reports}
        first = min((r.get("t_report") or 0.0) for r in reports) if reports else 0.0
        found = [a for a in actors.values() if a["pid"] in pids and (a["ready"] or 0.0) <= first]
        owner[trial_id] = max(found, key=lambda a: a["requested"])["id"] if found else None
        if owner[trial_id]:
            by_actor[owner[trial_id]].append(trial_id)
    spans: dict[str, dict[str, Any]] = {}
    for actor_id, trial_ids in by_actor.items():
        trial_ids.sort(key=lambda t: min(r.get("t_report") or 0.0 for r in rows[t]))
        deadline = time.monotonic() + wait_s
        while True:
            split = split_actor(actors[actor_id], actor_calls(actor_id), len(trial_ids))
            if all(s["end"] is not None for s in split) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        spans.update(zip(trial_ids, split, strict=True))
    out = {}
    for trial_id, reports in rows.items():
        span = spans.get(trial_id, {"start": None, "actor_ready": None, "end": None})
        children = (_descendants(actors, owner[trial_id], span["start"], span["end"])
                    if owner[trial_id] else [])
        out[trial_id] = {"actor": actors.get(owner[trial_id] or ""), "children": children,
                         "events": trial_events(span, children, reports,
                                                (tracked or {}).get(trial_id))}
    return out
