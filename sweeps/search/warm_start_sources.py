"""Where ``search.warm_start`` finds earlier trials: a sweep directory's files, or MLflow.

    found = read_sweep_dir(Path("outputs/digits"))      # sweeps.search.warm_start
    found, where = read_mlflow("sqlite:///mlflow.db", "digits")

Raw trials (params, metrics, how each ended) as each source holds them; screening them against
this sweep's space is ``sweeps.search.warm_start``'s. Reading MLflow reaches up into
``sweeps.tracking`` (its store rules and masking) on purpose: a warm start reads what an earlier
sweep's tracking wrote, with the same rules.
"""

from __future__ import annotations

import contextlib
import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.layout import SweepLayout
from sweeps.protocol import SCHEDULER_LOG
from sweeps.search.space import flatten
from sweeps.storage.journal import Journal

# Up a layer on purpose: read what an earlier sweep's tracking wrote, by its rules.
from sweeps.tracking.masking import mask_text

__all__ = ["Found", "is_sweep_dir", "read_mlflow", "read_sweep_dir"]

_TUNE_PARAMS = "params.json"  # Tune's copy of a trial's sampled config, in its trial directory


@dataclass(frozen=True)
class Found:
    """A trial as the source holds it: raw params/metrics and how it ended."""

    trial_id: str
    params: dict[str, Any] | None
    metrics: dict[str, Any]
    status: str  # "ended", "failed" or "unfinished"


def is_sweep_dir(path: Path) -> bool:
    layout = SweepLayout(path)
    return layout.record.is_file() or (layout.state / f"{SCHEDULER_LOG}.jsonl").is_file()


def _failed(status: str, tags: dict[str, Any]) -> bool:
    """A trial run that failed on its own, not one closed because its sweep died (tag
    ``sweeps.status=aborted``, ``sweeps.tracking.callback``): that one is unfinished."""
    return status == "FAILED" and tags.get("sweeps.status") != "aborted"


def read_sweep_dir(root: Path, log: list[dict[str, Any]] | None = None) -> list[Found]:
    """Every trial the sweep directory knows of, in the order it started: params from the
    journal's ``trial_start`` (tracking off: Tune's ``params.json``), replaced by a PBT
    exploit's; metrics and ends from the decision log, then the journal. ``log``: the decision
    log's records when already read (``sweeps.load``), so both see the same log."""
    layout = SweepLayout(root)
    order: dict[str, None] = {}  # trial ids, first seen first
    params, metrics, logged = {}, {}, {}  # trial -> a dict (logged: the decision log's values)
    ended, failed, restarted = set(), set(), {}
    for r in Journal(layout.tracking).records():
        trial = r.get("trial")
        if trial is None:
            continue
        order.setdefault(trial)
        if r.get("op") == "trial_start" and (r.get("params") or trial not in params):
            params[trial] = dict(r.get("params") or {})  # none: a PBT restart (below)
        elif r.get("op") == "metrics":
            metrics.setdefault(trial, {}).update(r.get("values") or {})
        elif r.get("op") == "trial_end" and r.get("status") == "FINISHED":
            ended.add(trial)
        elif r.get("op") == "trial_end" and _failed(r["status"], r.get("tags") or {}):
            failed.add(trial)
    for r in Journal(layout.state, SCHEDULER_LOG).records() if log is None else log:
        trial = r.get("trial")
        if trial is None:
            continue
        order.setdefault(trial)
        logged.setdefault(trial, {}).update(r.get("metrics") or {})
        if isinstance(exploit := r.get("exploit"), dict):  # the values PBT restarted it with
            restarted[trial] = dict(exploit.get("config") or {})
        if r.get("error"):
            failed.add(trial)
        elif r.get("reopen"):  # a grown sweep's trial training on (decisions.reopens)
            ended.discard(trial)
        elif r.get("end") or r.get("action") == "STOP":  # schedulers._ends
            ended.add(trial)
    found = []
    for trial in order:
        raw = params.get(trial)
        if raw is None and files.is_file(layout.trial_dir(trial) / _TUNE_PARAMS):
            with contextlib.suppress(ValueError):  # Tune writing it now: as if not yet there
                raw = flatten(json.loads(files.read_text(layout.trial_dir(trial) / _TUNE_PARAMS)))
        raw = restarted.get(trial, raw)  # PBT's values (every searched one) replace the first
        status = "failed" if trial in failed else "ended" if trial in ended else "unfinished"
        found.append(Found(trial, raw, {**metrics.get(trial, {}), **logged.get(trial, {})}, status))
    return found


def read_mlflow(uri: str, name: str) -> tuple[list[Found] | None, str]:
    """(the trial runs of experiment ``name``, in the order they started; or None and what was
    found instead)."""
    from sweeps.tracking.setup import local_store

    local = local_store(uri)
    if local is not None and not local.exists():
        return None, f"no MLflow store at {local}"
    try:
        from mlflow import MlflowClient

        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            names = [e.name for e in client.search_experiments()]
            close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
            near = f"; close names: {', '.join(repr(c) for c in close)}" if close else ""
            return None, f"no experiment {name!r} in MLflow at {mask_text(uri)}{near}"
        runs, token = [], None
        while True:
            page = client.search_runs([experiment.experiment_id],
                                      filter_string="tags.`sweeps.role` = 'trial'",
                                      order_by=["attributes.start_time ASC"], max_results=1000,
                                      page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                break
    except Exception as exc:  # an unreachable server, a store MLflow cannot read
        line = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        return None, mask_text(f"MLflow at {uri} could not be read ({line})")
    pbt = "sweeps.pbt.value."  # a PBT-exploited trial's current values (report.exploits)
    return [Found(r.data.tags.get("sweeps.trial_id", r.info.run_id), {**r.data.params, **{
                  k.removeprefix(pbt): v for k, v in r.data.tags.items() if k.startswith(pbt)}},
                  dict(r.data.metrics), "ended" if r.info.status == "FINISHED" else
                   "failed" if _failed(r.info.status, r.data.tags) else "unfinished")
            for r in runs], f"MLflow experiment {name!r} at {uri}"
