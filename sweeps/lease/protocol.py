"""One driver per sweep directory: take the claim, keep it alive, give it back.

    with hold(sweep_dir, this_driver(name, 5, 45), on_lost=stop_sweep) as lease:
        print(lease.taken_over)       # "taking over the sweep from host h1, pid 42, ..." or None
        ...                           # the sweep runs; a heartbeat renews the claim

``acquire`` walks the generations from the newest: a live claim refuses with ``SweepBusy``;
a free one (``sweeps.lease.holder.judge``) is superseded by creating the next generation, which
exactly one racer wins (``sweeps.storage.claims``); the loser is refused like any second driver.

While held, a thread rewrites the claim every ``heartbeat_s``, first looking for a newer
generation (another driver took over): then, or when heartbeats keep failing until near the
expiry, ``on_lost`` is called once. On exit the claim is marked released. What a lease cannot
guarantee: docs/running.md#one-driver-per-sweep.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from sweeps.errors import SweepBusy
from sweeps.lease.holder import (
    ClaimVerdict,
    Holder,
    describe,
    expiry_of,
    judge,
    read_holder,
    same_host,
    who,
)
from sweeps.storage.claims import ClaimStore

__all__ = ["Lease", "acquire", "hold", "inspect", "takeover_line", "busy_error"]

log = logging.getLogger(__name__)
RACE_TRIES = 8
Found = tuple[int, Holder | None, "ClaimVerdict | None"]  # (newest generation, holder, verdict)


@dataclass
class Claim:
    """What ``acquire`` found before it took the sweep."""

    gen: int
    previous: Holder | None
    verdict: ClaimVerdict | None  # how the previous claim was judged (None: never claimed)


def inspect(store: ClaimStore, here: Holder, tries: int = 3) -> Found:
    """(newest generation, its holder, its verdict): the claim as ``here`` would judge it."""
    gen = store.latest()
    if gen == 0:
        return 0, None, None
    raw = store.read(gen)
    if raw is not None and not raw.strip():  # being written right now (a racer's create)
        time.sleep(0.2)
        raw = store.read(gen)
    holder = read_holder(raw)
    try:
        age = store.age(gen)
    except FileNotFoundError:  # withdrawn just now by a driver that refused to run
        if tries > 0:
            return inspect(store, here, tries - 1)
        return gen, None, ClaimVerdict(True, "unreadable-live", 0.0)  # never judged free
    return gen, holder, judge(holder, age, here)


def acquire(store: ClaimStore, me: Holder) -> Claim:
    """Take the sweep for ``me``, or raise ``SweepBusy``.

    Example:
        >>> import tempfile
        >>> from sweeps.lease import claim_store, this_driver
        >>> store = claim_store(tempfile.mkdtemp())
        >>> acquire(store, this_driver("digits", 5, 45)).gen
        1
        >>> acquire(store, this_driver("digits", 5, 45))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        sweeps.errors.SweepBusy: sweep.dir ... is held by a running driver (host ..., pid ...
    """
    gen, holder, verdict = _wait_out_silence(store, me, inspect(store, me))
    for _ in range(RACE_TRIES):
        if verdict is not None and verdict.live:
            raise busy_error(store, holder, verdict, me.expiry_s)
        if store.create(gen + 1, me.to_bytes()):
            return Claim(gen + 1, holder, verdict)
        if store.latest() > gen:  # another driver won this generation: judge its claim next
            gen, holder, verdict = inspect(store, me)
        else:  # no racer has won yet (object stores): the lowest bid may still be settling
            time.sleep(store.settle_s + random.uniform(0.2, 1.5))
    raise SweepBusy(f"could not take {store.where()}: other drivers kept starting at the same "
                    "time; run the command again")


def _wait_out_silence(store: ClaimStore, me: Holder, found: Found) -> Found:
    """A live claim whose holder missed two heartbeats (a driver killed on another host: a
    Kubernetes retry's new cluster, a Slurm job requeued onto other nodes) is waited on until
    it expires, instead of refused; one that beats again meanwhile is live, and refused."""
    gen, holder, verdict = found
    if verdict is None or verdict.kind != "live" or holder is None or same_host(holder, me):
        return found  # on this host a live claim's process runs (stopped, say): refused
    beat = holder.heartbeat_s if isinstance(holder.heartbeat_s, int | float) and \
        0 < holder.heartbeat_s < verdict.silent_s else None
    if beat is None or verdict.silent_s <= 2 * beat + 1:
        return found
    log.warning("the claim on %s (%s) has been silent for %.0f s: waiting for it to expire "
                "(the lease_expiry_s it promised) before taking the sweep over", store.where(),
                describe(holder), verdict.silent_s)
    expiry = expiry_of(holder, me)
    deadline = time.monotonic() + max(expiry - verdict.silent_s, 0) + 2 * beat + 5
    while verdict is not None and verdict.kind == "live" and time.monotonic() < deadline:
        silent = verdict.silent_s
        time.sleep(min(beat, 1.0))
        gen, holder, verdict = found = inspect(store, me)
        if verdict is not None and verdict.live and verdict.silent_s < silent:
            break  # written again: its driver is alive
    return found


def busy_error(store: ClaimStore, holder: Holder | None, verdict: ClaimVerdict,
               expiry_s: float) -> SweepBusy:
    """The one line a second driver is refused with."""
    where = store.where().removesuffix("/state/claims")
    if holder is None:
        return SweepBusy(
            f"sweep.dir {where} holds a claim file that cannot be read, written "
            f"{verdict.silent_s:.0f} s ago: another driver may be starting; if none runs, the "
            f"same command takes the sweep over once it is {expiry_s:.0f} s old "
            f"(sweep.lease_expiry_s); see `sweeps status {where}`")
    return SweepBusy(
        f"sweep.dir {where} is held by a running driver ({describe(holder)}; last heartbeat "
        f"{verdict.silent_s:.0f} s ago): wait for it to end, give this sweep another name "
        f"(sweep.name=NEW), or see `sweeps status {where}`")


def takeover_line(claim: Claim) -> str | None:
    """What the driver says when it took the sweep from another, or continues one a signal
    stopped (a preemption: Slurm's or Kubernetes' SIGTERM); None: nothing to say."""
    verdict, holder = claim.verdict, claim.previous
    if verdict is None or (verdict.kind == "released" and not holder.stopped_by):
        return None
    if verdict.kind == "released":
        return (f"continuing the sweep from {who(holder)}, which {holder.stopped_by} stopped "
                f"{verdict.silent_s:.0f} s ago (Slurm/Kubernetes preemption?)")
    if verdict.kind == "dead":
        return f"taking over the sweep from {who(holder)}: that process is gone"
    if verdict.kind == "expired":
        return f"taking over the sweep from {who(holder)}, silent for {verdict.silent_s:.0f} s"
    return (f"taking over the sweep: its claim file could not be read and was last written "
            f"{verdict.silent_s:.0f} s ago")


class Lease:
    """A held claim: its heartbeat thread and its release."""

    def __init__(self, store: ClaimStore, claim: Claim, me: Holder,
                 on_lost: Callable[[str], None]) -> None:
        self.store, self.claim, self.me = store, claim, replace(me)
        self.on_lost = on_lost
        self.lost: str | None = None
        self._stop = threading.Event()
        self._writing = threading.Lock()  # a heartbeat's write, never after a release
        self._thread = threading.Thread(target=self._beat, name="sweeps-lease", daemon=True)

    @property
    def gen(self) -> int:
        return self.claim.gen

    @property
    def taken_over(self) -> str | None:
        return takeover_line(self.claim)

    def start(self) -> Lease:
        self._thread.start()
        return self

    def _beat(self) -> None:
        last_ok = time.monotonic()
        while not self._stop.wait(self.me.heartbeat_s):
            try:
                if self.store.exists(self.gen + 1):
                    newer = read_holder(self.store.read(self.gen + 1))
                    self._lose(f"another driver ({describe(newer)}) took the sweep over: this "
                               f"one was silent longer than its expiry "
                               f"({self.me.expiry_s:.0f} s)")
                    return
                with self._writing:
                    if self._stop.is_set():  # released or withdrawn meanwhile
                        return
                    self.me.beats += 1
                    self.store.rewrite(self.gen, self.me.to_bytes())
                last_ok = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - a heartbeat must not die silently
                silent = time.monotonic() - last_ok
                log.warning("could not renew the claim on %s (%s); silent %.0f s",
                            self.store.where(), exc, silent)
                if silent > self.me.expiry_s - self.me.heartbeat_s:  # before others may
                    self._lose(f"could not renew the claim on {self.store.where()} for "
                               f"{silent:.0f} s ({exc})")
                    return

    def _lose(self, why: str) -> None:
        if self._stop.is_set():  # released meanwhile: the sweep has ended
            return
        self.lost = why
        self.on_lost(why)

    def withdraw(self) -> None:
        """Stop the heartbeat and take the claim back out, as if never made: for a sweep this
        driver refused to run before anything ran, so the claim before it (a driver a SIGTERM
        stopped, say) is what the next start reads (nobody else could have seen this one
        free, so its generation may be created again)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.lost = "withdrawn"
        try:
            with self._writing:
                self.store.withdraw(self.gen)
        except Exception as exc:  # noqa: BLE001 - then it reads as released by a dead driver
            log.warning("could not remove the claim on %s: %s", self.store.where(), exc)

    def release(self) -> None:
        """Stop the heartbeat and mark the claim released (unless another driver holds it)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self.lost is not None:
            return
        self.me.released = True
        try:
            with self._writing:
                if not self.store.exists(self.gen + 1):
                    self.store.rewrite(self.gen, self.me.to_bytes())
        except Exception as exc:  # noqa: BLE001 - then the next driver waits for pid or expiry
            log.warning("could not release the claim on %s: %s", self.store.where(), exc)


@contextlib.contextmanager
def hold(store: ClaimStore, me: Holder,
         on_lost: Callable[[str], None] = lambda why: None) -> Iterator[Lease]:
    """The claim on ``store``'s sweep directory for the block (``SweepBusy`` if held).

    Example:
        >>> import tempfile
        >>> from sweeps.lease import claim_store, read_holder, this_driver
        >>> store = claim_store(tempfile.mkdtemp())
        >>> with hold(store, this_driver("digits", 5, 45)) as lease:
        ...     lease.gen, read_holder(store.read(1)).released
        (1, False)
        >>> read_holder(store.read(1)).released
        True
    """
    lease = Lease(store, acquire(store, me), me, on_lost).start()
    try:
        yield lease
    finally:
        lease.release()
