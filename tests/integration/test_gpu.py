"""GPU trials: nccl DDP with use_gpu auto-detected. Skipped where no CUDA GPU is visible."""

from __future__ import annotations

import pytest
import torch

from sweeps import load_model, prepare, run_sweep
from trainables.digits import evaluate, load_split

pytestmark = [pytest.mark.slow, pytest.mark.gpu]


def test_gpu_sweep_detects_gpus_and_trains_with_nccl(tmp_path, small_config) -> None:
    workers = min(2, torch.cuda.device_count())
    cfg = small_config(f"scaling.num_workers={workers}", "scheduler.max_t=3")
    prepared = prepare(cfg)
    assert prepared.resources.use_gpu, "scaling=auto picks the GPU when there is one"
    result = run_sweep(cfg, prepared)
    assert set(result.summary.table["status"]) <= {"completed", "stopped"}
    best = result.best
    model = load_model(best["checkpoint"])  # saved from GPU, loads on CPU
    _, _, x_va, y_va = load_split()
    _, correct, count = evaluate(model, torch.from_numpy(x_va), torch.from_numpy(y_va))
    assert correct / count == pytest.approx(best["value"], abs=1e-9)
