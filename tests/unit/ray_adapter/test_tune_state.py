"""``sweeps._ray.tune_state.save_experiment_state``: Tune's state and the trials' result files on
storage before a new trial starts, copying only what changed since the last save."""

from __future__ import annotations

import io
import json
import logging
import pickle
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sweeps._ray.tune_state import save_experiment_state
from tests.unit.ray_adapter.staged import SEARCHER_FILE, STATE_FILE, StagedController, Storage


class _Counter(StagedController):
    def __init__(self, root: Path, storage: Storage | None = None) -> None:
        super().__init__(root, storage)
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
    with caplog.at_level(logging.WARNING, logger="sweeps._ray.tune_state"):
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


class _Managed(_Counter):
    """A controller with Tune's real checkpoint manager, saved through Tune's own
    ``TuneController.checkpoint`` (the call Tune's loop makes each step, and at the end)."""

    def __init__(self, root: Path, period: float | str) -> None:
        from ray.tune.execution.experiment_state import _ExperimentCheckpointManager

        super().__init__(root)
        self._checkpoint_manager = _ExperimentCheckpointManager(
            storage=self._storage, checkpoint_period=period)
        self.launched: list[str] = []  # Tune's whole-directory syncs, had any been launched
        sync_up = self._storage.syncer.sync_up
        self._storage.syncer.sync_up = lambda *a, **k: (self.launched.append(a[0]),
                                                        sync_up(*a, **k))[1]

    def checkpoint(self, force: bool = False, wait: bool = False) -> None:
        from ray.tune.execution.tune_controller import TuneController

        TuneController.checkpoint(self, force=force, wait=wait)


def test_tunes_own_saves_go_through_this_save_under_tunes_throttle(tmp_path) -> None:
    controller = _Managed(tmp_path, period=60)
    manager = controller._checkpoint_manager

    def stored_after(n: int, **kwargs: bool) -> list:
        controller.n = n
        controller.checkpoint(**kwargs)
        return controller.stored()["trial_data"]

    controller.n = 1
    save_experiment_state(controller)  # a new trial: from here on Tune's saves come here too
    assert stored_after(2) == [0]  # inside Tune's period: no save
    assert stored_after(3, force=True, wait=True) == [0, 1, 2]  # Tune's last save
    manager._should_force_sync_up = True  # as after num_to_keep trial checkpoints
    manager._trial_num_checkpoints_since_last_sync["t"] = 3
    assert stored_after(4) == [0, 1, 2, 3]
    assert not manager._should_force_sync_up and not manager._trial_num_checkpoints_since_last_sync
    assert stored_after(5) == [0, 1, 2, 3]  # a save resets the period, as Tune's own does
    manager._last_save_time -= 61
    assert stored_after(6) == list(range(6))  # the period is over
    assert controller.launched == []  # Tune never copied the whole staging directory


def test_auto_period_follows_the_save_time_as_in_tune(tmp_path) -> None:
    controller = _Managed(tmp_path, period="auto")
    controller._checkpoint_manager._checkpoint_period = 0.0
    save_experiment_state(controller)
    assert controller._checkpoint_manager._checkpoint_period == 10.0  # max(10, 19 x save)


def test_a_manager_without_tunes_throttle_keeps_tunes_saves(tmp_path) -> None:
    controller = _Managed(tmp_path, period=60)
    del controller._checkpoint_manager._should_force_sync_up
    save_experiment_state(controller)
    controller.n = 2
    controller._checkpoint_manager._should_force_sync_up = False
    controller.checkpoint(force=True, wait=True)
    assert controller.launched == [controller._storage.experiment_driver_staging_path]
    assert controller.stored()["trial_data"] == [0, 1]


def _tune_entry(i: int, text: str = "") -> tuple[str, str]:
    """A ``trial_data`` entry as Tune makes it: the trial's and its metadata's JSON texts."""
    state = json.dumps({"trial_id": f"t{i}", "config": {"lr": 0.1 * i, "name": f"é{text}"}},
                       indent=2)
    return state, json.dumps({"last_result": {"loss": i / 3, "note": '"q"\n'}}, indent=2)


