"""Errors raised for bad user input, before any Ray resource is taken.

    python -m sweeps +experiment=digits scheduler.max_t=0
    # ConfigError: scheduler.max_t: 0 must be >= 1; set scheduler.max_t=10 (epochs per trial)

Every message names the key, the value, the rule, and how to fix it (Optuna's style). These
subclass ``ValueError`` so callers that already catch it keep working.
"""

from __future__ import annotations

__all__ = ["ConfigError", "SearchSpaceError", "ClusterFitError", "SweepError", "StateError",
           "SweepInterrupted", "RayIncompatible", "SweepBusy", "StorageFull"]


class SweepError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(SweepError, ValueError):
    """A config key has a value the sweep cannot run with."""

    def __init__(self, key: str, value: object, rule: str, fix: str) -> None:
        self.key, self.value, self.rule, self.fix = key, value, rule, fix
        super().__init__(f"{key}: {value!r} {rule}; {fix}")


class SearchSpaceError(ConfigError):
    """A ``search_space`` entry does not parse or describes an empty/invalid range."""


class ClusterFitError(ConfigError):
    """One trial needs more resources than the whole cluster has."""


class StateError(SweepError):
    """The sweep directory's state cannot be used (corrupted, or from another version)."""


class SweepBusy(SweepError):
    """Another driver holds the sweep directory (``sweeps.lease``): nothing was started or
    written; exit status 2 like any refusal before Ray starts."""


class StorageFull(SweepError):
    """The sweep directory refused a write: full (ENOSPC), over quota (EDQUOT), read-only
    (EROFS) or not writable (EACCES); the sweep stopped with its state up to the failed write
    kept, and the same command resumes it once the write can succeed. Exit status 3."""

    exit_code = 3


class RayIncompatible(SweepError):
    """This Ray lacks (or changed) an internal that sweeps relies on (``sweeps._ray.compat``)."""


class SweepInterrupted(SweepError):
    """Ctrl-C or SIGTERM stopped the sweep; its state is saved and the same command resumes."""

    interrupted = True  # MLflow marks the sweep's open runs KILLED, not FAILED

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signum
