"""Where a sweep directory's claim files live, and the one write that only one driver wins.

    store = claim_store(sweep_dir)          # local / NFS path, or an object-store URI's stand-in
    store.create(3, holder.to_bytes())      # True for exactly one of any number of racers
    store.age(3)                            # seconds since generation 3 was written

Claims are numbered generations under ``<sweep dir>/state/claims/NNNNNN.json``; a driver takes the
sweep by exclusively *creating* generation ``g + 1`` after judging ``g`` free, and only its holder
rewrites it (heartbeats, release); none is deleted (it could be created twice). How the create stays
exclusive (a hard link, else ``O_CREAT | O_EXCL``; on an object store a bid listed back, settling
``SETTLE_S``, ignored after ``BID_TTL_S``) and why ages use the storage's clock (a probe's
modification time; this host's where none can be written): docs/running.md#one-driver-per-sweep. It
assumes no racer stalls longer than ``BID_TTL_S`` between writing its bid and listing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

from sweeps.storage import objects
from sweeps.storage.location import display, filesystem

__all__ = ["ClaimStore", "LocalClaims", "ObjectClaims", "claim_store", "CLAIMS", "SETTLE_S",
           "BID_TTL_S"]

CLAIMS = "state/claims"  # relative to the sweep directory
SETTLE_S = 1.0
BID_TTL_S = 60.0
_NAME = re.compile(r"^(\d{6})\.json$")


def _name(gen: int) -> str:
    return f"{gen:06d}.json"


def _generations(names: list[str]) -> list[int]:
    return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m)


class ClaimStore(ABC):
    """The claim files of one sweep directory (see the module docstring)."""

    settle_s: float = 0.0  # how long a racing create may take to decide (acquire waits past it)

    @abstractmethod
    def generations(self) -> list[int]:
        """Generations that have a claim file, ascending."""

    @abstractmethod
    def read(self, gen: int) -> bytes | None:
        """The claim file's bytes (None: there is none)."""

    @abstractmethod
    def create(self, gen: int, data: bytes) -> bool:
        """Create generation ``gen`` holding ``data`` unless it exists; True if this call did."""

    @abstractmethod
    def rewrite(self, gen: int, data: bytes) -> None:
        """Replace the holder's own claim file (a heartbeat, or its release)."""

    @abstractmethod
    def age(self, gen: int) -> float:
        """Seconds since generation ``gen`` was last written, on the storage's clock."""

    @abstractmethod
    def withdraw(self, gen: int) -> None:
        """Remove this process's own claim ``gen`` (and its bid): ``Lease.withdraw``."""

    @abstractmethod
    def where(self) -> str:
        """The claims directory, as people are shown it."""

    def latest(self) -> int:
        """The newest generation (0: the sweep directory was never claimed)."""
        gens = self.generations()
        return gens[-1] if gens else 0

    def exists(self, gen: int) -> bool:
        return self.read(gen) is not None


class LocalClaims(ClaimStore):
    """Claims on a local or NFS path."""

    def __init__(self, root: Path) -> None:
        self.dir = Path(root) / CLAIMS

    def where(self) -> str:
        return str(self.dir)

    def generations(self) -> list[int]:
        try:
            return _generations(os.listdir(self.dir))
        except FileNotFoundError:
            return []

    def read(self, gen: int) -> bytes | None:
        try:
            return (self.dir / _name(gen)).read_bytes()
        except FileNotFoundError:
            return None

    def create(self, gen: int, data: bytes) -> bool:
        self.dir.mkdir(parents=True, exist_ok=True)
        target = self.dir / _name(gen)
        temp = self.dir / f".claim-{uuid.uuid4().hex}"
        try:
            _write_synced(temp, data)
            os.link(temp, target)
            return True
        except FileExistsError:  # NFS: a retried LINK may say so after it succeeded
            with contextlib.suppress(OSError):
                return temp.stat().st_nlink == 2
            return False
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
                raise
            return _create_exclusive(target, data)  # no hard links on this file system
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()

    def withdraw(self, gen: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / _name(gen)).unlink()

    def rewrite(self, gen: int, data: bytes) -> None:
        target = self.dir / _name(gen)
        temp = self.dir / f".claim-{uuid.uuid4().hex}"
        try:
            _write_synced(temp, data)
            os.replace(temp, target)
        except OSError:
            with contextlib.suppress(OSError):
                temp.unlink()
            with open(target, "r+b") as f:  # a full disk: the file's own block is enough
                f.write(data)
                f.truncate()
                f.flush()
                os.fsync(f.fileno())

    def age(self, gen: int) -> float:
        written = (self.dir / _name(gen)).stat().st_mtime
        probe = self.dir / f".now-{uuid.uuid4().hex}"
        try:
            probe.touch()
            now = probe.stat().st_mtime
            probe.unlink()
        except OSError:
            now = time.time()
        return max(0.0, now - written)


