"""sweeps.files on a real S3 endpoint (moto's server, a separate process): the same calls as on
disk, with the object store's rules (whole objects, one object per appended record)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from sweeps import files
from sweeps.storage import objects, stand_in, trees, uri_of
from sweeps.storage.journal import Journal
from sweeps.trial import report_log


@pytest.fixture
def root(moto_s3) -> Path:
    """A fresh sweep directory's stand-in in the test bucket."""
    return stand_in(f"s3://{moto_s3.BUCKET}/unit/{uuid.uuid4().hex[:8]}")


def _prefix(path: Path) -> str:
    return uri_of(path).split("/", 3)[3]


def test_whole_files_land_in_the_bucket_and_read_back(root, moto_s3) -> None:
    target = root / "state" / "sweep.json"
    assert not files.exists(target) and files.listdir(root) == []
    files.write_atomic(target, '{"n": 1}')
    files.write_atomic(target, lambda f: f.write(b'{"n": 2}'))  # replaced whole
    assert files.read_text(target) == '{"n": 2}'
    assert files.is_file(target) and files.is_dir(root / "state")
    assert files.listdir(root) == ["state"]
    assert moto_s3.keys(_prefix(root)) == [_prefix(target)]
    assert not Path(target).exists(), "nothing is kept under the local stand-in"
    with pytest.raises(FileNotFoundError):
        files.read_text(root / "missing.json")


def test_appended_lines_are_one_object_each_in_order(root, moto_s3) -> None:
    log = root / "train" / "t1" / "reports.jsonl"
    for n in range(1, 13):
        files.append_line(log, json.dumps({"n": n}))
    assert [json.loads(line)["n"] for line in files.read_lines(log)] == list(range(1, 13))
    keys = moto_s3.keys(_prefix(log))
    assert len(keys) == 12 and all(k.startswith(_prefix(log) + objects.RECORDS + "/")
                                   for k in keys)


def test_a_new_writer_continues_after_the_records_it_finds(root) -> None:
    """A resumed sweep (another process, another machine) appends after what is there."""
    log = root / "state" / "scheduler.jsonl"
    files.append_line(log, "a")
    files.append_line(log, "b")
    objects._next_seq.clear()  # as in a fresh process
    objects._WRITER = "other123"
    files.append_line(log, "c")
    assert files.read_lines(log) == ["a", "b", "c"]


def test_journal_on_s3_applies_each_record_once_across_a_restart(root) -> None:
    journal = Journal(root / "tracking")
    for i in range(5):
        journal.append({"op": "metrics", "i": i})
    assert [r["i"] for _, r in journal.pending()] == [0, 1, 2, 3, 4]
    journal.mark_applied(3)
    journal.append({"op": "metrics", "i": 5})
    assert [i for i, _ in journal.pending()] == [3, 4, 5]
    objects._next_seq.clear()
    again = Journal(root / "tracking")  # the resumed sweep's driver
    assert [r["i"] for _, r in again.pending()] == [3, 4, 5]
    assert [r["i"] for r in again.records()] == [0, 1, 2, 3, 4, 5]


def test_report_log_on_s3(root) -> None:
    run = root / "train" / "t2"
    report_log.append(run, {"val_acc": 0.5, "sweeps_epoch": 1}, 1, str(run / "checkpoint_a"))
    report_log.append(run, {"val_acc": 0.6, "sweeps_epoch": 2}, 2, None)
    assert [r["n"] for r in report_log.records(run)] == [1, 2]


def test_directories_move_copy_and_go(root, tmp_path) -> None:
    source = tmp_path / "ckpt"
    source.mkdir()
    (source / "checkpoint.pt").write_bytes(b"PK\x05\x06" + b"\0" * 18)
    (source / "extra").mkdir()
    (source / "extra" / "notes.txt").write_text("x")
    target = root / "train" / "t3" / "checkpoint_epoch_0001"
    trees.put_tree(source, target)
    assert files.listdir(target) == ["checkpoint.pt", "extra"]
    trees.put_tree(source / "extra", target)  # replaced, not merged
    assert files.listdir(target) == ["notes.txt"]
    aside = target.with_name(target.name + ".corrupt")
    trees.move(target, aside)
    assert not files.exists(target) and files.listdir(aside) == ["notes.txt"]
    with trees.local_copy(aside) as local:
        assert (local / "notes.txt").read_text() == "x"
    assert not local.exists(), "the download is removed after use"
    trees.remove_tree(aside)
    assert files.listdir(root / "train" / "t3") == []


def test_a_local_path_is_untouched_by_the_store(tmp_path) -> None:
    path = tmp_path / "a.json"
    files.write_atomic(path, "1")
    assert files.shown(path) == path and files.read_text(path) == "1"


def test_out_of_memory_notes_on_s3(root) -> None:
    """A Train worker on any node notes its OOM where the trial driver reads it."""
    from sweeps.loop import gpu_memory

    run = root / "train" / "t4"
    assert gpu_memory.noted(run) is None
    gpu_memory.note(run, 1, RuntimeError("CUDA error: out of memory"))
    assert gpu_memory.noted(run) == {"rank": 1, "error": "CUDA error: out of memory"}
    gpu_memory.clear(run)
    assert gpu_memory.noted(run) is None


