"""A Tune controller's state-save surface on real directories, for the scheduler and adapter
tests: ``save_to_dir`` writes into a staging dir as Tune's does (state files at the top, a
trial's result file below, touched only when its content changes; ``get_trials`` for the
trials' status), and ``_storage`` has a
real pyarrow filesystem and Tune's real background syncer, so
``sweeps._ray.tune_state.save_experiment_state`` runs unchanged on it."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pyarrow.fs
from ray.train._internal.storage import _FilesystemSyncer

STATE_FILE = "experiment_state-2026-01-01_00-00-00.json"
SEARCHER_FILE = "searcher-state-2026-01-01_00-00-00.pkl"


class Storage:
    """The ``StorageContext`` attributes the adapter reads."""

    def __init__(self, root: Path, filesystem: Any = None, fs_path: str | None = None) -> None:
        """Staging under ``root``; storage on ``filesystem`` at ``fs_path`` (default: the
        local disk, under ``root``)."""
        self.experiment_driver_staging_path = str(root / "staging" / "driver_artifacts")
        self.experiment_fs_path = fs_path or str(root / "storage" / "experiment")
        self.storage_filesystem = filesystem or pyarrow.fs.LocalFileSystem()
        self.syncer = _FilesystemSyncer(storage_filesystem=self.storage_filesystem)


class StagedController:
    """``save_to_dir`` and ``_storage`` of a ``TuneController``; subclasses say what ``state``
    is saved."""

    def __init__(self, root: Path, storage: Storage | None = None) -> None:
        self._storage = storage or Storage(root)
        self._tune_controller = self  # as Tune's TrialRunnerWrapper holds the controller
        self.trials: list[Any] = []

    def get_trials(self) -> list[Any]:
        return self.trials

    results = "{}\n"  # trial_a's result file, rewritten only when this changes (as Tune appends)

    def state(self) -> dict[str, Any]:
        return {}

    def save_to_dir(self) -> None:
        staging = Path(self._storage.experiment_driver_staging_path)
        (staging / "trial_a").mkdir(parents=True, exist_ok=True)
        (staging / STATE_FILE).write_text(json.dumps(self.state()))
        (staging / SEARCHER_FILE).write_bytes(pickle.dumps(self.state()))
        result = staging / "trial_a" / "result.json"
        if not result.exists() or result.read_text() != self.results:
            result.write_text(self.results)

    def stored(self) -> dict[str, Any]:
        """The experiment state as storage holds it (what a resume reads)."""
        storage = self._storage
        with storage.storage_filesystem.open_input_stream(
                f"{storage.experiment_fs_path}/{STATE_FILE}") as f:
            return json.loads(f.read())
