"""``python -m bench.gpu``: its sampling of ``nvidia-smi`` and its arithmetic (fast, against a
stand-in ``nvidia-smi`` on PATH), and one run of it on CPUs (``--cpu``, slow): sweeps' default
side in its own process and Ray instance. The plain-Ray side is the docs' Tune + TorchTrainer
pattern that ``tests/integration/test_bench.py`` runs through ``bench.overhead`` (its own
run here would add about 20 s to the slow layer). The GPU figures come from running it on a
GPU machine (docs/development.md#on-a-gpu)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from bench import gpu
from tests.conftest import ROOT

FAKE_SMI = """#!/bin/sh
case "$1" in
  -L) echo "GPU 0: Stand-in (UUID: GPU-0)"; echo "GPU 1: Stand-in (UUID: GPU-1)";;
  *) i=0; while true; do i=$((i + 1)); echo "$((i % 2 * 90)), $((1000 + i))"; echo "0, 7"; \
sleep 0.02; done;;
esac
"""


@pytest.fixture
def fake_smi(tmp_path, monkeypatch) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")


def test_the_sampler_reads_one_row_per_gpu_per_sample(fake_smi) -> None:
    with gpu.GpuSampler(period_s=0.02) as sampler:
        time.sleep(0.5)
    rows = list(sampler.samples)
    assert len(rows) >= 5
    assert all(len(util) == len(mem) == 2 for _, util, mem in rows)  # 2 GPUs per sample
    summary = sampler.summary()
    # Every other sample has GPU 0 at 90 %, GPU 1 always idle: busy is "any GPU above 0".
    assert summary["gpu_busy"] == pytest.approx(0.5, abs=0.25)
    assert summary["gpu_util_mean"] == pytest.approx(22.5, abs=12)
    assert summary["gpu_mem_peak_mib"] == max(max(m) for _, _, m in rows) > 1000


def test_no_nvidia_smi_means_no_samples(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with gpu.GpuSampler() as sampler:
        pass
    assert sampler.summary() == {"samples": 0, "gpu_busy": None, "gpu_util_mean": None,
                                 "gpu_mem_peak_mib": None}
    assert gpu._gpu_count() == 0


def test_the_table_compares_each_side_with_plain_ray_at_the_same_gpus_per_trial() -> None:
    side = {"wall_s": 40.0, "completed": 4, "overhead_per_trial_s": 9.0, "gpu_busy": 0.5,
            "gpu_util_mean": 30.0, "gpu_mem_peak_mib": 3000.0}
    table = gpu.format_table({"median": {"plain/1": {**side, "wall_s": 160.0},
                                         "default/1": side,
                                         "packed/1": {**side, "overhead_per_trial_s": None}}})
    lines = table.splitlines()
    assert lines[1].split()[-1] == "1.00" and lines[2].split()[-1] == "0.25"
    assert lines[3].split()[3] == "-"  # packed trials overlap: no overhead per trial


def test_a_gpu_run_is_refused_where_there_is_no_gpu(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nexit 9\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    run = subprocess.run([sys.executable, "-m", "bench.gpu"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 2
    assert "no GPU visible (nvidia-smi -L lists none); --cpu runs the smoke check" in run.stderr


@pytest.mark.slow
def test_bench_gpu_on_cpus_runs_a_sweep_in_its_own_process(tmp_path) -> None:
    import ray

    out = tmp_path / "gpu.json"
    run = subprocess.run(
        [sys.executable, "-m", "bench.gpu", "--cpu", "--trials", "1", "--epochs", "2",
         "--images", "64", "--batch-size", "32", "--width", "4", "--sides", "default",
         "--cap-s", "120", "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
        timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert list(result["median"]) == ["default/1"]
    for side in result["median"].values():
        assert side["completed"] == 1
        assert side["wall_s"] > side["first_report_s"] > 0 and side["tail_s"] >= 0
        assert side["wall_s"] > side["training_s"] > 0
        assert side["gpu_busy"] is None  # nothing sampled without nvidia-smi
    assert result["machine"]["gpus"] == [] and result["spec"]["cpu"] is True
    assert not ray.is_initialized()
