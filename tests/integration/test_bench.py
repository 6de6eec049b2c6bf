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
    # The ~1 s row comes from the overhead runs, then one measured size.
    assert [r["trial_training_s"] for r in result["fraction"]] == [0.1, 0.5]
    assert all(0 < r[side]["fraction"] < 1 for r in result["fraction"]
               for side in ("plain", "sweeps"))
    search = result["search_efficiency"]
    rows = search["rows"]
    assert list(rows) == ["random (full budget)", "sweeps TPE+ASHA", "Hydra Optuna sweeper"]
    full_budget = search["trials"] * search["epochs"]
    # Random and Hydra's sweeper prune nothing: every trial trained every epoch.
    assert rows["random (full budget)"]["epochs_total"] == full_budget
    assert rows["Hydra Optuna sweeper"]["epochs_total"] == full_budget
    assert rows["random (full budget)"]["best"] == search["target_val_acc"]
    assert 1 <= rows["random (full budget)"]["epochs_to_target"] <= full_budget
    assert 1 <= rows["sweeps TPE+ASHA"]["epochs_total"] <= full_budget
    assert not ray.is_initialized()
