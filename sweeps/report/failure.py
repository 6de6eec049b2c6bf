"""Why a trial failed, in one line: what the tracking tags and the console lines say.

    failure_reason(trial)     # 'ValueError: loss exploded (lr=0.3)', from Tune's pickled error
    failed_rank(trial)        # (1, 2): rank 1 of 2 raised it (sweeps.trial.backends.rank_error)

A leaf module (only sweeps.protocol's names imported), so the tracking callback and the
progress lines both use it without tying their packages together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sweeps.protocol import RANK_ATTR, WORLD_SIZE_ATTR

__all__ = ["failure_reason", "error_line", "failed_rank", "rank_of", "pickled_error"]


def failure_reason(trial: Any, limit: int = 160) -> str:
    """Why a trial's driver failed, in a few words: its process (or its node) died, or what
    it raised (the cause of a Ray task error), first line only.

    Example:
        >>> from types import SimpleNamespace
        >>> failure_reason(SimpleNamespace(get_pickled_error=lambda: ValueError("nan loss")))
        'ValueError: nan loss'
    """
    try:
        error = pickled_error(trial)
    except Exception:  # the error file is not readable: say nothing wrong
        error = None
    if error is None:
        return "its driver raised or died"
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(error, RayActorError):
        return f"its driver's process or node died ({type(error).__name__})"
    if isinstance(error, RayTaskError) and error.cause is not None:
        error = error.cause
    return error_line(error, limit)


def error_line(error: BaseException, limit: int = 160) -> str:
    """``Type: first line of the message`` of a trial's error (of its cause, for a Ray task
    error): the loop's own exception, whichever rank raised it.

    Example:
        >>> error_line(KeyError("batch"))
        "KeyError: 'batch'"
    """
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text[:limit]}" if text else type(error).__name__


def failed_rank(trial: Any) -> tuple[int, int] | None:
    """(rank, world size) of the rank whose error failed a trial of several ranks, or None
    (one rank, no error, or an error that does not say: ``sweeps.trial.backends.rank_error``).

    Example:
        >>> from types import SimpleNamespace
        >>> error = ValueError("nan loss")
        >>> error.sweeps_rank, error.sweeps_world_size = 1, 2
        >>> failed_rank(SimpleNamespace(get_pickled_error=lambda: error))
        (1, 2)
    """
    try:
        error = pickled_error(trial)
    except Exception:
        return None
    return rank_of(error)


def rank_of(error: Any) -> tuple[int, int] | None:
    """(rank, world size) marked on a trial's error (or its cause), if the world had more
    than one rank."""
    for candidate in (getattr(error, "cause", None), error):
        rank = getattr(candidate, RANK_ATTR, None)
        size = getattr(candidate, WORLD_SIZE_ATTR, None)
        if isinstance(rank, int) and isinstance(size, int) and size > 1:
            return rank, size
    return None


def pickled_error(trial: Any) -> BaseException | None:
    """The trial's last error: Tune pickles it into the trial's local directory first
    (``Trial.pickled_error_file``) and copies it to the sweep directory, where
    ``get_pickled_error`` reads it, only at its next sync, after ``on_trial_recover``."""
    local = getattr(trial, "pickled_error_file", None)
    if local and Path(local).is_file():
        import cloudpickle

        return cloudpickle.loads(Path(local).read_bytes())
    return trial.get_pickled_error()
