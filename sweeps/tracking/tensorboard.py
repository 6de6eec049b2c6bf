"""TensorBoard beside MLflow: one run per trial at the trial's own epochs, and an HParams view.

    tensorboard --logdir outputs/digits/tensorboard   # during or after +experiment=digits

    events = TensorBoardEvents(TensorBoardSettings(str(sweep_dir), (("val_acc", "max"),),
                                                   ("lr", "hidden")))    # in the sweep driver
    tune.Tuner(..., run_config=tune.RunConfig(callbacks=[..., events]))

Each trial's events go to ``<sweep dir>/tensorboard/<trial id>/`` (``SweepLayout``), scalars at
MLflow's step (``STEP_KEY``), never Tune's ``training_iteration``. The class subclasses Tune's
``TBXLoggerCallback`` only so that Tune adds no default one; with ``tracking.tensorboard=false``
it is passed with no settings and writes nothing. The rest (no step twice, the HParams session,
resumes, PBT restarts, object stores, failures): docs/running.md#tracking-in-detail.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune.logger import TBXLoggerCallback

from sweeps.layout import SweepLayout
from sweeps.protocol import CLOCK_KEY, STEP_KEY
from sweeps.report.exploits import exploits_of
from sweeps.search.outcome import Objective
from sweeps.search.schedulers import verdicts
from sweeps.storage import trees
from sweeps.tracking.event_files import (
    Written,
    hparams_of,
    read_run,
    scalars_of,
    session_end,
    tag_of,
)

__all__ = ["TensorBoardSettings", "TensorBoardEvents", "ROTATE_BYTES"]

log = logging.getLogger(__name__)

ROTATE_BYTES = 64 * 1024  # an event file this big is closed, so an upload stays small
_WRITERS = itertools.count(1)


@dataclass(frozen=True)
class TensorBoardSettings:
    """Plain, picklable settings (Tune pickles callbacks with the experiment)."""

    sweep_dir: str
    objectives: tuple[tuple[str, str], ...]  # (metric, "max"|"min"), the primary first
    params: tuple[str, ...] = ()  # the searched dotted paths (empty: every config key)
    scheduler: str = "none"
    max_epochs: float = 0.0  # scheduler.max_t: a trial's epoch budget (completed vs stopped)


def _outcome(s: TensorBoardSettings, trial: Any) -> str:
    """``completed``, ``stopped`` or ``error``: what MLflow's run status says too."""
    clock = (trial.last_result or {}).get(CLOCK_KEY, 0)
    verdict = verdicts(s.sweep_dir).get(trial.trial_id)
    return Objective(*s.objectives[0], s.max_epochs).outcome(clock, verdict, False)


@dataclass
class _Run:
    """One trial's TensorBoard run: its writer and what the run holds so far."""

    directory: Path
    written: Written
    writer: Any = None
    offset: int = 0  # added to the trial's steps since a PBT exploit moved its clock back
    rebase: bool = False  # the next step goes after the last written one (PBT restart)

    def write(self, summary: Any, step: int) -> None:
        """Append one summary at ``step`` (tensorboardX's synchronous writer: no queue, no
        thread; ``sync`` makes it durable)."""
        from tensorboardX.proto.event_pb2 import Event

        if self.writer is None:
            from tensorboardX.event_file_writer import EventsWriter

            self.directory.mkdir(parents=True, exist_ok=True)
            # tensorboardX names a file by the second and the host: a writer opened in the
            # same second would truncate the last one's file
            suffix = f".{os.getpid()}.{next(_WRITERS):06d}"
            self.writer = EventsWriter(str(self.directory / "events"), suffix)
        self.writer.write_event(Event(wall_time=time.time(), step=step, summary=summary))

    @property
    def step(self) -> int:
        """The step summaries other than scalars go at: never below a written one."""
        return max(self.written.last_step or 0, 0)

    def once(self, summary: Any, step: int) -> None:
        """Write a plugin summary (the HParams session's start or end) unless the run has
        its tag: TensorBoard reads only the first one of a run."""
        tag = summary.value[0].tag
        if tag not in self.written.plugin_tags:
            self.write(summary, step)
            self.written.plugin_tags.add(tag)

    def add(self, tag: str, value: float, step: int) -> bool:
        """Write a scalar unless the run has this tag at ``step`` or later already."""
        last = self.written.steps.get(tag)
        if last is not None and step <= last:
            return False
        from tensorboardX.summary import scalar

        self.write(scalar(tag, value), step)
        self.written.steps[tag] = step
        self.written.note(tag, value)
        return True

    def sync(self) -> None:
        """Flush (fsync'ed); on an object store, upload the file being written (one PUT of at
        most ``ROTATE_BYTES``), so what Tune has seen is on the store, as the MLflow journal
        is: a driver killed at any moment loses no step."""
        if self.writer is None:
            return
        self.writer.flush()
        path = Path(self.writer._file_name)  # tensorboardX's EventsWriter names its file here
        trees.publish(path)  # nothing for a local sweep directory
        if path.stat().st_size >= ROTATE_BYTES:  # the next summary opens a new file
            self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.flush()
            trees.publish(Path(self.writer._file_name))
            self.writer.close()
            self.writer = None


