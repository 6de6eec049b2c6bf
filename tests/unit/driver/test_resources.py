"""Resource planning: GPU auto-detect, CPU shares, concurrency, and clusters that never fit."""

from __future__ import annotations

import pytest

from sweeps.config.schema import ScalingSection
from sweeps.driver.resources import plan_resources
from sweeps.errors import ClusterFitError, ConfigError


@pytest.mark.parametrize(
    ("scaling", "cpus", "gpus", "limit", "expected"),
    [
        # (use_gpu, cpus_per_worker, gpus_per_worker, max_concurrent_trials, trials_that_fit)
        (dict(num_workers=2), 2, 0, None, (False, 1.0, 0.0, 1, 1)),
        (dict(num_workers=1), 2, 0, None, (False, 1.0, 0.0, 2, 2)),
        (dict(num_workers=3), 2, 0, None, (False, 0.66, 0.0, 1, 1)),
        (dict(num_workers=2), 16, 0, None, (False, 1.0, 0.0, 8, 8)),
        (dict(num_workers=2), 16, 0, 3, (False, 1.0, 0.0, 3, 8)),
        (dict(num_workers=2), 2, 0, 4, (False, 1.0, 0.0, 4, 1)),  # explicit limit wins
        (dict(num_workers=2, cpus_per_worker=0.5), 2, 0, None, (False, 0.5, 0.0, 2, 2)),
        (dict(num_workers=2), 16, 4, None, (True, 1.0, 1.0, 2, 2)),
        (dict(num_workers=2, use_gpu=False), 16, 4, None, (False, 1.0, 0.0, 8, 8)),
        (dict(num_workers=2, gpus_per_worker=0.5, backend="gloo"), 16, 4, None,
         (True, 1.0, 0.5, 4, 4)),
    ],
)
def test_plan(scaling: dict, cpus: float, gpus: float, limit, expected) -> None:
    plan = plan_resources(ScalingSection(**scaling), cpus, gpus, limit)
    got = (plan.use_gpu, plan.cpus_per_worker, plan.gpus_per_worker,
           plan.max_concurrent_trials, plan.trials_that_fit)
    assert got == expected
    assert plan.num_workers * plan.cpus_per_worker <= cpus


@pytest.mark.parametrize(
    ("scaling", "cpus", "gpus", "fragment"),
    [
        (dict(num_workers=4, cpus_per_worker=1), 2, 0, "set scaling.num_workers=2"),
        (dict(num_workers=40), 2, 0, "under 0.1 each"),
        (dict(num_workers=2, use_gpu=True), 8, 0, "set scaling.use_gpu=false"),
        (dict(num_workers=4, use_gpu=True), 8, 2, "set scaling.num_workers=2"),
    ],
)
def test_never_fits(scaling: dict, cpus: float, gpus: float, fragment: str) -> None:
    with pytest.raises(ClusterFitError) as info:
        plan_resources(ScalingSection(**scaling), cpus, gpus)
    assert str(info.value).startswith("scaling.num_workers: ")
    assert fragment in str(info.value)


def test_worker_resources_name_gpu_only_when_used() -> None:
    assert plan_resources(ScalingSection(num_workers=1), 2, 0).worker_resources == {"CPU": 1.0}
    gpu = plan_resources(ScalingSection(num_workers=1), 2, 1).worker_resources
    assert gpu == {"CPU": 1.0, "GPU": 1.0}


@pytest.mark.parametrize(("workers", "executor", "inline"),
                         [(1, "auto", True), (2, "auto", True), (1, "train", False),
                          (2, "train", False), (1, "inline", True), (2, "inline", True)])
def test_executor_is_resolved_and_shown(workers: int, executor: str, inline: bool) -> None:
    plan = plan_resources(ScalingSection(num_workers=workers), 2, 0, None, executor)
    assert (plan.executor == "inline") is inline
    text = plan.describe()
    assert ("inline: the loop runs in the trial's own process" in text) is (inline and
                                                                           workers == 1)
    assert ("inline: rank 0 runs in the trial's own process, ranks 1.. in peer processes"
            in text) is (inline and workers == 2)
    assert ("gloo" in text) is not (inline and workers == 1)


@pytest.mark.parametrize(("gpus", "datasets", "cluster"),
                         [(2, False, False), (0, True, False), (0, False, True)])
def test_auto_keeps_train_runs_for_several_workers_on_gpus_datasets_or_a_cluster(
        gpus: int, datasets: bool, cluster: bool) -> None:
    plan = plan_resources(ScalingSection(num_workers=2), 4, gpus, None, "auto",
                          datasets=datasets, cluster=cluster)
    assert plan.executor == "train"
    one = plan_resources(ScalingSection(num_workers=1), 4, gpus, None, "auto",
                         datasets=datasets, cluster=cluster)
    assert one.executor == "inline"  # a world of one needs no peer: inline everywhere


@pytest.mark.parametrize("backend", [None, "gloo"])
def test_inline_ranks_on_gpus_are_refused_with_the_way_out(backend: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        plan_resources(ScalingSection(num_workers=2, backend=backend), 4, 2, None, "inline")
    assert "trial.executor" in str(info.value) and "trial.executor=auto" in str(info.value)
    cpu = plan_resources(ScalingSection(num_workers=2, use_gpu=False), 4, 2, None, "inline")
    assert cpu.executor == "inline" and not cpu.use_gpu


@pytest.mark.parametrize(
    ("scaling", "start", "now", "fits"),
    [
        # (cluster CPUs/GPUs at the sweep's start, CPUs/GPUs now): trials of that plan fitting now
        (dict(num_workers=2), (4, 0), (6, 0), 3),  # a node of 2 CPUs joined
        (dict(num_workers=2), (4, 0), (2, 0), 1),  # one was lost
        (dict(num_workers=2), (4, 0), (1, 0), 0),  # not even one trial fits now
        (dict(num_workers=2), (4, 0), (5.5, 0), 2),
        (dict(num_workers=3), (2, 0), (4, 0), 2),  # 0.66 CPU each, fixed at the start
        (dict(num_workers=2, gpus_per_worker=0.5, backend="gloo"), (16, 4), (16, 2), 2),  # GPUs
        (dict(num_workers=2, gpus_per_worker=0.5, backend="gloo"), (16, 4), (2, 8), 1),  # CPUs
        (dict(num_workers=2, use_gpu=False), (16, 4), (4, 0), 2),  # GPUs not asked for
    ],
)
def test_fits_in_a_cluster_that_changed_keeps_the_per_worker_shares(
        scaling: dict, start: tuple, now: tuple, fits: int) -> None:
    plan = plan_resources(ScalingSection(**scaling), *start)
    assert plan.fits_in(*now) == fits