def test_the_state_file_reuses_each_unchanged_trials_encoded_text(monkeypatch) -> None:
    from ray.tune.utils.serialization import TuneFunctionEncoder

    from sweeps._ray.tune_state_file import _CachedTrialsJson

    coder = _CachedTrialsJson()
    encoded: list[Any] = []
    real = json.dumps

    def write(doc: dict) -> str:
        out = io.StringIO()
        with monkeypatch.context() as patch:  # json.dumps, seeing what is encoded
            patch.setattr(json, "dumps", lambda obj, **kw: (encoded.append(obj),
                                                              real(obj, **kw))[1])
            coder.dump(doc, out, cls=TuneFunctionEncoder)
        return out.getvalue()

    trials = [_tune_entry(i) for i in range(3)]
    doc = {"trial_data": trials, "runner_data": {"pair": (1, 2)}, "stats": {"start_time": 1.5}}
    assert write(doc) == real(doc, cls=TuneFunctionEncoder)
    encoded.clear()
    trials[1] = _tune_entry(1, "changed")  # Tune made new texts for a trial that changed
    trials.append(_tune_entry(3))
    assert write(doc) == real(doc, cls=TuneFunctionEncoder)
    assert [e for e in encoded if isinstance(e, tuple)] == [trials[1], trials[3]]
    for odd in ({}, {"trial_data": []}, {"trial_data": [1, 2], "x": float("nan")},
                {"trial_data": trials, 1: "not a str key"}):
        assert write(odd) == real(odd, cls=TuneFunctionEncoder)
    out = io.StringIO()
    coder.dump(doc, out, indent=2)  # other options: json.dumps's own output
    assert out.getvalue() == real(doc, indent=2)


class _Flaky(_Managed):
    """Its saves fail while ``failing``, each failure taking ``fail_s`` of ``clock``."""

    failing = False
    tries = 0
    fail_s = 0.0
    clock: list[float]

    def save_to_dir(self) -> None:
        self.tries += 1
        if self.failing:
            self.clock[0] += self.fail_s
            raise OSError("SlowDown: reduce your request rate")
        super().save_to_dir()


def _flaky(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, period: float) -> _Flaky:
    """A ``_Flaky`` controller, saved once, on a clock the test moves (Tune's manager and
    this module read the same ``time.monotonic``)."""
    import time

    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    controller = _Flaky(tmp_path, period=period)
    controller.clock = clock
    controller.n = 1
    save_experiment_state(controller)
    return controller


def test_a_failed_periodic_save_is_logged_and_tried_again_not_raised(
        tmp_path, caplog, monkeypatch) -> None:
    controller = _flaky(tmp_path, monkeypatch, period=60)
    controller.failing, controller.n = True, 2
    controller.clock[0] += 61
    with caplog.at_level(logging.WARNING, logger="sweeps._ray.tune_state"):
        controller.checkpoint()  # Tune's loop would re-raise: the sweep would end
        controller.checkpoint()
        controller.checkpoint()
    assert controller.tries == 2  # the first save, and one try: not one at every step
    assert [r.getMessage() for r in caplog.records] == [
        "saving the experiment state to storage failed (tried again in 60 s, until it "
        "works): OSError: SlowDown: reduce your request rate"]
    controller.clock[0] += 61  # a period later
    controller.failing = False
    controller.checkpoint()
    assert controller.stored()["trial_data"] == [0, 1]
    controller.failing = True
    with pytest.raises(OSError, match="SlowDown"):  # the save before a new trial still raises
        save_experiment_state(controller)


