"""Who holds a sweep directory, and whether that claim still stands.

    me = this_driver("digits", heartbeat_s=5, expiry_s=45)
    verdict = judge(read_holder(raw_bytes), age_s=12.0, here=me)
    verdict.live, verdict.reason          # (True, 'host h1, pid 4242, since 13:02:11, ...')

A claim file holds one JSON object: the driver's host (name and boot id), pid and that
process's start time (so a reused pid is not mistaken for the holder), when it started, the
sweep's name, the heartbeat interval and the expiry it promised, how many heartbeats it wrote,
and whether it released the claim. ``judge`` is the whole rule, pure and table-tested (as users
see it: docs/running.md#one-driver-per-sweep): released; same host (name, boot id, pid
namespace) and the process gone or its pid reused: "provably dead"; silent past the holder's
own expiry on the storage's clock (``age_s``, ``sweeps.storage.claims``); unreadable and older
than the default expiry (younger: a live claim of unknown holder, never a crash); else live.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields

__all__ = ["remember_command", "stat_fields", "Holder", "ClaimVerdict", "this_driver",
           "read_holder", "judge", "pid_alive", "process_start", "boot_id", "describe",
           "scheduler_job", "same_host", "expiry_of", "who"]


_command: list[str] = []


def remember_command(argv: list[str]) -> None:
    """The command line as the user typed it (before ``python -m sweeps`` rewrites it)."""
    _command[:] = argv


@dataclass
class Holder:
    """What a claim file says about the driver that wrote it."""

    host: str
    pid: int
    boot_id: str = ""
    pid_ns: str = ""  # the pid namespace (containers sharing a host name and boot id differ)
    pid_started: int | None = None  # the process's start time, in clock ticks since boot
    started: float = 0.0  # wall clock of the claiming host (shown to people, never compared)
    sweep: str = ""
    heartbeat_s: float = 5.0
    expiry_s: float = 45.0
    beats: int = 0
    released: bool = False
    command: str = ""
    job: str = ""  # the batch job the driver ran in ("Slurm job 12, start 2"; scheduler_job)
    stopped_by: str = ""  # "SIGTERM" when a signal stopped it (a preemption's notice)

    def to_bytes(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode()


@dataclass(frozen=True)
class ClaimVerdict:
    """``judge``'s answer: whether the claim stands, and the words for it."""

    live: bool
    kind: str  # "none", "released", "dead", "expired", "unreadable", "live", "unreadable-live"
    silent_s: float  # seconds since the claim was last written (storage clock)


def boot_id() -> str:
    """This host's boot id (Linux), so two hosts named alike, or one host rebooted, differ."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's pid namespace (Linux), e.g. ``pid:[4026531836]``; "" if unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (Linux; None if unreadable):
    [0] the state, [1] the parent pid, [19] the start time in clock ticks since boot."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()  # the name (field 2) may hold spaces and ")"


def process_start(pid: int) -> int | None:
    """Start time of process ``pid`` in clock ticks since boot (Linux), None if unknown.

    Example:
        >>> process_start(os.getpid()) == process_start(os.getpid())
        True
    """
    fields = stat_fields(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int, started: int | None) -> bool:
    """Whether process ``pid`` runs on this host and is the one that started at ``started``.

    Example:
        >>> pid_alive(os.getpid(), process_start(os.getpid())), pid_alive(2**22 + 1, None)
        (True, False)
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        pass
    now = process_start(pid)
    if now is None:  # a zombie, or no /proc: the pid exists, so assume it is the holder
        return os.path.exists(f"/proc/{pid}") or not sys.platform.startswith("linux")
    return started is None or now == started


def this_driver(sweep: str, heartbeat_s: float, expiry_s: float) -> Holder:
    """The claim this process makes on a sweep directory."""
    pid = os.getpid()
    return Holder(host=socket.gethostname(), pid=pid, boot_id=boot_id(), pid_ns=pid_namespace(),
                  pid_started=process_start(pid), started=time.time(), sweep=sweep,
                  heartbeat_s=heartbeat_s, expiry_s=expiry_s,
                  command=shlex.join(["sweeps", *(_command or sys.argv[1:])])[:2000],
                  job=scheduler_job(os.environ))


