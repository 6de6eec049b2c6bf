"""The failing rank's own error, raised by a trial whose run of several ranks failed.

    raise from_train_run(error, world_size=2) from None   # trial_driver: a Train run's error
    raise attempt_error(exc, failed, peer_error, ...)     # inline: rank 0's or a peer's

When one rank of a run raises, the others fail too, later and of something else (gloo's
"Connection closed by peer", a timeout, the attempt's abort); what the user sees is the first
rank's own exception (docs/backends.md#trial-backends-inline-or-a-ray-train-run). The exception
raised is the loop's own object, type and args unchanged, with its traceback and rank in notes;
``sweeps_rank``/``sweeps_world_size`` on it (``sweeps.protocol.RANK_ATTR``) name the rank for
``sweeps.report.failure``.
"""

from __future__ import annotations

import contextlib
import copy
import pickle
import re
from dataclasses import dataclass
from typing import Any

from sweeps.protocol import RANK_ATTR, WORLD_SIZE_ATTR
from sweeps.trial.backends.rendezvous import PeerFailed, TrialStopped

__all__ = ["PeerError", "own_error", "from_train_run", "attempt_error", "peer_failure",
           "first_reason", "is_consequence", "first_line"]

# What a rank reads when another rank of its run failed (a symptom, never the cause): gloo's and
# NCCL's closed, reset or aborted connections, and the inline executor's own "another rank failed"
# (PeerFailed, TrialStopped). A timeout is not among them: a rank's own collective can time out.
_SYMPTOMS = ("Connection closed by peer", "Connection reset by peer", "Broken pipe",
             "NCCL communicator was aborted")
_SNIPPET = re.compile(r"^\[Rank ([\d, ]+) Error Snippet\]:", re.MULTILINE)


@dataclass(frozen=True)
class PeerError:
    """What a peer of an inline trial raised: its own exception object and its traceback
    (``sweeps.trial.backends.peers`` keeps one per failed rank of an attempt)."""

    rank: int
    error: BaseException
    traceback: str


def first_line(error: BaseException) -> str:
    """``Type: first line of the message`` (the type alone when there is no message)."""
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def is_consequence(error: BaseException) -> bool:
    """Whether ``error`` is what a rank reads when another rank failed (not its own fault)."""
    if isinstance(error, (PeerFailed, TrialStopped)):
        return True
    return type(error).__name__ == "DistBackendError" or any(s in str(error) for s in _SYMPTOMS)


def own_error(cause: BaseException, rank: int, world_size: int, traceback_text: str = "",
              consequences: list[str] | None = None,
              also: list[int] | None = None) -> BaseException:
    """``cause`` (the loop's exception on ``rank``) marked with its rank, its traceback on that
    rank, the ranks that raised the same (``also``) and the other ranks' symptoms, as notes
    printed after its message (once: an error marked already is returned as it is)."""
    if getattr(cause, RANK_ATTR, None) is not None:
        return cause
    with contextlib.suppress(AttributeError):  # a type with __slots__: the notes still say it
        setattr(cause, RANK_ATTR, rank)
        setattr(cause, WORLD_SIZE_ATTR, world_size)
    if world_size > 1:
        cause.add_note(f"(raised by rank {rank} of {world_size})")
    if also:
        cause.add_note(f"(rank {', '.join(map(str, also))} raised the same)")
    for text in consequences or []:
        cause.add_note(f"then, as a consequence: {text}")
    if traceback_text.strip():  # last: what the console shows of a failure is the text's end
        whose = f"rank {rank}'s" if world_size > 1 else "its"
        cause.add_note(f"{whose} traceback:\n{traceback_text.rstrip()}")
    return cause


