"""The sweep stops at the first write its directory refuses (disk full, quota, read-only).

    watch = StorageWatch(sweep_dir, interrupt)     # one of fit()'s Tune callbacks
    ...; watch.refused                             # the StorageFull to raise, or None

A trial that failed because the sweep directory refused a write (``sweeps.storage.full``) is
not retried and no other trial starts: the sweep stops as Ctrl-C stops it and ``fit`` raises
``StorageFull`` (what the user sees: docs/running.md#one-driver-per-sweep). A refused write is
never recorded as the trial's failure (Tune resumes errored trials, ``resume_errored=True``). The
driver's own refused writes reach ``run_sweep`` as exceptions and become the same ``StorageFull``.
"""

from __future__ import annotations

from typing import Any

from ray.tune import Callback

from sweeps.errors import StorageFull
from sweeps.report.failure import pickled_error
from sweeps.storage.full import storage_refusal
from sweeps.storage.location import display

__all__ = ["StorageWatch"]


class StorageWatch(Callback):
    """Stops the sweep (``interrupt.stop``) at a trial error that is a storage refusal."""

    def __init__(self, sweep_dir: Any, interrupt: Any) -> None:
        self.sweep_dir, self.interrupt = sweep_dir, interrupt
        self.refused: StorageFull | None = None

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles its callbacks (tuner.pkl)
        return {"sweep_dir": self.sweep_dir, "interrupt": None, "refused": None}

    def _check(self, trial: Any) -> None:
        if self.refused is not None:
            return
        try:
            error = pickled_error(trial)
        except Exception:  # noqa: BLE001 - an unreadable error is not a storage refusal
            return
        found = storage_refusal(error, within=self.sweep_dir)
        if found is None:
            return
        self.refused = StorageFull(f"trial {trial.trial_id} {found.line(display(self.sweep_dir))}")
        if self.interrupt is not None:
            self.interrupt.stop(f"stopped: trial {trial.trial_id} could not write to the sweep "
                                f"directory ({found.name})")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._check(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._check(trial)
