"""Smoke test: every benchmark runs once with tiny sizes, so `python -m bench` keeps working.

Not a performance assertion (timings are the benchmarks' job, as ratios, never a test's).
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_bench_quick_runs_every_benchmark(monkeypatch) -> None:
    import ray

    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # Ray workers import bench.workload

    from bench.__main__ import run

    if ray.is_initialized():  # the benchmarks start (and stop) their own instance
        ray.shutdown()
    result = run(quick=True)
    overhead = result["overhead"]["median"]
    for side in ("plain", "sweeps"):
        assert overhead[side]["wall_s"] > overhead[side]["training_s"] > 0
    assert [r["poll_interval_s"] for r in result["report_latency"]] == [2.0, 0.1]
    assert all(r["median_s"] > 0 for r in result["report_latency"])
    assert not ray.is_initialized()
