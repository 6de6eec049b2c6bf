"""Repairing a trial's Train run directory before it resumes: torn, truncated, deleted."""

from __future__ import annotations

import json

import torch

from sweeps.loop.checkpoint import CHECKPOINT_FILE, save_checkpoint
from sweeps.resume.train_runs import SNAPSHOT, checkpoint_epochs, claim_run, repair_run


def _run(tmp_path, epochs=(1, 2, 3)):
    run = tmp_path / "train" / "abc123"
    results = []
    for epoch in epochs:
        directory = run / f"checkpoint_epoch_{epoch:04d}"
        directory.mkdir(parents=True)
        save_checkpoint(directory, {"model_state": {"w": torch.zeros(64)}, "epoch": epoch,
                                    "metrics": {"val_acc": epoch / 10, "epoch": epoch}})
        results.append({"version": 0, "checkpoint_dir_name": directory.name,
                        "metrics": {"val_acc": epoch / 10, "epoch": epoch}})
    (run / SNAPSHOT).write_text(json.dumps({
        "ray_version": "2.60.0", "checkpoint_results": results,
        "checkpoint_report_indices": [e - 1 for e in epochs],
        "latest_checkpoint_result": results[-1], "pending_training_results": [],
        "pending_validation_specs": [], "current_report_index": epochs[-1],
        "validated_checkpoint_dir_names": [], "timed_out_validation_checkpoint_dir_names": [],
        "failed_validation_checkpoint_dir_names": []}))
    return run


def _latest(run):
    return json.loads((run / SNAPSHOT).read_text())["latest_checkpoint_result"]


def test_a_sound_run_is_left_untouched(tmp_path) -> None:
    run = _run(tmp_path)
    before = (run / SNAPSHOT).read_text()
    assert repair_run(run) == []
    assert (run / SNAPSHOT).read_text() == before
    assert checkpoint_epochs(run) == [1, 2, 3]


def test_truncated_newest_checkpoint_falls_back_to_the_previous(tmp_path) -> None:
    run = _run(tmp_path)
    newest = run / "checkpoint_epoch_0003" / CHECKPOINT_FILE
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    notes = repair_run(run)
    assert "checkpoint_epoch_0003 is unreadable" in notes[0]
    assert "falling back to the previous valid checkpoint checkpoint_epoch_0002" in notes[1]
    assert _latest(run)["checkpoint_dir_name"] == "checkpoint_epoch_0002"
    assert (run / "checkpoint_epoch_0003.corrupt" / CHECKPOINT_FILE).exists()  # kept, aside
    assert repair_run(run) == []


def test_checkpoint_deleted_by_hand(tmp_path) -> None:
    import shutil

    run = _run(tmp_path)
    shutil.rmtree(run / "checkpoint_epoch_0003")
    shutil.rmtree(run / "checkpoint_epoch_0002")
    notes = repair_run(run)
    assert any("checkpoint_epoch_0003 is missing" in n for n in notes)
    assert _latest(run)["checkpoint_dir_name"] == "checkpoint_epoch_0001"
    shutil.rmtree(run / "checkpoint_epoch_0001")
    assert "starts again from epoch 1" in repair_run(run)[-1]
    assert _latest(run) is None


def test_torn_snapshot_is_rebuilt_from_the_checkpoints(tmp_path) -> None:
    run = _run(tmp_path)
    (run / SNAPSHOT).write_text('{"ray_version": "2.60.0", "checkpoint_res')
    notes = repair_run(run)
    assert "rebuilt it from the checkpoints on disk" in notes[0]
    snapshot = json.loads((run / SNAPSHOT).read_text())
    assert [r["checkpoint_dir_name"] for r in snapshot["checkpoint_results"]] == [
        "checkpoint_epoch_0001", "checkpoint_epoch_0002", "checkpoint_epoch_0003"]
    assert snapshot["checkpoint_report_indices"] == [0, 1, 2]
    assert (run / f"{SNAPSHOT}.corrupt").exists()


def test_run_of_another_trial_with_the_same_id_is_moved_aside(tmp_path) -> None:
    run = tmp_path / "train" / "abc123"
    assert claim_run(run, {"lr": 0.1}) == []
    assert claim_run(run, {"lr": 0.1}) == []
    notes = claim_run(run, {"lr": 0.2})
    assert "moved to abc123.orphan" in notes[0]
    assert (tmp_path / "train" / "abc123.orphan" / "trial.json").exists()
    assert json.loads((run / "trial.json").read_text()) == {"lr": 0.2}


