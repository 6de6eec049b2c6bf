"""The thread that applies a sweep's journaled tracking records to MLflow, in order.

    writer = TrackingWriter(journal, lambda: MLflowSink(...))   # in the sweep driver
    writer.notify()                  # a record was appended
    writer.flush(timeout_s=60)       # at the sweep's end: records still unsent

While the store does not answer, records wait in the journal and the thread retries with a
bounded backoff (0.5 s doubling to 10 s); a record the server refuses for good is skipped with
a warning. A store that can never be opened as it is (``StoreUnusable``) stops the retries: its
records wait in the journal for the next start. ``why`` and ``fix`` say what holds them.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

from sweeps.storage.journal import Journal
from sweeps.tracking.masking import mask_text
from sweeps.tracking.sqlite_store import StoreUnusable

__all__ = ["TrackingWriter", "TransientTrackingError", "is_transient"]

log = logging.getLogger(__name__)
FIX = "it answers"


def _said(exc: Exception) -> str:
    """An MLflow error's first line for the log, with credentials masked: its "API request to
    <url>" quotes the store's URI as given, user and password included."""
    return mask_text((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])


def is_transient(exc: Exception) -> bool:
    """Connection-level failures (server down, timeout, 5xx) are worth retrying."""
    from mlflow.exceptions import MlflowException

    if isinstance(exc, FileNotFoundError | PermissionError | IsADirectoryError
                  | NotADirectoryError):
        return False  # a local file: waiting will not bring it back
    if isinstance(exc, OSError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, MlflowException):  # its default error_code is INTERNAL_ERROR: no signal
        return (getattr(exc, "error_code", "") == "TEMPORARILY_UNAVAILABLE"
                or re.search(r"failed with exception|failed with error code 5\d\d|Max retries"
                             r"|Connection(Error| refused| reset| aborted)|timed out", str(exc))
                is not None)
    name = type(exc).__name__
    return "Connection" in name or "Timeout" in name


class TransientTrackingError(RuntimeError):
    """The tracking server did not answer; the record is retried later."""


class TrackingWriter:
    """Background thread that applies pending journal records, retrying while unreachable."""

    def __init__(self, journal: Journal, sink: Any, max_backoff_s: float = 10.0) -> None:
        """``sink``: the sink, or a function that makes it (called in the writer thread, so
        importing MLflow and opening its store overlap with the sweep's start)."""
        self.journal, self.max_backoff_s = journal, max_backoff_s
        self._sink, self._make_sink = (None, sink) if callable(sink) else (self._adopt(sink), None)
        self._wake, self._stop, self._idle = (threading.Event() for _ in range(3))
        self.failures = 0
        self.why, self.fix = "", ""  # what holds the records back (empty: nothing), its fix
        self.unusable = False  # the store cannot be used as it is: no more retries
        self._thread = threading.Thread(target=self._loop, name="sweeps-mlflow", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        self._idle.clear()
        self._wake.set()

    def _loop(self) -> None:
        backoff = 0.5
        while not self._stop.is_set() and not self.unusable:
            self._wake.clear()
            if self._drain():
                backoff = 0.5
                self._idle.set()
                self._wake.wait(1.0)
            else:  # unreachable: wait, then try the same record again
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)

    @property
    def sink(self) -> Any:
        if self._sink is None:
            self._sink = self._adopt(self._make_sink())
        return self._sink

    def _adopt(self, sink: Any) -> Any:
        """A store made just now (``sweeps.tracking.sqlite_store``) gets the whole journal."""
        if getattr(sink, "fresh", False) and self.journal.applied():
            self.journal.mark_applied(0)
        return sink

    def _drain(self) -> bool:
        try:
            self.sink  # noqa: B018 (built on first use, in this thread)
        except StoreUnusable as exc:  # waiting will not help: say what will, once
            self.why, self.fix, self.unusable = exc.why, exc.fix, True
            log.error("MLflow: %s; records wait in %s until %s", exc.why, self.journal.path,
                      exc.fix)
            self._idle.set()
            return False
        except Exception as exc:  # store unreachable or broken: retry with the backoff
            self.failures += 1
            self.why, self.fix = f"the store is not usable yet ({_said(exc)})", FIX
            if self.failures == 1 or self.failures % 10 == 0:
                log.warning("MLflow store not usable yet (%s); training goes on, records wait "
                            "in %s", _said(exc), self.journal.path)
            return False
        try:
            pending = self.journal.pending()
        except Exception as exc:  # the journal's object store did not answer: try again later
            self.failures += 1
            log.warning("tracking journal unreadable (%s); retrying", str(exc)[:200])
            return False
        for index, record in pending:
            try:
                self.sink.apply(record)
            except TransientTrackingError as exc:
                self.failures += 1
                self.why, self.fix = f"MLflow does not answer ({_said(exc)})", FIX
                if self.failures == 1 or self.failures % 10 == 0:
                    log.warning("MLflow unreachable (%s); training goes on, %d record(s) wait "
                                "in %s", _said(exc), len(self.journal.pending()), self.journal.path)
                return False
            except Exception as exc:  # the server refused this record for good: say so, go on
                log.warning("MLflow rejected a %s record (%s); skipped", record.get("op"),
                            _said(exc))
            try:
                self.journal.mark_applied(index + 1)
            except Exception as exc:  # the object store did not answer: the record is
                self.failures += 1  # applied again later, which MLflow deduplicates
                log.warning("tracking journal not updated (%s); retrying", str(exc)[:200])
                return False
        self.why = self.fix = ""
        return True

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` for every record to be applied; return how many are left."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self.unusable:
            if not self.journal.pending():
                return 0
            self.notify()  # clears idle; the writer sets it after its next drain
            self._idle.wait(min(0.2, max(0.0, deadline - time.monotonic())))
        return len(self.journal.pending())

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=30)
