"""``sweeps._ray.tune.save_experiment_state``: Tune's state and the trials' result files on
storage before a new trial starts, copying only what changed since the last save."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

from sweeps._ray.tune import save_experiment_state
from tests.unit.ray_adapter.staged import SEARCHER_FILE, STATE_FILE, StagedController


class _Counter(StagedController):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.n = 0

    def state(self) -> dict:
        return {"trial_data": list(range(self.n))}


def test_what_changed_reaches_storage_whole_and_nothing_else_is_copied_again(tmp_path) -> None:
    controller = _Counter(tmp_path)
    stored = Path(controller._storage.experiment_fs_path)
    result = stored / "trial_a" / "result.json"
    for n in (1, 2):
        controller.n = n
        save_experiment_state(controller)
        assert controller.stored() == {"trial_data": list(range(n))}  # replaced, not appended
        if n == 1:
            first_upload = result.stat().st_mtime_ns
    assert pickle.loads((stored / SEARCHER_FILE).read_bytes()) == {"trial_data": [0, 1]}
    # The trial's result file did not change between the saves: uploaded once.
    assert result.read_text() == "{}\n" and result.stat().st_mtime_ns == first_upload
    controller.results = '{"epoch": 1}\n'  # a new report: uploaded with the next save
    save_experiment_state(controller)
    assert result.read_text() == '{"epoch": 1}\n'
    # No half-written file left behind.
    assert sorted(str(p.relative_to(stored)) for p in stored.rglob("*")) == sorted(
        [STATE_FILE, SEARCHER_FILE, "trial_a", "trial_a/result.json"])


def test_a_failed_sync_of_tunes_own_does_not_stop_the_save(tmp_path, caplog) -> None:
    controller = _Counter(tmp_path)
    syncer = controller._storage.syncer
    syncer.sync_up(str(tmp_path / "no-such-dir"), str(tmp_path / "elsewhere"))  # fails, later
    controller.n = 3
    with caplog.at_level(logging.WARNING, logger="sweeps._ray.tune"):
        save_experiment_state(controller)
    assert controller.stored() == {"trial_data": [0, 1, 2]}
    assert "Tune's last sync of the experiment state failed" in caplog.text