def test_a_refused_upload_raises_and_leaves_no_object(tmp_path, moto_s3) -> None:
    """pyarrow's ``copy_files`` returned normally here: a checkpoint's files that never
    reached the bucket were taken as written."""
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "model.pt").write_bytes(b"m" * 2000)
    (checkpoint / "state.json").write_text("{}")
    prefix = f"unit/{uuid.uuid4().hex[:8]}/checkpoint_000001"
    with moto_s3.refusing_uploads() as refusing:
        with pytest.raises(OSError, match="uploading part"):
            objects.upload_tree(str(checkpoint), refusing.filesystem,
                                f"{moto_s3.BUCKET}/{prefix}")
        assert refusing.refused >= 1
    assert moto_s3.keys(prefix) == []
    objects.upload_tree(str(checkpoint), moto_s3.filesystem(), f"{moto_s3.BUCKET}/{prefix}")
    assert sorted(moto_s3.keys(prefix)) == [f"{prefix}/model.pt", f"{prefix}/state.json"]


def test_a_tree_upload_follows_symlinked_folders_and_a_missing_source_raises(
        tmp_path, moto_s3) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.txt").write_text("a")
    (tree / "sub" / "b.txt").write_text("b")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "c.txt").write_text("c")
    (tree / "linked").symlink_to(tmp_path / "elsewhere")
    prefix = f"unit/{uuid.uuid4().hex[:8]}"
    objects.upload_tree(str(tree), moto_s3.filesystem(), f"{moto_s3.BUCKET}/{prefix}")
    assert sorted(moto_s3.keys(prefix)) == [
        f"{prefix}/{name}" for name in ("a.txt", "linked/c.txt", "sub/b.txt")]
    with pytest.raises(FileNotFoundError):
        objects.upload_tree(str(tmp_path / "gone"), moto_s3.filesystem(),
                            f"{moto_s3.BUCKET}/{prefix}/gone")


def test_a_write_that_fails_midway_publishes_nothing(tmp_path, moto_s3, monkeypatch) -> None:
    """Arrow completes an unclosed upload when its stream is destroyed: a truncated object
    would appear at the key. The local file's second read fails (a disk error)."""
    import builtins
    import gc

    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * (3 * objects.UPLOAD_CHUNK // 2))
    key = f"unit/{uuid.uuid4().hex[:8]}/big.bin"
    real_open = builtins.open

    class Torn:
        def __init__(self, f: Any) -> None:
            self.f, self.reads = f, 0

        def __enter__(self) -> Torn:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def read(self, n: int) -> bytes:
            self.reads += 1
            if self.reads == 2:
                raise OSError("Input/output error")
            return self.f.read(n)

    def torn_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        f = real_open(path, *args, **kwargs)
        return Torn(f) if str(path) == str(big) else f

    monkeypatch.setattr(builtins, "open", torn_open)
    with pytest.raises(OSError, match="Input/output error"):
        objects.upload_file(moto_s3.filesystem(), str(big), f"{moto_s3.BUCKET}/{key}")
    monkeypatch.undo()
    gc.collect()
    assert moto_s3.keys(key) == []


def test_a_sweeps_best_on_a_store_named_with_endpoint_options(moto_s3, tmp_path) -> None:
    """best.json names the best checkpoint by its URI, the sweep.dir's options included (the
    summary writes it so); best_checkpoint hands that URI back, also after the sweep directory
    was copied elsewhere (looked up under the sweep's own run), and load_best's download of it
    is named as the checkpoint."""
    from sweeps.layout import SweepLayout
    from sweeps.report.best import best_checkpoint
    from sweeps.storage.location import sweep_root

    endpoint = moto_s3.endpoint.partition("://")[2]
    prefix = f"s3://{moto_s3.BUCKET}/unit/{uuid.uuid4().hex[:8]}"
    uri = f"{prefix}/sweep?endpoint_override={endpoint}&scheme=http"
    root = sweep_root(uri)
    checkpoint = root / "train" / "t1" / "checkpoint_epoch_0002"
    files.write_atomic(checkpoint / "model.bin", b"w")
    for named in (uri_of(checkpoint),  # as written, and as a copy of the sweep elsewhere has it
                  f"{prefix}/old/train/t1/checkpoint_epoch_0002?endpoint_override={endpoint}"
                  "&scheme=http"):
        files.write_atomic(SweepLayout(root).best, json.dumps({"trial_id": "t1",
                                                              "checkpoint": named}))
        assert best_checkpoint(uri) == uri_of(checkpoint) == (
            f"{prefix}/sweep/train/t1/checkpoint_epoch_0002?endpoint_override={endpoint}"
            "&scheme=http")
    local = trees.kept_local(sweep_root(best_checkpoint(uri)), prefix="sweeps-test-")
    assert local.name == "checkpoint_epoch_0002" and (local / "model.bin").read_bytes() == b"w"