def test_a_save_that_fails_slowly_waits_nineteen_times_as_long_before_the_next_try(
        tmp_path, monkeypatch) -> None:
    """A store that times out after 2 s would otherwise be tried at every step once the
    1 s period is over: the loop would spend its time failing."""
    controller = _flaky(tmp_path, monkeypatch, period=1)
    controller.failing, controller.fail_s = True, 2.0
    controller.clock[0] += 1.5
    controller.checkpoint()
    assert controller.tries == 2
    controller.clock[0] += 37.0
    controller.checkpoint()
    assert controller.tries == 2  # 19 x 2 s = 38 s after the failed try ended
    controller.clock[0] += 1.5
    controller.checkpoint()
    assert controller.tries == 3


def test_on_s3_only_the_changed_files_are_written_and_no_folder_is_checked(
        tmp_path, moto_s3) -> None:
    """Folders are prefixes there: ``create_dir`` checked the bucket and the folder at every
    save (the folder markers left are pyarrow's ``move``, which keeps the source's folder)."""
    filesystem, path = moto_s3.filesystem(), f"{moto_s3.BUCKET}/unit/{uuid.uuid4().hex[:8]}"
    controller = _Counter(tmp_path, Storage(tmp_path, filesystem, path))
    key = path.split("/", 1)[1]
    every = {f"{key}/{name}" for name in (STATE_FILE, SEARCHER_FILE, "trial_a/result.json")}
    for n, changed in ((1, every), (2, every - {f"{key}/trial_a/result.json"})):
        controller.n = n
        with moto_s3.recording() as requests:
            save_experiment_state(controller)
        written = {url.partition("?")[0].split("/", 1)[1] for _, url in requests}
        folders = {k.rpartition("/")[0] + "/" for k in changed}
        assert written == changed | {_part(k) for k in changed} | folders, requests
        assert not [r for r in requests if r[0] in ("HEAD", "GET")], requests
        assert len(requests) == 6 * len(changed), requests  # upload 3, copy, delete, marker
        assert controller.stored() == {"trial_data": list(range(n))}
    assert sorted(k for k in moto_s3.keys(key) if not k.endswith("/")) == sorted(every)


def _part(key: str) -> str:
    folder, _, name = key.rpartition("/")
    return f"{folder}/.{name}.part"


def test_a_failed_upload_raises_keeps_the_stored_state_and_is_sent_again(
        tmp_path, moto_s3) -> None:
    """pyarrow's ``copy_files`` returns normally when the store refuses an upload (it drops
    the close's error): the save looked done, the file was marked uploaded and never sent
    again, and storage kept the old experiment state without a word."""
    filesystem, path = moto_s3.filesystem(), f"{moto_s3.BUCKET}/unit/{uuid.uuid4().hex[:8]}"
    controller = _Counter(tmp_path, Storage(tmp_path, filesystem, path))
    controller.n = 1
    save_experiment_state(controller)
    with moto_s3.refusing_uploads() as refusing:
        controller._storage.storage_filesystem = refusing.filesystem
        controller.n = 2
        with pytest.raises(OSError, match="uploading part"):
            save_experiment_state(controller)
        assert refusing.refused >= 1
    controller._storage.storage_filesystem = filesystem
    assert controller.stored() == {"trial_data": [0]}  # the last whole state, untouched
    save_experiment_state(controller)  # the store is back: what failed is sent again
    assert controller.stored() == {"trial_data": [0, 1]}
    key = path.split("/", 1)[1]
    assert not [k for k in moto_s3.keys(key) if k.endswith(".part")]


def test_a_fixed_period_stretches_to_nineteen_saves_and_back_never_below_it(tmp_path) -> None:
    """On an object store a save waits for a few requests a changed file; the period grows
    so that periodic saves hold Tune's loop at most 1/20 of the time."""
    from sweeps._ray.tune_state import _saved

    controller = _Managed(tmp_path, period=1)
    manager = controller._checkpoint_manager
    save_experiment_state(controller)  # takes the saves over
    _saved(controller, took=0.2)
    assert manager._checkpoint_period == pytest.approx(3.8)
    _saved(controller, took=30.0)  # the first save after a resume uploads every file
    assert manager._checkpoint_period == 60.0  # capped: storage is never minutes behind
    _saved(controller, took=0.01)
    assert manager._checkpoint_period == 1.0
