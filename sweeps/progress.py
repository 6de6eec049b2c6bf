"""Live progress of a sweep: one plain line per event, plus a status bar on a terminal.

    [  42s] 3/8 done | trial a1b2c3d4 epoch 3/9 val_acc=0.9611 | best 0.9722 (a1b2c3d4)
    [########............]  3/8 done, 1 running, 4 pending, 2 stopped | best 0.9722 | 0:42, ETA 1:10

The status bar is drawn (and redrawn in place) only when the output is a terminal; piped or
logged output gets the plain lines alone, without escape codes.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ray.tune import Callback

__all__ = ["ProgressLines"]

CLEAR_LINE = "\r\x1b[K"


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


class ProgressLines(Callback):
    """Tune callback printing trial events, with a progress bar when writing to a terminal."""

    def __init__(self, metric: str, mode: str, total: int, max_epochs: int,
                 stream: TextIO | None = None) -> None:
        self.metric, self.mode, self.total, self.max_epochs = metric, mode, total, max_epochs
        self.stream = stream  # None: whatever sys.stdout is when a line is printed
        self.start = time.monotonic()
        self.done = self.stopped = 0
        self.running: set[str] = set()
        self.best: tuple[float, str] | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks with the experiment; an open stream cannot be pickled."""
        return {**self.__dict__, "stream": None}

    @property
    def _out(self) -> TextIO:
        return self.stream or sys.stdout

    def _is_tty(self) -> bool:
        return bool(getattr(self._out, "isatty", lambda: False)())

    def status_bar(self, width: int = 20) -> str:
        """``[####....] 3/8 done, 1 running, 4 pending, 2 stopped | best ... | 0:42, ETA``"""
        elapsed = time.monotonic() - self.start
        filled = int(width * self.done / max(self.total, 1))
        pending = max(self.total - self.done - len(self.running), 0)
        eta = (f", ETA {_clock(elapsed / self.done * (self.total - self.done))}"
               if self.done else "")
        best = f"{self.best[0]:.4g}" if self.best else "-"
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} done, "
                f"{len(self.running)} running, {pending} pending, {self.stopped} stopped | "
                f"best {best} | {_clock(elapsed)}{eta}")

    def _say(self, text: str) -> None:
        best = f"best {self.best[0]:.4g} ({self.best[1]})" if self.best else "best -"
        elapsed = time.monotonic() - self.start
        line = f"[{elapsed:5.0f}s] {self.done}/{self.total} done | {text} | {best}"
        if self._is_tty():
            print(f"{CLEAR_LINE}{line}\n{self.status_bar()}", end="", file=self._out,
                  flush=True)
        else:
            print(line, file=self._out, flush=True)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running.add(trial.trial_id)
        self._say(f"trial {trial.trial_id} started")

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        value = result.get(self.metric)
        if value is None:
            return
        better = self.best is None or (value > self.best[0] if self.mode == "max"
                                       else value < self.best[0])
        if better:
            self.best = (float(value), trial.trial_id)
        self._say(f"trial {trial.trial_id} epoch {result.get('epoch', '?')}"
                  f"/{self.max_epochs} {self.metric}={value:.4g}")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.done += 1
        self.running.discard(trial.trial_id)
        epoch = (trial.last_result or {}).get("epoch", 0)
        if epoch >= self.max_epochs:
            how = "completed"
        else:
            self.stopped += 1
            how = f"stopped early at epoch {epoch}"
        self._say(f"trial {trial.trial_id} {how}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.done += 1
        self.running.discard(trial.trial_id)
        self._say(f"trial {trial.trial_id} FAILED (see {trial.local_path}/error.txt)")

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        if self._is_tty():
            print(file=self._out, flush=True)  # leave the final status bar on its own line
