"""optuna-dashboard on any sweep: ``<sweep dir>/optuna.log``, an Optuna journal kept as it runs.

    optuna-dashboard outputs/digits/optuna.log                  # a live or a finished sweep
    python -m sweeps optuna-log s3://bucket/sweeps/digits out.log   # written here, from its files

``OptunaLog``, a Tune callback in the sweep driver, appends in the order things happen (a
dashboard reads a live journal on from where it stopped, so the file only grows); what each
sweep trial becomes: docs/running.md#optuna-dashboard-optunalog. A failure here is logged
once and ends the journal; it never fails the sweep.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from ray.tune import Callback

from sweeps.protocol import CLOCK_KEY, STEP_KEY
from sweeps.search.optuna_space import optuna_params
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import verdicts
from sweeps.search.space import Param, flatten
from sweeps.trial.clock import finite_float

__all__ = ["OptunaLog", "export"]

log = logging.getLogger(__name__)
TRIAL_ATTR = "sweeps_trial_id"  # the sweep's trial id, on each Optuna trial


class OptunaLog(Callback):
    """The sweep's Optuna journal at ``path`` (a local file), for ``objectives`` (metric ->
    mode, the primary first) over ``params``; ``sweep_dir`` holds the scheduler's verdicts."""

    def __init__(self, path: str, study: str, objectives: dict[str, str], params: list[Param],
                 objective: Objective, sweep_dir: str) -> None:
        self.path, self.study, self.objectives = path, study, dict(objectives)
        self.params, self.objective, self.sweep_dir = list(params), objective, sweep_dir
        self._storage: Any = None
        self._ids: dict[str, int] = {}  # sweep trial id -> its (latest) Optuna trial id
        self._ended: dict[str, str] = {}  # sweep trial id -> its Optuna trial's end state
        self._last: dict[str, float] = {}  # sweep trial id -> its last primary value
        self._off = False

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles callbacks with the experiment
        return {**self.__dict__, "_storage": None, "_ids": {}, "_ended": {}, "_last": {},
                "_off": False}

    def _open(self) -> Any:
        if self._storage is None:
            from optuna.storages import JournalStorage
            from optuna.storages.journal import JournalFileBackend
            from optuna.study import StudyDirection

            _mend(Path(self.path))
            storage = JournalStorage(JournalFileBackend(self.path))
            try:
                self._study_id = storage.get_study_id_from_name(self.study)
            except KeyError:  # Optuna's "A new study created" line is not the sweep's news
                logging.getLogger(JournalStorage.__module__).setLevel(logging.WARNING)
                self._study_id = storage.create_new_study(
                    [StudyDirection.MAXIMIZE if m == "max" else StudyDirection.MINIMIZE
                     for m in self.objectives.values()], self.study)
                storage.set_study_system_attr(self._study_id, "study:metric_names",
                                              list(self.objectives))  # Study.set_metric_names
            for t in storage.get_all_trials(self._study_id, deepcopy=False):  # the last wins
                if (trial_id := t.user_attrs.get(TRIAL_ATTR)) is not None:
                    self._ids[trial_id] = t._trial_id
                    self._ended.pop(trial_id, None)
                    if t.state.is_finished():
                        self._ended[trial_id] = t.state.name
            self._storage = storage
        return self._storage

    def _safely(self, step: Any, *args: Any) -> None:
        if self._off:
            return
        try:
            step(*args)
        except Exception as exc:  # the dashboard's file never fails the sweep
            self._off = True
            log.warning("%s: not written from here on: %s: %s (python -m sweeps optuna-log "
                        "%s writes it anew)", self.path, type(exc).__name__, exc, self.sweep_dir)

    def begin(self, trial_id: str, values: dict[str, Any]) -> None:
        """Open an Optuna trial for the sweep's trial ``trial_id`` (once; again after a FAIL,
        which a resume runs again and Optuna never reopens), with its ``values`` (flat dotted
        keys) for the searched params."""
        from optuna.trial import TrialState, create_trial

        storage = self._open()
        if trial_id in self._ids and self._ended.get(trial_id) != "FAIL":
            return
        self._ended.pop(trial_id, None)
        named, spaces = optuna_params(values, self.params)
        template = create_trial(state=TrialState.RUNNING, params=named, distributions=spaces,
                                user_attrs={TRIAL_ATTR: trial_id})
        self._ids[trial_id] = storage.create_new_trial(self._study_id, template)

    def report(self, trial_id: str, result: dict[str, Any]) -> None:
        """One report: the primary metric at the trial's epoch (one objective only)."""
        value = finite_float(result.get(next(iter(self.objectives))))
        step = result.get(STEP_KEY, result.get(CLOCK_KEY))
        storage = self._open()
        if len(self.objectives) == 1 and None not in (value, step) and trial_id not in self._ended:
            storage.set_trial_intermediate_value(self._ids[trial_id], int(step), value)
            self._last[trial_id] = value

    def end(self, trial_id: str, status: str, last: dict[str, Any]) -> None:
        """End the trial: ``status`` as the summary says it (completed, stopped, else failed),
        ``last`` its last report."""
        from optuna.trial import TrialState

        storage, values = self._open(), [finite_float(last.get(m)) for m in self.objectives]
        if values == [None] and trial_id in self._last:  # its last report lacks the metric
            values = [self._last[trial_id]]
        if trial_id in self._ended:
            return
        state = (TrialState.COMPLETE if status == "completed" and None not in values else
                 TrialState.PRUNED if status == "stopped" else TrialState.FAIL)
        self._ended[trial_id] = state.name
        storage.set_trial_state_values(  # PRUNED: the last value, as Optuna's tell keeps
            self._ids[trial_id], state, values if state == TrialState.COMPLETE or (
                state == TrialState.PRUNED and len(values) == 1 and values[0] is not None)
            else None)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._safely(self.begin, trial.trial_id, flatten(trial.config or {}))

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        self.on_trial_start(iteration, trials, trial)  # restored by a resume: once, as it began
        self._safely(self.report, trial.trial_id, result)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        last = trial.last_result or {}
        if CLOCK_KEY not in last:
            return  # never started (ended by sweep.budget while pending)
        clock = finite_float(last.get(CLOCK_KEY)) or 0.0
        status = self.objective.outcome(clock, verdicts(Path(self.sweep_dir)).get(trial.trial_id),
                                        False)
        self.on_trial_start(iteration, trials, trial)
        self._safely(self.end, trial.trial_id, status, last)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.on_trial_start(iteration, trials, trial)
        self._safely(self.end, trial.trial_id, "failed", {})


