"""What a corpus loop observed, written where the test reads it back: the one helper the loops
share (it imports nothing from sweeps, so a loop stays what a user would write).

    note(config, "context", world_size=2, ...)    # in a loop, on any rank
    stand_still(config, epoch)                     # rank 0, once: the test kills the driver
    read(observe_dir)                              # in the test: {rank: [record, ...]}

Each rank appends JSON lines to ``<config["observe_dir"]>/rank<r>.jsonl``, in the order it
observed things; a restarted attempt appends after the earlier attempt's lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def note(config: dict[str, Any], event: str, **values: Any) -> None:
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    directory = Path(config["observe_dir"])
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / f"rank{rank}.jsonl").open("a") as f:
        f.write(json.dumps({"event": event, **values}, sort_keys=True, default=repr) + "\n")


def read(directory: Path) -> dict[int, list[dict[str, Any]]]:
    return {int(path.stem[4:]): [json.loads(line) for line in path.read_text().splitlines()]
            for path in sorted(Path(directory).glob("rank*.jsonl"))}


def stand_still(config: dict[str, Any], epoch: int) -> None:
    """On rank 0, after the report of epoch ``config["pause_at"]``, the first time only: say
    so (``<observe_dir>/paused``) and wait to be killed with the sweep's driver (up to 5
    minutes), so a test kills it at a known point of the loop."""
    import time

    import ray.train

    marker = Path(config["observe_dir"]) / "paused"
    if (epoch != config.get("pause_at") or marker.exists()
            or ray.train.get_context().get_world_rank() != 0):
        return
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(epoch))
    time.sleep(300)
