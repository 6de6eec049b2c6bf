"""A trial out of GPU memory (sweeps.loop.gpu_memory) on a CPU, without Ray: the loop raises
torch's own ``OutOfMemoryError`` as CUDA's caching allocator would; what the sweep does next
(note it, never rerun the loop, end the trial with its reason instead of raising, fail it in the
scheduler) is the same code a GPU runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from sweeps.loop import gpu_memory
from sweeps.protocol import CLOCK_KEY, ERROR_KEY
from sweeps.trial.clock import TrialClock
from sweeps.trial.plan import _EXAMPLE, TrialPlan

OOM_TEXT = ("CUDA out of memory. Tried to allocate 9.09 TiB. GPU 0 has a total capacity of "
            "139.81 GiB of which 139.20 GiB is free. Including non-PyTorch memory, this process "
            "has 610.00 MiB memory in use.")


def _chained() -> Exception:
    try:
        try:
            raise torch.cuda.OutOfMemoryError(OOM_TEXT)
        except RuntimeError as inner:
            raise ValueError("the loop wrapped it") from inner
    except ValueError as outer:
        return outer


@pytest.mark.parametrize(
    ("error", "expected"),
    [(torch.cuda.OutOfMemoryError(OOM_TEXT), True),
     (torch.OutOfMemoryError("CUDA out of memory."), True),
     (RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be asynchronously "
                   "reported"), True),
     (_chained(), True),
     (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                   "memory"), False),  # host memory: not the GPU's
     (MemoryError(), False),
     (ValueError("out of memory"), False),
     (RuntimeError("NCCL error: Duplicate GPU detected"), False)],
)
def test_what_counts_as_out_of_gpu_memory(error: BaseException, expected: bool) -> None:
    assert gpu_memory.is_out_of_memory(error) is expected


CALLS: list[str] = []


def oom_loop(config: dict) -> None:  # trainables for the plans below
    CALLS.append("oom")
    raise torch.cuda.OutOfMemoryError(OOM_TEXT)


def value_error_loop(config: dict) -> None:
    CALLS.append("value")
    raise ValueError("a bug, not memory")


def _plan(tmp_path: Path, trainable: str, **changes) -> TrialPlan:
    return TrialPlan(**{**_EXAMPLE, "trainable": f"{__name__}:{trainable}",
                        "train_storage": str(tmp_path / "train"), "max_failures": 3, **changes})


def _run_inline(plan: TrialPlan, tmp_path: Path) -> Path:
    from sweeps.trial.backends.inline import run_inline

    run_dir = tmp_path / "train" / "t1"
    CALLS.clear()
    run_inline(plan, "t1", run_dir, {}, TrialClock("epoch", str(run_dir)))
    return run_dir


def test_the_inline_loop_is_not_rerun_after_running_out(tmp_path: Path) -> None:
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 9.09 TiB"):
        _run_inline(_plan(tmp_path, "oom_loop"), tmp_path)
    assert CALLS == ["oom"]  # trial.max_failures=3 did not rerun it
    assert gpu_memory.noted(tmp_path / "train" / "t1") == {"rank": 0, "error": OOM_TEXT}


def test_any_other_error_is_rerun_up_to_max_failures(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="a bug"):
        _run_inline(_plan(tmp_path, "value_error_loop"), tmp_path)
    assert CALLS == ["value"] * 4
    assert gpu_memory.noted(tmp_path / "train" / "t1") is None


def test_a_restarted_worker_raises_the_noted_error_before_calling_the_loop(
        tmp_path: Path) -> None:
    """What a Train run's worker-group restart (trial.max_failures) meets: run_loop raises at
    once, the loop is not called again; a new attempt of the trial (cleared) runs it."""
    from sweeps._ray.train_fn import serving
    from sweeps.loop.worker import loop_entry

    plan = _plan(tmp_path, "oom_loop")
    entry = loop_entry(oom_loop, plan.context("t1"))
    CALLS.clear()
    with serving(name="t1", report=lambda *a, **k: None, get_checkpoint=lambda: None,
                 reported=list,
                 datasets={}):
        with pytest.raises(torch.OutOfMemoryError, match="9.09 TiB. GPU 0"):
            entry({})
        with pytest.raises(torch.OutOfMemoryError, match="noted before this restart"):
            entry({})
        assert CALLS == ["oom"]
        gpu_memory.clear(plan.context("t1").run_dir)
        with pytest.raises(torch.OutOfMemoryError, match="9.09 TiB. GPU 0"):
            entry({})
    assert CALLS == ["oom", "oom"]


@pytest.mark.parametrize(
    ("gpu", "fragments", "absent"),
    [(0.25, ["out of GPU memory (rank 1): CUDA out of memory. Tried to allocate 9.09 TiB.",
             "Not retried", "(scaling.gpus_per_worker=0.25): the other trials' memory"], None),
     (1.0, ["out of GPU memory (rank 1)", "Not retried"], "gpus_per_worker"),
     (None, ["out of GPU memory (rank 1)"], "gpus_per_worker")],
)
def test_the_trial_ends_with_its_reason_and_does_not_raise(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gpu: float | None,
        fragments: list[str], absent: str | None) -> None:
    import ray.tune

    from sweeps.trial.driver import end_out_of_memory

    handed: list[dict] = []
    monkeypatch.setattr(ray.tune, "report", lambda metrics, **_: handed.append(metrics))
    resources = {"CPU": 1.0, **({"GPU": gpu} if gpu is not None else {})}
    plan = _plan(tmp_path, "oom_loop", worker_resources=resources)
    run_dir = tmp_path / "train" / "t1"
    gpu_memory.note(run_dir, 1, torch.cuda.OutOfMemoryError(OOM_TEXT))
    end_out_of_memory(plan, run_dir)
    assert len(handed) == 1 and set(handed[0]) == {ERROR_KEY}
    text = handed[0][ERROR_KEY]
    assert "\n" not in text and len(text) < 500  # MLflow's sweeps.error keeps 500 characters
    for fragment in fragments:
        assert fragment in text, text
    assert absent is None or absent not in text


@pytest.mark.parametrize("kind", ["asha", "fifo"])
def test_the_scheduler_fails_the_trial_with_that_reason(tmp_path: Path, kind: str) -> None:
    from sweeps.search.outcome import Objective
    from sweeps.search.schedulers import ResumableASHA, ResumableFIFO, ended_trials, verdicts

    objective = Objective("val_acc", "max", 9)
    scheduler = (ResumableASHA(tmp_path, objective, grace_period=1, reduction_factor=3)
                 if kind == "asha" else ResumableFIFO(tmp_path, objective))

    class Trial:
        trial_id, last_result = "t1", {}

    trial = Trial()
    scheduler.on_trial_add(None, trial)
    assert scheduler.on_trial_result(None, trial, {CLOCK_KEY: 1, "val_acc": 0.5}) == "CONTINUE"
    reason = "out of GPU memory (rank 0): CUDA out of memory. Not retried: ..."
    trial.last_result = {ERROR_KEY: reason}
    assert scheduler.on_trial_result(None, trial, trial.last_result) == "STOP"
    scheduler.on_trial_complete(None, trial, trial.last_result)
    verdict = verdicts(tmp_path)["t1"]
    assert verdict.error == reason
    assert objective.outcome(1, verdict, errored=False) == "error"
    assert "t1" in ended_trials(tmp_path)  # a resumed sweep does not run it again


def test_the_lowest_rank_that_ran_out_is_named_rank_2_before_rank_10(tmp_path: Path) -> None:
    for rank in (10, 2, 11):
        gpu_memory.note(tmp_path, rank, RuntimeError(f"CUDA out of memory on rank {rank}"))
    assert gpu_memory.noted(tmp_path) == {"rank": 2, "error": "CUDA out of memory on rank 2"}
