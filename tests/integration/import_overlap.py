"""Test-only trainable: ``ranks_loop``'s loop behind an import that, in a Ray worker process,
waits (up to a minute) for a second worker process to be importing it too, then writes how
many it saw (``test_inline_ranks``: a trial's peer starts while rank 0 imports the loop).
Elsewhere (the driver validating the trainable) it only imports."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from tests.integration.ranks_loop import train_ranks

__all__ = ["MARKS", "train_ranks"]

MARKS = Path(tempfile.gettempdir()) / "sweeps-test-import-overlap"

if sys.argv[0].endswith("default_worker.py") and MARKS.is_dir():  # a Ray worker's import
    (MARKS / f"{os.getpid()}.importing").touch()
    deadline = time.monotonic() + 60
    while len(list(MARKS.glob("*.importing"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    (MARKS / f"{os.getpid()}.saw").write_text(str(len(list(MARKS.glob("*.importing")))))
