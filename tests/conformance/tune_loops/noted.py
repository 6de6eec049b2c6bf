"""What a Tune function observed, written where the test reads it back: this corpus's one
helper (nothing from sweeps, nothing from Ray Train: the loops stay what a Tune user writes).

    note(config, "report", step=3)     # in a loop
    read(observe_dir)                   # in the test: [record, ...]
"""

import json
import time
from pathlib import Path


def note(config, event, **values):
    directory = Path(config["observe_dir"])
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "trial.jsonl").open("a") as f:
        f.write(json.dumps({"event": event, **values}, sort_keys=True) + "\n")


def read(directory):
    path = Path(directory) / "trial.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def stand_still(config, step):
    """After the report of step ``config["pause_at"]``, the first time only: say so
    (``<observe_dir>/paused``) and wait to be killed with the sweep's driver (5 minutes)."""
    marker = Path(config["observe_dir"]) / "paused"
    if step != config.get("pause_at") or marker.exists():
        return
    marker.write_text(str(step))
    time.sleep(300)