def test_reports_tune_never_saw_are_found_up_to_the_checkpoint(tmp_path) -> None:
    from sweeps.protocol import CLOCK_KEY, REPORTS_FILE
    from sweeps.search.schedulers import decision_log
    from sweeps.trial import report_log
    from sweeps.trial.driver import unseen_reports

    sweep = tmp_path
    run = _run(tmp_path, epochs=(1, 2, 3))
    for epoch in (1, 2, 3, 4):  # epoch 4 was reported, but its checkpoint is not registered
        report_log.append(run, {"epoch": epoch, CLOCK_KEY: epoch, "val_acc": epoch / 10},
                          n=epoch, checkpoint=str(run / f"checkpoint_epoch_{epoch:04d}"))
    with open(run / REPORTS_FILE, "a") as f:
        f.write('{"epoch": 5, "val')  # torn last line
    decision_log(sweep).append({"trial": run.name, "epoch": 1, "value": 0.1})
    decision_log(sweep).append({"trial": "other", "epoch": 3, "value": 0.1})
    # Tune judged epoch 1; epochs 2-3 are checkpointed but unseen; 4 will be trained again.
    unseen = unseen_reports(run, sweep, run.name)
    assert [m["epoch"] for m in unseen] == [2, 3] and "n" not in unseen[0]
    assert unseen[1]["checkpoint_path"].endswith("checkpoint_epoch_0003")
    assert report_log.restored_count(run) == 3  # the clock's report count resumes from here
    decision_log(sweep).append({"trial": run.name, "epoch": 3, "value": 0.3})
    assert unseen_reports(run, sweep, run.name) == []


def test_a_report_made_again_after_a_restore_replaces_the_first(tmp_path) -> None:
    from sweeps.protocol import CLOCK_KEY
    from sweeps.trial import report_log
    from sweeps.trial.driver import unseen_reports

    run = _run(tmp_path, epochs=(1, 2))
    ckpt = {e: str(run / f"checkpoint_epoch_{e:04d}") for e in (1, 2)}
    report_log.append(run, {CLOCK_KEY: 1, "v": "first"}, n=1, checkpoint=ckpt[1])
    report_log.append(run, {CLOCK_KEY: 2, "v": "lost"}, n=2, checkpoint=None)  # crashed here
    report_log.append(run, {CLOCK_KEY: 2, "v": "again"}, n=2, checkpoint=ckpt[2])
    assert [m["v"] for m in unseen_reports(run, tmp_path, run.name)] == ["first", "again"]


def test_a_loops_own_checkpoints_resume_after_the_epoch_the_report_log_has(tmp_path) -> None:
    """A loop written as Ray's guides write it names its checkpoints as Train does
    (checkpoint_<timestamp>, no checkpoint.pt): the resume line names the epoch the trial's
    report log has for the checkpoint Train restores, not "from epoch 1"."""
    from sweeps.protocol import CLOCK_KEY
    from sweeps.resume.notes import continues_from
    from sweeps.trial import report_log

    run = _run(tmp_path, epochs=(1, 2, 3))
    snapshot = json.loads((run / SNAPSHOT).read_text())
    for epoch, result in enumerate(snapshot["checkpoint_results"], start=1):
        own = run / f"checkpoint_2026-11-27_06-37-0{epoch}.000000"
        (run / result["checkpoint_dir_name"]).rename(own)
        (own / CHECKPOINT_FILE).rename(own / "model.pt")
        result["checkpoint_dir_name"] = own.name
        report_log.append(run, {"epoch": epoch - 1, CLOCK_KEY: epoch}, n=epoch,
                          checkpoint=str(own))  # a 0-based loop: the clock is epoch + 1
    snapshot["latest_checkpoint_result"] = snapshot["checkpoint_results"][-1]
    (run / SNAPSHOT).write_text(json.dumps(snapshot))
    report_log.append(run, {"epoch": 3, CLOCK_KEY: 4}, n=4, checkpoint=None)  # not restored
    assert checkpoint_epochs(run) == []
    assert continues_from(run) == "abc123 after epoch 3"