class TensorBoardEvents(TBXLoggerCallback):
    """Tune callback (in the sweep driver) writing each trial's TensorBoard run; see the module
    docstring. ``settings=None``: writes nothing, only keeps Tune's own TBX logger out."""

    def __init__(self, settings: TensorBoardSettings | None) -> None:
        super().__init__()  # imports tensorboardX: ImportError when it is missing
        self.settings = settings
        self._runs: dict[str, _Run] = {}
        self._warned: set[str] = set()

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "_runs": {}, "_warned": set()}

    @contextlib.contextmanager
    def _guard(self, trial_id: str) -> Iterator[None]:
        """Whatever fails here is logged once per trial, never raised into Tune's loop."""
        try:
            yield
        except Exception as exc:
            if trial_id not in self._warned:
                self._warned.add(trial_id)
                log.warning("TensorBoard: could not write trial %s's events (%s: %s); "
                            "training goes on", trial_id, type(exc).__name__, exc)

    def _run(self, s: TensorBoardSettings, trial_id: str) -> _Run:
        run = self._runs.get(trial_id)
        if run is None:
            directory = SweepLayout(Path(s.sweep_dir)).tensorboard_run(trial_id)
            trees.refresh_local(directory)  # a resumed trial's earlier events, from the store
            run = self._runs[trial_id] = _Run(directory, read_run(directory))
        return run

    def log_trial_start(self, trial: Any) -> None:
        """A trial starts, is resumed, or restarts after a PBT exploit (its next step then
        goes after its last one)."""
        s = self.settings
        if s is None:
            return
        with self._guard(trial.trial_id):
            from tensorboardX.summary import hparams

            run = self._run(s, trial.trial_id)
            if s.scheduler == "pbt" and any(e.trial == trial.trial_id
                                            for e in exploits_of(s.sweep_dir)):
                run.rebase = True  # restarted on a donor's checkpoint: its clock may go back
            _, start, _ = hparams(hparams_of(trial.config, s.params), {})
            run.once(start, run.step)
            run.sync()

    def log_trial_result(self, iteration: int, trial: Any, result: dict) -> None:
        s = self.settings
        if s is None:
            return
        with self._guard(trial.trial_id):
            run = self._run(s, trial.trial_id)
            step = int(result.get(STEP_KEY, result.get("training_iteration", 0)))
            if run.rebase:
                run.rebase, last = False, run.written.last_step
                if last is not None and step + run.offset <= last:
                    run.offset = last + 1 - step
            for tag, value in scalars_of(result).items():
                run.add(tag, value, step + run.offset)
            run.sync()

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        """Final and best value of each objective, the session's end; the writer closed."""
        s = self.settings
        if s is None:
            return
        with self._guard(trial.trial_id):
            run = self._run(s, trial.trial_id)
            failed = failed or _outcome(s, trial) == "error"
            step = run.step
            for metric, mode in s.objectives:
                tag = tag_of(metric)
                best = run.written.best(tag, mode)
                if best is not None:
                    run.add(f"final/{tag}", run.written.last[tag], step)
                    run.add(f"best/{tag}", best, step)
            run.once(session_end(failed), step)
            run.close()
            del self._runs[trial.trial_id]  # a trial resumed later reads its run back

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        """Tune's run ended (finished, interrupted or failed): every open run flushed,
        closed and, on an object store, uploaded."""
        for trial_id, run in list(self._runs.items()):
            with self._guard(trial_id):
                run.close()
        self._runs.clear()
