"""python -m sweeps.sync SWEEP_DIR [--timeout 300]      (a path, or s3://bucket/prefix)

Send a sweep's tracking records that did not reach MLflow (the server was unreachable when the
sweep ended). Safe to run any number of times: records already applied are not sent again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from sweeps import files
from sweeps.layout import SweepLayout
from sweeps.storage.journal import Journal
from sweeps.storage.location import sweep_root
from sweeps.tracking.masking import without_credentials

__all__ = ["sync"]


def sync(sweep_dir: str | Path, timeout_s: float = 300.0) -> int:
    """Apply the pending records of ``sweep_dir``; return how many are still unsent."""
    from sweeps.tracking.callback import TrackingWriter
    from sweeps.tracking.mlflow_sink import MLflowSink
    from sweeps.tracking.setup import quiet_http_retries
    from sweeps.tracking.sqlite_store import StoreUnusable

    layout = SweepLayout(sweep_root(sweep_dir))
    state_dir, meta_path = layout.tracking, layout.tracking_meta
    if not files.exists(meta_path):
        raise FileNotFoundError(f"{sweep_dir} has no tracking/meta.json: not a tracked sweep")
    meta = json.loads(files.read_text(meta_path))
    quiet_http_retries()
    journal = Journal(state_dir)
    # The URI is recorded without credentials: MLFLOW_TRACKING_URI when it names the same store
    # with them, else MLflow reads MLFLOW_TRACKING_USERNAME/PASSWORD/TOKEN.
    env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    uri = env if env and without_credentials(env) == meta["uri"] else meta["uri"]
    try:  # here, not in the writer's thread: a store made anew takes the whole journal first
        sink = MLflowSink(uri, meta["experiment_name"], state_dir, meta["model_name"])
    except StoreUnusable as exc:
        print(f"MLflow: {exc.why}; the records wait in {journal.path} until {exc.fix}")
        return len(journal.pending())
    writer = TrackingWriter(journal, sink)
    try:
        return writer.flush(timeout_s)
    finally:
        writer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dir")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    left = sync(args.sweep_dir, args.timeout)
    print(f"{left} record(s) still unsent" if left else "all tracking records are in MLflow")
    sys.exit(1 if left else 0)


if __name__ == "__main__":
    main()