def from_train_run(error: BaseException, world_size: int) -> BaseException:
    """The error to raise for a failed Ray Train run: the own error of the lowest rank whose
    failure is not a symptom of another's (Train keeps each failed rank's exception in its
    ``WorkerGroupError``), with the other ranks' after it; ``error`` itself when it holds none
    (a controller error), or when that rank's exception would not carry the marks through
    Tune (not an ``Exception``, such as a ``SystemExit`` Tune would read as a clean end, or a
    type with its own ``__reduce__``, such as a dead worker's, which drops notes on copy)."""
    failures: dict[int, Any] = dict(getattr(error, "worker_failures", None) or {})
    if not failures:
        return error
    ranks = sorted(failures)
    rank = ([r for r in ranks if not is_consequence(failures[r])] or ranks)[0]
    cause = failures[rank]
    if not isinstance(cause, Exception) or not _carries_marks(cause):
        return error
    line = first_line(cause)
    same = [r for r in ranks if r != rank and first_line(failures[r]) == line]
    others = [f"rank {r}: {first_line(failures[r])}" for r in ranks if r != rank and r not in same]
    return own_error(cause, rank, world_size, _snippet(str(error), rank), others, same)


def _carries_marks(error: BaseException) -> bool:
    """Whether a rank and notes set on ``error`` survive the copy and the pickling Tune puts a
    trial's error through (a type with its own ``__reduce__`` may drop them)."""
    try:
        probe = copy.copy(error)
        setattr(probe, RANK_ATTR, -1)
        probe.__notes__ = ["probe"]
        for again in (copy.copy(probe), pickle.loads(pickle.dumps(probe))):
            if getattr(again, RANK_ATTR, None) != -1 or again.__notes__ != ["probe"]:
                return False
    except Exception:
        return False
    return True


def _snippet(text: str, rank: int) -> str:
    """Rank ``rank``'s traceback in Train's ``WorkerGroupError`` message, with Ray's own
    "[Rank N Error Snippet]:" header (ranks with the same traceback share one: "[Rank 0,1
    Error Snippet]:"), or ""."""
    blocks = list(_SNIPPET.finditer(text))
    for index, block in enumerate(blocks):
        if str(rank) in [r.strip() for r in block.group(1).split(",")]:
            end = blocks[index + 1].start() if index + 1 < len(blocks) else len(text)
            return text[block.start():end].strip("\n")
    return ""


def first_reason(meet: Any) -> str | None:
    """The first reason any rank gave for ending an inline attempt (its ``Rendezvous``'s abort
    key; None: unreadable)."""
    try:
        return meet.aborted()
    except Exception:
        return None


def attempt_error(exc: Exception, failed: tuple[int, str] | None, peer: PeerError | None,
                  world_size: int, first: str | None) -> BaseException:
    """What a failed inline attempt raises in rank 0: the first failing rank's own exception,
    marked with its rank, the other ranks' symptoms in its notes. Rank 0's own (``exc``)
    unless a peer failed (``failed``: its rank and a sentence; ``peer``: what it raised, None
    if its process died) and rank 0's error is only a symptom of it (a closed connection, the
    abort the peer caused), or the peer ended the attempt first (``first``, the attempt's
    first abort reason) with an error of its own."""
    if failed is None or (not is_consequence(exc) and (
            first is None or first.startswith("rank 0 ")
            or (peer is not None and is_consequence(peer.error)))):
        return own_error(exc, 0, world_size)
    symptoms = [] if isinstance(exc, PeerFailed) else [f"rank 0: {first_line(exc)}"]
    return peer_failure(failed, peer, world_size, symptoms)


def peer_failure(failed: tuple[int, str], peer: PeerError | None, world_size: int,
                 symptoms: list[str] | None = None) -> BaseException:
    """A failed peer's own exception, marked (``failed``: its rank and a sentence); a
    ``PeerFailed`` with that sentence when it has none to raise (its process died, or its loop
    exited: a ``SystemExit`` would read as a clean end)."""
    if peer is None or not isinstance(peer.error, Exception):
        return own_error(PeerFailed(failed[1]), failed[0], world_size, "", symptoms)
    return own_error(peer.error, peer.rank, world_size, peer.traceback, symptoms)
