"""GPU trials: nccl DDP with use_gpu auto-detected; GPUs shared by trials (a 0.25 share each,
ranks of one trial refused under nccl and trained with gloo, a trial out of GPU memory failing
alone). Skipped where no CUDA GPU is visible (tests/conftest.py).

    pytest -m gpu tests/integration/test_gpu.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from sweeps import ConfigError, load_model, prepare, run_sweep
from tests.integration.memory_loop import memory_sweep
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


# GPUs shared by trials (issue 14). These start their own Ray instance (run_sweep) sized by
# ray.num_cpus / ray.num_gpus, so the packing does not depend on how many GPUs the machine has.


@pytest.fixture
def workers_import_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """The instance run_sweep starts, and its workers, import tests.integration.memory_loop."""
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p))


def _probes(sweep_dir: Path, trial_id: str) -> list[dict]:
    run = sweep_dir / "train" / trial_id
    return [json.loads(p.read_text()) for p in sorted(run.glob("probe.rank*.json"))]


def _calls(sweep_dir: Path, trial_id: str) -> list[int]:
    run = sweep_dir / "train" / trial_id
    return [len(p.read_text().split()) for p in sorted(run.glob("calls.rank*.txt"))]


@pytest.mark.parametrize("executor", ["auto", "train"], ids=["inline", "train-run"])
def test_four_one_worker_trials_share_one_gpu_at_once(tmp_path, small_config,
                                                      workers_import_tests,
                                                      executor: str) -> None:
    cfg = small_config(*memory_sweep([0], copies=4, peers=4, rendezvous=tmp_path / "rv"),
                       "scaling.num_workers=1", "scaling.gpus_per_worker=0.25",
                       f"trial.executor={executor}", "ray.num_cpus=4", "ray.num_gpus=1")
    prepared = prepare(cfg)
    assert (prepared.resources.trials_that_fit, prepared.resources.use_gpu) == (4, True)
    assert "4 trials share each GPU (0.25 GPU each" in prepared.resources.describe()
    result = run_sweep(cfg, prepared)
    table = result.summary.table
    assert list(table["status"]) == ["completed"] * 4, table
    probes = [_probes(result.sweep_dir, t)[0] for t in table["trial_id"]]
    # Ran at once: every trial reached the rendezvous before any left it.
    assert max(p["started"] for p in probes) < min(p["left"] for p in probes), probes
    assert [p["peers_seen"] for p in probes] == [4] * 4
    # Each saw the one GPU Ray gave its share of, as its only device, and trained on it.
    visible = {p["cuda_visible_devices"] for p in probes}
    assert len(visible) == 1 and "," not in visible.pop(), probes
    assert {(p["device"], p["model_device"]) for p in probes} == {("cuda:0", "cuda:0")}


def test_a_cpu_trial_on_a_gpu_machine_trains_on_cpu(tmp_path, small_config,
                                                   workers_import_tests) -> None:
    """Ray Train's local mode would hand the inline loop any GPU torch can see; the inline
    executor answers as a Train worker does (sweeps._ray.train_fn)."""
    cfg = small_config(*memory_sweep([0]), "scaling.num_workers=1", "scaling.use_gpu=false",
                       "ray.num_cpus=2")
    result = run_sweep(cfg)
    (trial_id,) = result.summary.table["trial_id"]
    (probe,) = _probes(result.sweep_dir, trial_id)
    assert (probe["device"], probe["model_device"]) == ("cpu", "cpu")


def test_ranks_sharing_a_gpu_are_refused_before_anything_starts(tmp_path, small_config) -> None:
    import ray

    cfg = small_config("scaling.num_workers=2", "scaling.gpus_per_worker=0.5")  # GPUs detected
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    assert str(info.value).startswith("scaling.gpus_per_worker: 0.5 lets Ray put 2 DDP ranks")
    assert str(info.value).endswith("set scaling.gpus_per_worker=1, or scaling.backend=gloo to "
                                    "train those ranks with gloo")
    assert not ray.is_initialized() and not (tmp_path / "sweep").exists()


def test_the_same_trial_trains_with_gloo_when_asked(tmp_path, small_config,
                                                    workers_import_tests) -> None:
    cfg = small_config(*memory_sweep([0]), "scaling.num_workers=2",
                       "scaling.gpus_per_worker=0.5", "scaling.backend=gloo", "ray.num_cpus=4",
                       "ray.num_gpus=1")
    result = run_sweep(cfg)
    (trial_id,) = result.summary.table["trial_id"]
    assert list(result.summary.table["status"]) == ["completed"]
    probes = _probes(result.sweep_dir, trial_id)
    assert [(p["backend"], p["world_size"]) for p in probes] == [("gloo", 2)] * 2
    assert {(p["device"], p["model_device"]) for p in probes} == {("cuda:0", "cuda:0")}
    assert len({p["cuda_visible_devices"] for p in probes}) == 1  # both ranks on one GPU


@pytest.mark.parametrize("executor", ["auto", "train"], ids=["inline", "train-run"])
def test_a_trial_out_of_gpu_memory_fails_alone(tmp_path, small_config, workers_import_tests,
                                               executor: str) -> None:
    cfg = small_config(*memory_sweep([0, 10000], copies=2), "scaling.num_workers=1",
                       "scaling.gpus_per_worker=0.25", f"trial.executor={executor}",
                       "trial.max_failures=1", "trial.max_retries=1", "ray.num_cpus=4",
                       "ray.num_gpus=1")
    result = run_sweep(cfg)
    table = result.summary.table
    failed = table[table["alloc_gib"] == 10000]
    assert list(failed["status"]) == ["error"] * 2
    assert list(table[table["alloc_gib"] == 0]["status"]) == ["completed"] * 2
    for trial_id in failed["trial_id"]:
        reason = result.failed[trial_id]
        assert "CUDA out of memory" in reason and "out of GPU memory" in reason, reason
        assert "scaling.gpus_per_worker=0.25" in reason  # a shared GPU: the others count too
        assert _calls(result.sweep_dir, trial_id) == [1]  # not rerun, not retried
