"""The deadline a SIGTERM sets: the sweep ends within ``sweep.stop_grace_s``, whatever it does.

    kill -TERM <driver pid>     # Kubernetes and Slurm send this, then SIGKILL after their grace

SIGTERM stops the sweep as Ctrl-C does (``sweeps.execution.ray_session``): Tune stops the
trials, saves its state, and the driver exits 143 with the claim released. Should that take
longer than ``sweep.stop_grace_s`` (a trial stuck in a collective, Ray slow to shut down), this
timer ends it: it says so, releases the claim, kills the Ray processes this driver started (a
joined cluster's are not its own) and exits 143. Nothing is lost that a ``kill -9`` would keep:
Tune's last saved state and every reported checkpoint stay, and the same command resumes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any

__all__ = ["GraceTimer", "descendants"]


class GraceTimer:
    """Started by the first SIGTERM; ``cancel`` when the sweep has ended on its own."""

    def __init__(self, grace_s: float, interrupt: Any) -> None:
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
        print(f"sweeps: the sweep did not end within sweep.stop_grace_s={self.grace_s:g} s of "
              "SIGTERM: ending it now; its saved state and checkpoints are kept, run the same "
              "command again to resume it", file=sys.stderr, flush=True)
        if self.interrupt.release is not None:
            with contextlib.suppress(Exception):
                self.interrupt.release()
        for pid in descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        os._exit(128 + signal.SIGTERM)


def descendants(pid: int) -> list[int]:
    """Every process descending from ``pid`` (Linux ``/proc``; [] elsewhere), children first.

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
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(parents.get(pid, []))
    while todo:
        child = todo.pop(0)
        found.append(child)
        todo.extend(parents.get(child, []))
    return found
