"""``sweeps._ray.tune.save_experiment_state``: Tune's state and the trials' result files on
storage before a new trial starts, copying only what changed since the last save."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from types import SimpleNamespace

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


def test_an_ended_trials_files_are_uploaded_once_after_its_end_then_left_alone(tmp_path) -> None:
    """The walk over every trial's files grew with the sweep; a trial that ended before an
    earlier save is skipped, and looked at again if it is ever seen running again."""
    controller = _Counter(tmp_path)
    trial = SimpleNamespace(status="RUNNING", storage=SimpleNamespace(trial_dir_name="trial_a"))
    controller.trials = [trial]
    result = Path(controller._storage.experiment_fs_path) / "trial_a" / "result.json"

    def save(results: str) -> str:
        controller.results = results
        save_experiment_state(controller)
        return result.read_text()

    assert save("1\n") == "1\n"
    trial.status = "TERMINATED"
    assert save("1\n2\n") == "1\n2\n"  # its last report, written as it ended: uploaded
    assert save("1\n2\n3\n") == "1\n2\n"  # settled: not walked again
    trial.status = "PENDING"  # seen running again (defensive: Tune does not do this today)
    assert save("1\n2\n3\n4\n") == "1\n2\n3\n4\n"
    trial.status = "ERROR"
    assert save("5\n") == "5\n"
    assert save("6\n") == "5\n"
    assert controller.stored() == {"trial_data": []}  # the state files are still saved each time


class _TunesOwnDump(_Counter):
    """Writes its state file as Tune's ``save_to_dir`` does: ``json.dump`` of the module's
    ``json``, with Tune's encoder."""

    def save_to_dir(self) -> None:
        import ray.tune.execution.tune_controller as module
        from ray.tune.utils.serialization import TuneFunctionEncoder

        super().save_to_dir()
        staging = Path(self._storage.experiment_driver_staging_path)
        self.json_used = module.json
        with open(staging / STATE_FILE, "w") as f:
            module.json.dump(self.state(), f, cls=TuneFunctionEncoder)
        if self.n < 0:
            raise OSError("disk full")


def test_the_state_file_is_encoded_at_once_and_tunes_json_is_put_back(tmp_path) -> None:
    import json

    import pytest
    import ray.tune.execution.tune_controller as module
    from ray.tune.utils.serialization import TuneFunctionEncoder

    controller = _TunesOwnDump(tmp_path)
    controller.n = 3
    controller.state = lambda: {"trial_data": [1, 2], "pair": (1, 2), "x": float("nan")}
    save_experiment_state(controller)
    assert controller.json_used is not json  # swapped during the call
    assert module.json is json  # and put back
    stored = (Path(controller._storage.experiment_fs_path) / STATE_FILE).read_text()
    assert stored == json.dumps(controller.state(), cls=TuneFunctionEncoder)
    controller.n = -1
    with pytest.raises(OSError, match="disk full"):
        save_experiment_state(controller)
    assert module.json is json  # put back after a failed save too
