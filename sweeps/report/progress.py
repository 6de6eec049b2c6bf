"""Live progress of a sweep.

On a terminal: finished trials are printed once, and below them a block redrawn in place with
one line per running trial (its latest epoch and metric) and a progress bar:

    [  87s] 5/8 done | trial 9a6685fe completed | best 0.9777 (9a6685fe)
      running 7d8c94c8: epoch 3/9 val_acc=0.9220
      [############........] 5/8 done, 1 running, 2 pending, 4 stopped | best 0.9777 | 1:27

Piped or logged output gets one plain line per event (started, each epoch, ended), without
escape codes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ray.tune import Callback

from sweeps.layout import SweepLayout
from sweeps.protocol import CLOCK_KEY, FAILURE_KEY
from sweeps.report.failure import failed_rank, failure_reason
from sweeps.search.decisions import ended_ids
from sweeps.search.outcome import WORST, Objective, read_verdicts
from sweeps.search.schedulers import verdicts
from sweeps.storage.location import display
from sweeps.trial.clock import numeric  # up a layer on purpose: the clock's rule for a number

__all__ = ["ProgressLines", "failure_reason"]  # failure_reason: sweeps.report.failure


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class ProgressLines(Callback):
    """Tune callback printing trial events, with a progress bar when writing to a terminal."""

    def __init__(self, objective: Objective, total: int, stream: TextIO | None = None,
                 sweep_dir: str | None = None) -> None:
        self.objective, self.total = objective, total
        self.sweep_dir = sweep_dir  # where the scheduler's verdicts are (None: clock only)
        self.stream = stream  # None: whatever sys.stdout is when a line is printed
        self.start = time.monotonic()
        self.done = self.stopped = 0
        self.running: dict[str, str] = {}  # trial id -> its latest progress text
        self.best: tuple[float, str] | None = None
        self._kept: set[str] = set()  # ended in an earlier run of the sweep: counted already
        self._done_before = 0  # trials an earlier run ended: not this run's pace
        self._drawn = 0  # lines of the live block currently on the terminal
        self.budget: Any = None  # sweep.budget's BudgetLedger (sweeps.search.budget), if set
        self._restarts: dict[str, str] = {}  # trial id -> the last restart the lines told

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks with the experiment; an open stream cannot be pickled."""
        return {**self.__dict__, "stream": None}

    def kept(self, records: list[dict[str, Any]]) -> None:
        """A resumed sweep: count the trials its earlier runs ended, and the best value they
        reported, from the scheduler's decision log (``records``). Tune restores those trials ended
        and calls no end hook for them, so the lines would otherwise start at "0/N done" with a best
        that ignores them. A trial the scheduler failed (its metric missing, GPU memory) ended with
        the log's STOP and counts as done; one whose loop raised has no end in the log (a resume
        runs it again) and does not. A screened NaN/inf value (logged as the worst) is no best.

        Example:
            >>> lines = ProgressLines(Objective("acc", "max", 3), total=4)
            >>> lines.kept([{"trial": "a", "epoch": 1, "metrics": {"acc": 0.5}},
            ...             {"trial": "a", "epoch": 3, "metrics": {"acc": 0.7}, "end": True},
            ...             {"trial": "b", "epoch": 1, "metrics": {"acc": 0.2}, "action": "STOP"},
            ...             {"trial": "c", "epoch": 1, "metrics": {"acc": 0.9}}])  # running
            >>> lines.done, lines.stopped, lines.best
            (2, 1, (0.7, 'a'))
        """
        ended = ended_ids(records)
        judged = read_verdicts(records)
        clocks: dict[str, float] = {}
        for r in records:
            trial, metrics = r.get("trial"), r.get("metrics") or {}
            if trial not in ended:
                continue
            if numeric(r.get("epoch")):  # the trial's clock at this judgement
                clocks[trial] = max(clocks.get(trial, 0.0), float(r["epoch"]))
            value = metrics.get(self.objective.metric)
            if numeric(value) and abs(value) < WORST:
                self._consider(value, trial)
        self._kept = ended
        self.done = self._done_before = len(ended)
        self.stopped = sum(self.objective.outcome(clocks.get(t, 0.0), judged.get(t), False)
                           == "stopped" for t in ended)

    def _consider(self, value: Any, trial_id: str) -> None:
        """Take ``value`` as the best if it is a number better than the best so far."""
        if self.best is None or (value > self.best[0] if self.objective.mode == "max"
                                 else value < self.best[0]):
            self.best = (float(value), trial_id)

    @property
    def _out(self) -> TextIO:
        return self.stream or sys.stdout

    def status_bar(self, width: int = 20) -> str:
        """``[####....] 3/8 done, 1 running, 4 pending, 2 stopped | best ... | 0:42, ETA``"""
        elapsed = time.monotonic() - self.start
        filled = int(width * self.done / max(self.total, 1))
        pending = max(self.total - self.done - len(self.running), 0)
        ended_here = self.done - self._done_before  # the ETA is this run's pace
        eta = (f", ETA {_clock(elapsed / ended_here * (self.total - self.done))}"
               if ended_here > 0 else "")
        best = f"{self.best[0]:.4g}" if self.best else "-"
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} done, "
                f"{len(self.running)} running, {pending} pending, {self.stopped} stopped | "
                f"best {best} | {_clock(elapsed)}{eta}{self._budget()}")

    def _line(self, text: str) -> str:
        best = f"best {self.best[0]:.4g} ({self.best[1]})" if self.best else "best -"
        elapsed = time.monotonic() - self.start
        return (f"[{elapsed:5.0f}s] {self.done}/{self.total} done | {text} | {best}"
                f"{self._budget()}")

    def _budget(self) -> str:
        """`` | budget: epochs 12/30`` while the sweep has a budget, else ""."""
        return f" | {self.budget.describe()}" if self.budget is not None and \
            self.budget.limits else ""

    def _say(self, text: str, permanent: bool = True) -> None:
        """A plain line when piped; on a terminal, ``permanent`` lines go above the block."""
        if not getattr(self._out, "isatty", lambda: False)():
            print(self._line(text), file=self._out, flush=True)
            return
        # escape codes: cursor to the start of the block's first line, clear to the screen's end
        out = [f"\x1b[{self._drawn}F\x1b[J" if self._drawn else ""]
        if permanent:
            out.append(self._line(text) + "\n")
        block = [f"  running {tid}: {what}" for tid, what in sorted(self.running.items())]
        block.append("  " + self.status_bar())
        out.append("\n".join(block) + "\n")
        self._drawn = len(block)
        print("".join(out), end="", file=self._out, flush=True)

    def note(self, text: str) -> None:
        """A line about the sweep itself (a node joined or left), printed like a trial's end."""
        self._say(text)

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        """Tune retries a trial whose driver died or raised: say why, and from where."""
        clock = (trial.last_result or {}).get(CLOCK_KEY)
        where = f" (it had reached epoch {clock:g})" if numeric(clock) else ""
        rank = failed_rank(trial)
        on = f" on rank {rank[0]} of {rank[1]}" if rank else ""
        self._say(f"trial {trial.trial_id} failed{on}: {failure_reason(trial)}; retrying it from "
                  f"its last checkpoint{where}, retry {getattr(trial, 'num_failures', '?')} of "
                  f"{getattr(trial, 'max_failures', '?')} (trial.max_retries)")

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running[trial.trial_id] = "starting"
        self._say(f"trial {trial.trial_id} started", permanent=False)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        failure = result.get(FAILURE_KEY)  # the loop raised and was restarted (clock.py)
        if failure and failure != self._restarts.get(trial.trial_id):
            self._restarts[trial.trial_id] = failure
            self._say(f"trial {trial.trial_id} {failure}")
        value, clock = result.get(self.objective.metric), result.get(CLOCK_KEY)
        if not numeric(value):
            return
        self._consider(value, trial.trial_id)
        progress = (f"epoch {f'{clock:g}' if numeric(clock) else '?'}/{self.objective.budget} "
                    f"{self.objective.metric}={value:.4g}")
        if trial.trial_id in self.running:
            self.running[trial.trial_id] = progress
        self._say(f"trial {trial.trial_id} {progress}", permanent=False)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        counted = trial.trial_id in self._kept  # one Tune's saved state had not seen end
        self._kept.discard(trial.trial_id)
        self.done += not counted
        self.running.pop(trial.trial_id, None)
        clock = (trial.last_result or {}).get(CLOCK_KEY, 0)
        verdict = (verdicts(self.sweep_dir).get(trial.trial_id) if self.sweep_dir is not None
                   else None)
        outcome = self.objective.outcome(clock, verdict, False)
        if outcome == "stopped":
            self.stopped += not counted
            how = f"stopped early at epoch {clock:g}"
            if verdict is not None and verdict.budget:
                how = (f"stopped by the budget (sweep.budget.{verdict.budget}) at epoch "
                       f"{clock:g}" if clock else "not started: the budget is spent")
        elif outcome == "error":
            how = f"FAILED: {verdict.error if verdict else 'error'}"
        else:
            how = f"completed ({clock:g} epochs)"
        self._say(f"trial {trial.trial_id} {how}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        counted = trial.trial_id in self._kept
        self._kept.discard(trial.trial_id)
        self.done += not counted
        self.running.pop(trial.trial_id, None)
        where = SweepLayout(Path(self.sweep_dir) if self.sweep_dir
                            else Path(trial.local_path).parent)
        error_file = display(where.error_file(trial.trial_id))
        rank = failed_rank(trial)
        on = f" on rank {rank[0]} of {rank[1]}" if rank else ""
        self._say(f"trial {trial.trial_id} FAILED{on}: {failure_reason(trial)} "
                  f"(see {error_file})")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self._drawn = 0  # leave the final block on the screen
