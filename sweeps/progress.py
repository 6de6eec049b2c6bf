"""Plain progress lines while a sweep runs (one line per trial event, no escape codes).

    [  42s] 3/8 done | trial a1b2c3d4_00002 epoch 3 val_acc=0.9611 | best 0.9722 (a1b2c3d4_00001)
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ray.tune import Callback

__all__ = ["ProgressLines"]


class ProgressLines(Callback):
    """Tune callback printing one line per reported epoch and per finished trial."""

    def __init__(self, metric: str, mode: str, total: int, max_epochs: int,
                 stream: TextIO | None = None) -> None:
        self.metric, self.mode, self.total, self.max_epochs = metric, mode, total, max_epochs
        self.stream = stream  # None: whatever sys.stdout is when a line is printed
        self.start = time.monotonic()
        self.done = 0
        self.best: tuple[float, str] | None = None

    def _say(self, text: str) -> None:
        best = f"best {self.best[0]:.4g} ({self.best[1]})" if self.best else "best -"
        elapsed = time.monotonic() - self.start
        print(f"[{elapsed:5.0f}s] {self.done}/{self.total} done | {text} | {best}",
              file=self.stream or sys.stdout, flush=True)

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks with the experiment; an open stream cannot be pickled."""
        return {**self.__dict__, "stream": None}

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
        epoch = (trial.last_result or {}).get("epoch", 0)
        how = "completed" if epoch >= self.max_epochs else f"stopped early at epoch {epoch}"
        self._say(f"trial {trial.trial_id} {how}")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.done += 1
        self._say(f"trial {trial.trial_id} FAILED (see {trial.local_path}/error.txt)")
