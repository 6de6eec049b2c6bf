"""System metrics sampled in a trial's process (sweeps.loop.system_metrics), for real: psutil
on this process and a child of it, and the reports of a loop served in-process (no Ray)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

from sweeps.loop import system_metrics
from sweeps.loop.context import TrialContext
from sweeps.loop.system_metrics import Sampler, gpu_values

CPU, MEMORY = "process_cpu_utilization_percentage", "process_memory_usage_megabytes"


@pytest.mark.parametrize(("index", "used", "utilization", "expected"), [
    (0, 2_500_000_000, 87, {"gpu_0_utilization_percentage": 87.0,
                            "gpu_0_memory_usage_megabytes": 2500.0}),  # NVML: MLflow's names
    (7, 0, 0, {"gpu_7_utilization_percentage": 0.0, "gpu_7_memory_usage_megabytes": 0.0}),
])
def test_gpu_values_are_named_as_mlflow_names_them(index, used, utilization, expected) -> None:
    assert gpu_values(index, used, utilization) == expected


def test_a_sample_holds_this_process_and_its_children_at_its_time(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # a GPU "given", none here: no GPU values
    child = subprocess.Popen([sys.executable, "-c",
                              "import time; b = b'x' * 300_000_000; time.sleep(60)"])
    sent: list = []
    try:
        while psutil.Process(child.pid).memory_info().rss < 300e6:
            time.sleep(0.05)
        before = time.time()
        sampler = Sampler(0, sent.append, interval_s=60)
        own = psutil.Process().memory_info().rss / 1e6
        sampler.close()  # a loop shorter than the interval: one sample, when it ends
    finally:
        child.kill()
    ((at, values),) = sent
    assert before * 1000 - 1 <= at <= time.time() * 1000
    assert {f"system/{CPU}", f"system/{MEMORY}"} <= set(values)
    if not _cuda():  # no GPU here: none sampled, nothing raised
        assert set(values) == {f"system/{CPU}", f"system/{MEMORY}"}
    assert values[f"system/{MEMORY}"] > own + 290  # this process's and the child's
    assert values[f"system/{CPU}"] >= 0


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def test_samples_are_sent_every_interval_and_once_more_at_the_end() -> None:
    sent: list = []
    sampler = Sampler(2, sent.append, interval_s=0.2)
    try:
        x, end = np.ones((400, 400)), time.time() + 1.0
        while time.time() < end:  # busy (without the GIL, as most training is): CPU shows
            x @ x
    finally:
        sampler.close()
    count = len(sent)
    assert 3 <= count <= 7, sent  # 4 + the last on an idle machine; fewer on a loaded one
    times = [at for at, _ in sent[:-1]]
    assert all(b - a >= 190 for a, b in zip(times, times[1:], strict=False)), times
    assert all(set(v) == {f"system/rank_2/{CPU}", f"system/rank_2/{MEMORY}"} for _, v in sent)
    assert max(v[f"system/rank_2/{CPU}"] for _, v in sent) > 20  # busy: ~100 when idle
    time.sleep(0.4)
    assert len(sent) == count  # closed: no more


class Store:
    """Ray's key-value store as ``sweeps._ray.kv`` serves it (a dict: no Ray here)."""

    def __init__(self) -> None:
        self.data: dict[str, str] = {}

    def put(self, key: str, value: str) -> None:
        self.data[key] = value

    def get(self, key: str) -> str | None:
        return self.data.get(key)

    def keys(self, prefix: str) -> list[str]:
        return [k for k in self.data if k.startswith(prefix)]

    def delete(self, key: str) -> None:
        del self.data[key]


def test_a_loops_samples_go_to_the_store_and_never_into_its_reports(tmp_path,
                                                                    monkeypatch) -> None:
    """run_loop, as every backend calls it, with the per-worker API served in-process."""
    from sweeps._ray.train_fn import serving
    from sweeps.loop.worker import loop_entry

    got: list[dict] = []
    reported: list[float] = []
    store = Store()
    monkeypatch.setattr(system_metrics, "kv", store)
    monkeypatch.setattr(system_metrics, "INTERVAL_S", 0.2)

    def loop(config: dict) -> None:
        import ray.train

        for acc in (0.5, 0.6):
            ray.train.report({"acc": acc})
            time.sleep(0.3)

    for on, run in ((True, "on"), (False, "off")):
        context = TrialContext("t1", str(tmp_path / run), 3, 1, 0, "acc", "max", on)
        with serving(name="t1", report=lambda metrics, *a, **k: (
                got.append(metrics), reported.append(time.time())),
                     get_checkpoint=lambda: None, reported=list, datasets={}):
            loop_entry(loop, context)({})
    assert got == [{"acc": 0.5}, {"acc": 0.6}] * 2  # the loop's metrics, nothing added
    assert all(k.startswith(f"system/{tmp_path / 'on'}/0/") for k in store.data)
    samples = system_metrics.taken_aside(str(tmp_path / "on"))
    assert 3 <= len(samples) <= 6 and store.data == {}  # the 1st report's, every 0.2 s, the last
    assert samples[0][0] <= reported[0] * 1000  # sent before the first report went
    assert system_metrics.taken_aside(str(tmp_path / "off")) == []
    assert not [t for t in threading.enumerate() if t.name == "sweeps-system-metrics"]


@pytest.mark.gpu
def test_a_gpu_the_process_uses_is_sampled(monkeypatch) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    pytest.importorskip("pynvml", reason="GPU metrics need nvidia-ml-py, as MLflow's do")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES") or "0")
    x = torch.ones(256, 1024, 1024, device="cuda")  # 1 GiB
    sampler = Sampler(0, [].append, interval_s=60)
    values = sampler.sample()[1]
    sampler.close()
    memory = {k: v for k, v in values.items() if k.startswith("system/gpu_")
              and "memory" in k}
    assert memory and max(memory.values()) > 1000, values
    del x