def _mend(path: Path) -> None:
    """Cut a torn last line (a driver killed mid-append) so the next append starts clean, and drop
    its lock (only the driver holding the sweep writes here), which Optuna would wait 30 s for."""
    Path(f"{path}.lock").unlink(missing_ok=True)
    if path.exists() and (data := path.read_bytes()) and not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def export(sweep_dir: str, out: str) -> int:
    """Write the journal of the sweep in ``sweep_dir`` (a path, an ``s3://`` URI, or a NAME)
    anew at ``out`` from its files; return the trials written.

    Example:
        >>> export("s3://bucket/sweeps/digits", "digits.log")  # doctest: +SKIP
        12
    """
    from sweeps.report.sweep_state import find_sweep, read_sweep
    from sweeps.search.space import parse_space
    from sweeps.search.warm_start_sources import read_sweep_dir

    view = read_sweep(find_sweep(sweep_dir))
    space = parse_space((view.cfg.get("experiment") or {}).get("search_space") or {})[0]
    ran = {f.trial_id: f.params or {} for f in read_sweep_dir(view.root)}
    temp = f"{out}.{os.getpid()}.tmp"
    journal = OptunaLog(temp, view.name, view.objectives, space, view.objective, str(view.root))
    if view.live and Path(out).resolve() == Path(view.root, "optuna.log").resolve():
        raise FileExistsError(f"{out}: the running sweep keeps it up to date; write elsewhere")
    started = [t for t in view.trials if t.status != "not started"]
    try:
        journal._open()  # the study, also before any trial started
        for t in started:
            journal.begin(t.trial_id, ran.get(t.trial_id, {}))
            for r in t.history:
                journal.report(t.trial_id, r)
            if t.status not in ("running", "interrupted"):
                journal.end(t.trial_id, t.status, t.history[-1] if t.history else {})
        os.replace(temp, out)
    finally:
        for leftover in (temp, f"{temp}.lock"):
            with contextlib.suppress(OSError):
                os.unlink(leftover)
    return len(started)


def main(argv: list[str] | None = None) -> int:
    """``python -m sweeps optuna-log DIR [OUT]``: OUT defaults to ``<DIR>/optuna.log`` for a
    local sweep, ``./optuna.log`` for an object store's."""
    from sweeps.report.sweep_state import find_sweep
    from sweeps.storage.location import filesystem

    args = sys.argv[1:] if argv is None else argv
    if not 1 <= len(args) <= 2 or args[0].startswith("-"):
        print("usage: python -m sweeps optuna-log DIR [OUT]", file=sys.stderr)
        return 2
    root = find_sweep(args[0])
    out = args[1] if len(args) == 2 else (
        "optuna.log" if filesystem(root) is not None else str(root / "optuna.log"))
    try:
        count = export(args[0], out)
    except (OSError, ValueError) as exc:  # no sweep, a live one's file, OUT unwritable, ...
        print(f"sweeps optuna-log: {exc}", file=sys.stderr)
        return 1
    print(f"{out}: {count} trials; open it with: optuna-dashboard {out}")
    return 0