def scheduler_job(env: Mapping[str, str]) -> str:
    """The batch job a driver runs in, from the variables Slurm and Kubernetes set ("": none).

    Example:
        >>> scheduler_job({"SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": "1"})
        'Slurm job 12, start 2'
        >>> scheduler_job({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "sweep-head-x"})
        'Kubernetes pod sweep-head-x'
    """
    if env.get("SLURM_JOB_ID"):
        restarts = env.get("SLURM_RESTART_COUNT", "0")
        start = f", start {int(restarts) + 1}" if restarts.isdigit() and restarts != "0" else ""
        return f"Slurm job {env['SLURM_JOB_ID']}{start}"
    if env.get("KUBERNETES_SERVICE_HOST"):
        return f"Kubernetes pod {env.get('HOSTNAME') or socket.gethostname()}"
    return ""


def read_holder(raw: bytes | None) -> Holder | None:
    """The holder a claim file names, or None when it cannot be read as one.

    Example:
        >>> read_holder(b'{"host": "h1", "pid": 7}').pid, read_holder(b'{"host": "h1", "pi')
        (7, None)
    """
    if not raw:
        return None
    try:
        data = json.loads(raw.decode())
        known = {f.name for f in fields(Holder)}
        holder = Holder(**{k: v for k, v in data.items() if k in known})
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
        return None
    return holder if isinstance(holder.host, str) and isinstance(holder.pid, int) else None


def same_host(a: Holder, b: Holder) -> bool:
    """Whether ``a``'s pid can be looked up here: same host name, boot and pid namespace."""
    return (a.host == b.host and bool(a.boot_id) and a.boot_id == b.boot_id
            and a.pid_ns == b.pid_ns)


def judge(holder: Holder | None, age_s: float, here: Holder,
          alive: Callable[[int, int | None], bool] = pid_alive) -> ClaimVerdict:
    """Whether the claim ``holder`` (None: the file could not be read) written ``age_s`` ago
    still holds against the driver ``here``.

    Example:
        >>> me = Holder(host="h1", pid=1, boot_id="b", expiry_s=30)
        >>> other = Holder(host="h2", pid=9, boot_id="c", expiry_s=30)
        >>> judge(other, 5, me).kind, judge(other, 31, me).kind
        ('live', 'expired')
        >>> judge(Holder(host="h1", pid=9, boot_id="b"), 1, me, alive=lambda p, s: False).kind
        'dead'
    """
    if holder is None:
        if age_s > here.expiry_s:
            return ClaimVerdict(False, "unreadable", age_s)
        return ClaimVerdict(True, "unreadable-live", age_s)
    if holder.released:
        return ClaimVerdict(False, "released", age_s)
    if same_host(holder, here) and not alive(holder.pid, holder.pid_started):
        return ClaimVerdict(False, "dead", age_s)
    if age_s > expiry_of(holder, here):
        return ClaimVerdict(False, "expired", age_s)
    return ClaimVerdict(True, "live", age_s)


def expiry_of(holder: Holder, here: Holder) -> float:
    """The expiry ``holder`` promised, or ``here``'s when it promised none that makes sense."""
    good = isinstance(holder.expiry_s, int | float) and holder.expiry_s > 0
    return holder.expiry_s if good else here.expiry_s


def describe(holder: Holder | None) -> str:
    """``host H, pid P, since HH:MM:SS`` (the holder's own clock), for messages.

    Example:
        >>> describe(Holder(host="h1", pid=7, started=0.0))[:16]
        'host h1, pid 7, '
    """
    if holder is None:
        return "a driver whose claim file cannot be read"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.started)) \
        if holder.started else "an unknown time"
    return f"{who(holder)}, since {since}"


def who(holder: Holder) -> str:
    """``host H, pid P`` and the job it ran in, if any: ``host h1, pid 7 (Slurm job 12)``."""
    return f"host {holder.host}, pid {holder.pid}" + (f" ({holder.job})" if holder.job else "")
