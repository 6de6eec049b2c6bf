"""python -m bench.overhead / bench.scale: when each trial's MLflow run was seen finished.

    watcher = RunWatcher("sqlite:///db", "digits", since=time.time()).start()
    run_sweep(cfg)
    watcher.stop(); watcher.finished       # sweeps.trial_id -> time.time() first seen ended

A thread of the sweep's own process asks ``mlflow.MlflowClient`` every ``interval_s`` for the
trial runs (tag ``sweeps.role=trial``) that ended since its last look (``end_time`` at or after
the latest it saw, so each look reads only the new ones), and notes when it first saw each.
MLflow's ``end_time`` itself is when sweeps recorded the trial's end, not when it reached
MLflow: the difference is the tracking delay. With SQLite it opens the store only once the
sweep has created the experiment there, so it never races the sweep to create the tables.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["RunWatcher"]

ENDED = ("FINISHED", "FAILED", "KILLED")


class RunWatcher:
    """Polls MLflow from a daemon thread; ``finished``/``status``/``end_time`` per trial id."""

    def __init__(self, uri: str, experiment: str, since: float,
                 interval_s: float = 0.25) -> None:
        self.uri, self.experiment, self.since, self.interval_s = uri, experiment, since, interval_s
        self.finished: dict[str, float] = {}  # trial id -> time.time() when first seen ended
        self.status: dict[str, str] = {}
        self.end_time: dict[str, float] = {}  # trial id -> the run's end_time (s)
        self.polls = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-mlflow-watch",
                                        daemon=True)

    def start(self) -> RunWatcher:
        self._thread.start()
        return self

    def stop(self, final_poll: bool = True) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if final_poll and self._client is not None:
            try:
                self._poll()
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    def complete_at(self, trials: int) -> float | None:
        """When ``trials`` runs had all been seen FINISHED (None: not all were)."""
        done = [t for t, s in self.status.items() if s == "FINISHED"]
        return max(self.finished[t] for t in done) if len(done) >= trials else None

    _client: Any = None
    _experiment_id: str | None = None
    _after_ms = 0

    def _ready(self) -> bool:
        """The experiment exists (with SQLite, read with sqlite3 before MLflow opens it)."""
        if self.uri.startswith("sqlite:///"):
            path = Path(self.uri[len("sqlite:///"):])
            if not path.is_file():
                return False
            try:
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
                    row = db.execute("SELECT experiment_id FROM experiments WHERE name = ?",
                                     (self.experiment,)).fetchone()
            except sqlite3.Error:
                return False
            if row is None:
                return False
        from mlflow import MlflowClient

        self._client = MlflowClient(tracking_uri=self.uri)
        exp = self._client.get_experiment_by_name(self.experiment)
        if exp is None:
            self._client = None
            return False
        self._experiment_id = exp.experiment_id
        self._after_ms = int(self.since * 1000)
        return True

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                if self._client is None and not self._ready():
                    continue
                self._poll()
            except Exception as exc:  # a locked SQLite file: note it, look again next time
                self.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    def _poll(self) -> None:
        self.polls += 1
        now = time.time()
        runs = self._client.search_runs(
            [self._experiment_id], max_results=5000, order_by=["attributes.end_time ASC"],
            filter_string=("tags.`sweeps.role` = 'trial' and "
                           f"attributes.end_time >= {self._after_ms}"))
        for run in runs:
            trial = run.data.tags.get("sweeps.trial_id")
            if trial is None or run.info.status not in ENDED or trial in self.finished:
                continue
            self.finished[trial] = now
            self.status[trial] = run.info.status
            self.end_time[trial] = run.info.end_time / 1000.0
            self._after_ms = max(self._after_ms, int(run.info.end_time))
