"""How a running sweep stops early: SIGTERM, Ctrl-C, a refused write, a lost claim.

    interrupt = Interrupt(cfg.sweep.name, grace_s=cfg.sweep.stop_grace_s)
    with interrupt.handling_sigterm():          # run_sweep, around the claimed sweep
        ... interrupt.tune_running = True; tuner.fit() ...

- **SIGTERM** (docs/running.md#one-driver-per-sweep): while Tune runs, what Ctrl-C does
  (``fit`` then raises ``SweepInterrupted``); before or after, ``SweepInterrupted`` where the
  driver is. A second one changes nothing; past ``sweep.stop_grace_s``, ``GraceTimer`` kills
  this driver's own processes (its local Ray), releases the claim and exits 143.
- **A stop** (``stop``: the sweep directory refused a write) does what the first SIGTERM does
  while Tune runs, once.
- **A lost claim** (``lost``: taken over, or not renewed for almost its expiry): it must not
  write again: saves nothing, kills its own processes, exits 4 at once (``hard_exit``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

from sweeps.errors import SweepInterrupted
from sweeps.lease import Lease
from sweeps.lease.holder import stat_fields

__all__ = ["Interrupt", "GraceTimer", "descendants", "hard_exit", "LOST_EXIT", "PREEMPTED"]

LOST_EXIT = 4  # the exit status of a driver that lost its claim
PREEMPTED = "stopped by SIGTERM (Slurm/Kubernetes preemption?)"  # console, MLflow, the claim


@dataclass
class Interrupt:
    """Why and how the sweep stops early (see the module docstring)."""

    sweep: str = "sweep"
    grace_s: float = 20.0
    signum: int = signal.SIGINT  # SIGINT (Ctrl-C) unless a SIGTERM was caught
    reason: str | None = None  # set by ``stop``
    tune_running: bool = False  # set by fit around Tune's run
    lease: Lease | None = None  # the sweep's claim (sweeps.lease), given back on the way out
    stopping: bool = False
    closing: bool = False  # the run is releasing its claim: a SIGTERM only starts the timer
    on_main_thread: bool = False  # set by handling_sigterm: only then may it signal Tune
    grace: GraceTimer | None = field(default=None, repr=False)

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """The SIGTERM handler (installed by ``handling_sigterm``, again after ``ray.init``)."""
        if self.grace is None:  # the first SIGTERM, even after a stop(): a deadline now
            self.signum = signum
            self.grace = GraceTimer(self.grace_s, self)
            self.grace.start()
        if self.stopping or self.closing:
            return
        self.stopping = True
        if self.lease is not None:  # the next start says which driver a signal stopped
            self.lease.me.stopped_by = "SIGTERM"
        with contextlib.suppress(OSError):  # not print(): the main thread may be printing
            os.write(2, f"sweeps: {PREEMPTED}: stopping the trials and saving the sweep's "
                        "state\n".encode())
        if self.tune_running:
            os.kill(os.getpid(), signal.SIGINT)  # Tune's own stop: trials end, state saved
            return
        raise SweepInterrupted(f"sweep {self.sweep} {PREEMPTED} outside its trials' run; run "
                               "the same command again to resume it", signum)

    def stop(self, reason: str) -> None:
        """Stop the sweep as Ctrl-C does, saying ``reason`` (once; from any thread)."""
        if self.stopping:
            return
        self.stopping, self.reason = True, reason
        if self.tune_running and self.on_main_thread:  # else a caller's thread would get it
            os.kill(os.getpid(), signal.SIGINT)

    def lost(self, why: str) -> None:
        """The claim is gone: end this driver now, writing nothing more (``hard_exit``)."""
        hard_exit(LOST_EXIT, f"sweeps: error: {why}; this driver stops now and writes nothing "
                  "more (another driver may run the sweep: see `sweeps status`)")

    @contextlib.contextmanager
    def handling_sigterm(self) -> Iterator[Interrupt]:
        """``on_sigterm`` for SIGTERM while the block runs (main thread only); a grace timer
        still running at the end is cancelled."""
        main = self.on_main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, self.on_sigterm) if main else None
        try:
            yield self
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
            if self.grace is not None:
                self.grace.cancel()

    def reinstall(self) -> None:
        """Take SIGTERM back (``ray.init`` installs a handler of its own)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.on_sigterm)


class GraceTimer:
    """Started by the first SIGTERM; ``cancel`` when the sweep has ended on its own.

    Example:
        >>> timer = GraceTimer(20.0, Interrupt("digits"))
        >>> timer.start(); timer.cancel()   # the sweep ended within its grace
    """

    def __init__(self, grace_s: float, interrupt: Interrupt) -> None:
        self.grace_s, self.interrupt = grace_s, interrupt
        self._timer: threading.Timer | None = None

    def start(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.grace_s, self._expire)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _expire(self) -> None:
        hard_exit(128 + signal.SIGTERM,
                  f"sweeps: the sweep did not end within sweep.stop_grace_s={self.grace_s:g} s "
                  "of SIGTERM: ending it now; its saved state and checkpoints are kept, run "
                  "the same command again to resume it",
                  self.interrupt.lease.release if self.interrupt.lease else None)


def hard_exit(code: int, message: str, release: Callable[[], None] | None = None) -> None:
    """Say ``message``, kill this process's descendants (its local Ray), then ``release``
    (the claim), then exit ``code`` without unwinding (nothing more is written)."""
    with contextlib.suppress(OSError):  # not print(): its lock may be held by a stuck thread
        os.write(2, (message + "\n").encode())
    for _ in range(3):  # again: a process may have been forked meanwhile
        for pid in descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    if release is not None:  # bounded: a hung store must not hold the exit
        releasing = threading.Thread(target=release, daemon=True)
        releasing.start()
        releasing.join(timeout=3)
    os._exit(code)


def descendants(pid: int) -> list[int]:
    """Every process descending from ``pid`` (Linux ``/proc``; [] elsewhere), parents first.

    Example:
        >>> import subprocess
        >>> child = subprocess.Popen(["sleep", "5"])
        >>> child.pid in descendants(os.getpid())
        True
        >>> child.kill(); child.wait()
        -9
    """
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        fields = stat_fields(entry) if entry.isdigit() else None
        if fields and len(fields) > 1 and fields[1].isdigit():
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(parents.get(child, []))
    return found
