"""Why a trial failed, in one line: what the tracking tags and the console lines say.

    failure_reason(trial)     # 'ValueError: loss exploded (lr=0.3)', from Tune's pickled error

A leaf module (nothing of sweeps imported), so the tracking callback and the progress lines
both use it without tying their packages together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["failure_reason"]


def failure_reason(trial: Any, limit: int = 160) -> str:
    """Why a trial's driver failed, in a few words: its process (or its node) died, or what
    it raised (the cause of a Ray task error), first line only.

    Example:
        >>> from types import SimpleNamespace
        >>> failure_reason(SimpleNamespace(get_pickled_error=lambda: ValueError("nan loss")))
        'ValueError: nan loss'
    """
    try:
        error = _pickled_error(trial)
    except Exception:  # the error file is not readable: say nothing wrong
        error = None
    if error is None:
        return "its driver raised or died"
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(error, RayActorError):
        return f"its driver's process or node died ({type(error).__name__})"
    if isinstance(error, RayTaskError) and error.cause is not None:
        error = error.cause
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text[:limit]}" if text else type(error).__name__


def _pickled_error(trial: Any) -> BaseException | None:
    """The trial's last error: Tune pickles it into the trial's local directory first
    (``Trial.pickled_error_file``) and copies it to the sweep directory, where
    ``get_pickled_error`` reads it, only at its next sync, after ``on_trial_recover``."""
    local = getattr(trial, "pickled_error_file", None)
    if local and Path(local).is_file():
        import cloudpickle

        return cloudpickle.loads(Path(local).read_bytes())
    return trial.get_pickled_error()