def _write_synced(path: Path | int, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _create_exclusive(target: Path, data: bytes) -> bool:
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    _write_synced(fd, data)  # open() takes the descriptor, and closes it
    return True


class ObjectClaims(ClaimStore):
    """Claims on an object store, through pyarrow (claim then verify, module docstring)."""

    settle_s = SETTLE_S

    def __init__(self, root: Path) -> None:
        found = filesystem(Path(root) / CLAIMS)
        if found is None:
            raise ValueError(f"{root} is not on an object store")
        self.fs, self.dir = found
        self.shown = display(Path(root) / CLAIMS)
        self._won: dict[int, str] = {}  # generation -> this process's winning bid

    def where(self) -> str:
        return self.shown

    def _path(self, gen: int) -> str:
        return f"{self.dir}/{_name(gen)}"

    def generations(self) -> list[int]:
        return _generations(objects.listdir(self.fs, self.dir))

    def read(self, gen: int) -> bytes | None:
        try:
            return objects.get(self.fs, self._path(gen))
        except FileNotFoundError:
            return None

    def _fresh(self, gen: int, mine: str) -> list[str]:
        from pyarrow.fs import FileSelector

        infos = self.fs.get_file_info(FileSelector(f"{self.dir}/{gen:06d}.bids",
                                                   allow_not_found=True))
        bids = {i.base_name: i.mtime_ns / 1e9 for i in infos if i.mtime_ns is not None}  # clock
        if mine not in bids:  # not listed yet: the store is not list-after-write consistent
            raise OSError(errno.EIO, f"{self.shown}: a claim written was not listed back; this "
                          "store does not give list-after-write consistency, which the claim "
                          "on a sweep directory needs")
        return sorted(n for n, t in bids.items() if t >= bids[mine] - BID_TTL_S)

    def create(self, gen: int, data: bytes) -> bool:
        if self.exists(gen):
            return False
        mine = uuid.uuid4().hex
        bid = f"{self.dir}/{gen:06d}.bids/{mine}"
        objects.put(self.fs, bid, data)
        fresh = self._fresh(gen, mine)
        won = fresh == [mine]
        if not won and fresh[0] == mine:
            time.sleep(SETTLE_S)
            won = self._fresh(gen, mine) == [mine]
        if won and not self.exists(gen):
            objects.put(self.fs, self._path(gen), data)
            self._won[gen] = bid
            return True
        with contextlib.suppress(OSError):
            objects.delete_file(self.fs, bid)
        return False

    def withdraw(self, gen: int) -> None:
        for path in (self._path(gen), self._won.pop(gen, None)):
            if path:
                objects.delete_file(self.fs, path)

    def rewrite(self, gen: int, data: bytes) -> None:
        objects.put(self.fs, self._path(gen), data)

    def age(self, gen: int) -> float:
        found = objects.info(self.fs, self._path(gen))
        if found.mtime_ns is None:  # not there (withdrawn meanwhile)
            raise FileNotFoundError(self._path(gen))
        probe = f"{self.dir}/now/{uuid.uuid4().hex}"
        try:
            objects.put(self.fs, probe, b"")
            now = objects.info(self.fs, probe).mtime_ns / 1e9
            objects.delete_file(self.fs, probe)
        except OSError:
            now = time.time()
        return max(0.0, now - found.mtime_ns / 1e9)


def claim_store(sweep_dir: str | Path) -> ClaimStore:
    """The claim store of ``sweep_dir`` (a local path, or an object-store URI's stand-in).

    Example:
        >>> type(claim_store("/runs/d")).__name__, claim_store("/runs/d").where()
        ('LocalClaims', '/runs/d/state/claims')
    """
    remote = filesystem(Path(sweep_dir)) is not None
    return (ObjectClaims if remote else LocalClaims)(Path(sweep_dir))
