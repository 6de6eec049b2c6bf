"""A trial that runs out of GPU memory ends as an error at once, and is not run again.

    python -m sweeps +experiment=digits scaling.num_workers=1 scaling.gpus_per_worker=0.25
    # trial 3f2a1b0c FAILED: out of GPU memory (rank 0): CUDA out of memory. Tried to allocate ...

A CUDA out-of-memory error (``torch.OutOfMemoryError``, or the CUDA runtime's "out of memory") that
escapes the loop is noted by ``run_loop`` on that worker (``sweeps.loop.worker``) in the trial's run
directory, one file per rank, and raised on. For the rest of that attempt of the trial:

* the inline executor does not rerun the loop (``trial.max_failures``);
* a Train run's worker-group restart (``trial.max_failures``, Ray Train's own) calls the loop
  again, and ``run_loop`` raises the noted error at once, before the loop loads or allocates
  anything;
* the trial driver does not raise (Tune would retry it, ``trial.max_retries``): it reports the
  reason to Tune under ``ERROR_KEY``, and the sweep's scheduler stops the trial with that reason
  as its verdict (``sweeps.search.schedulers``), so the summary, the console and MLflow
  (``sweeps.error``, run FAILED) show it as for any failed trial. The other trials go on.

Why it is not retried: an out-of-memory error follows from the trial's hyperparameters (batch
size, width, sequence length) far more often than from chance, so a retry fails the same after
holding the GPU share again. Tune's and Train's public ``FailureConfig`` count every error alike;
a scheduler's ``STOP`` (Tune's public ``TrialScheduler`` API, as for a trial that never reports
its metric) ends one trial without a retry, also under ``trial.max_retries=-1``. Optuna records
it as pruned, which TPE counts among the worst (a raised trial is FAIL, which TPE leaves out).

On a shared GPU (``scaling.gpus_per_worker`` below 1) the other trials' memory counts too (Ray
divides the GPU's count, not its memory): the reason says so and how to give each trial more. A
resumed sweep does not run the trial again (it ended); a new trial with other values does run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.files import write_atomic
from sweeps.protocol import OUT_OF_MEMORY_FILE, run_file

__all__ = ["is_out_of_memory", "note", "noted", "clear", "raise_noted", "reason",
           "release_cached_memory"]

_CUDA_RUNTIME_OOM = "CUDA error: out of memory"  # cudaErrorMemoryAllocation outside the allocator


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` (or an error it was raised from) is CUDA running out of memory.

    Example:
        >>> import torch
        >>> is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to ..."))
        True
        >>> is_out_of_memory(RuntimeError("CUDA error: out of memory")), is_out_of_memory(
        ...     MemoryError()), is_out_of_memory(ValueError("out of memory"))
        (True, False, False)
    """
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(error, torch.OutOfMemoryError):
            return True
        if isinstance(error, RuntimeError) and _CUDA_RUNTIME_OOM in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def _files(run_dir: str | Path) -> list[Path]:
    """The notes in ``run_dir``, on disk or on an object store (``sweeps.files``)."""
    prefix, _, suffix = OUT_OF_MEMORY_FILE.partition("{rank}")
    names = [n for n in files.listdir(run_dir) if n.startswith(prefix) and n.endswith(suffix)]
    return [Path(run_dir) / n for n in sorted(names, key=len)]  # by rank: 2 before 10


def note(run_dir: str | Path, rank: int, exc: BaseException) -> None:
    """Note in the run directory that worker ``rank`` ran out of GPU memory (one file per
    rank, so two ranks failing together never write the same file)."""
    first = next((ln for ln in str(exc).strip().splitlines() if ln.strip()), type(exc).__name__)
    files.make_dirs(run_dir)
    write_atomic(run_file(run_dir, OUT_OF_MEMORY_FILE.format(rank=rank)),
                 json.dumps({"rank": rank, "error": first}))


def noted(run_dir: str | Path) -> dict[str, Any] | None:
    """The lowest rank's note (``{"rank": ..., "error": ...}``), or None when none ran out.

    Example:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> noted(run) is None
        True
        >>> note(run, 1, RuntimeError("CUDA error: out of memory")); noted(run)["rank"]
        1
    """
    for path in _files(run_dir):
        with contextlib.suppress(OSError, ValueError):  # written atomically: a hand edit only
            return json.loads(files.read_text(path))
    return None


def clear(run_dir: str | Path) -> None:
    """Forget the notes: a new attempt of the trial (its driver started again) runs the loop."""
    for path in _files(run_dir):
        files.remove_file(path)


def raise_noted(run_dir: str | Path) -> None:
    """In a worker about to call the loop: raise the noted error, if this attempt has one."""
    found = noted(run_dir)
    if found is None:
        return
    import torch

    raise torch.OutOfMemoryError(f"{found['error']} (rank {found['rank']}, noted before this "
                                 "restart; the loop is not run again)")


def reason(found: dict[str, Any], gpus_per_worker: float | None) -> str:
    """The one-line reason the trial ends with: the error, why it is not retried, the fix.

    Example:
        >>> print(reason({"rank": 0, "error": "CUDA out of memory. Tried to allocate 9.09 TiB. "
        ...               "GPU 0 has a total capacity of 79 GiB of which 78 GiB is free. "
        ...               "Including non-PyTorch memory, ..."}, 0.25))
        out of GPU memory (rank 0): CUDA out of memory. Tried to allocate 9.09 TiB. GPU 0 has a
        total capacity of 79 GiB of which 78 GiB is free. Not retried: the same hyperparameters
        allocate the same again; use less memory per trial (batch size, model size) or leave
        such values out of the search space. Its GPU is shared (scaling.gpus_per_worker=0.25):
        the other trials' memory counts too; raise scaling.gpus_per_worker to give each more
    """
    error = ". ".join(str(found.get("error", "")).split(". ")[:3]).strip()
    error = (error if error.endswith(".") else error + ".")[:240]
    text = (f"out of GPU memory (rank {found.get('rank', '?')}): {error} Not retried: the same "
            "hyperparameters allocate the same again; use less memory per trial (batch size, "
            "model size) or leave such values out of the search space.")
    if gpus_per_worker is not None and gpus_per_worker < 1:
        text += (f" Its GPU is shared (scaling.gpus_per_worker={gpus_per_worker:g}): the other "
                 "trials' memory counts too; raise scaling.gpus_per_worker to give each more")
    return text


def release_cached_memory() -> None:
    """Give the GPU memory this process's caching allocator holds back to the device (an inline
    trial's process may serve the next trial, and its GPU may be shared)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    gc.collect()
    torch.cuda.empty_cache()
