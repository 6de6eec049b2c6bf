"""GPUs shared by trials (issue 14): how many trials a GPU packs, the multi-worker trials nccl
cannot train refused before anything starts, gloo as the opt-in, and what the dry run says.
No Ray, no GPU: ``plan_resources`` takes the cluster's size as numbers, and ``ray.num_gpus``
makes ``prepare`` plan for GPUs this machine does not have."""

from __future__ import annotations

import pytest

from sweeps import compose, prepare
from sweeps.config.schema import ScalingSection
from sweeps.driver.dry_run import format_plan
from sweeps.driver.resources import plan_resources
from sweeps.errors import ClusterFitError, ConfigError

PACKING = [
    # (scaling, cpus, gpus) -> (trials at once, workers per GPU, backend)
    (dict(num_workers=1, gpus_per_worker=0.25), 16, 1, (4, 4, "nccl")),
    (dict(num_workers=1, gpus_per_worker=0.25), 16, 2, (8, 4, "nccl")),
    (dict(num_workers=1, gpus_per_worker=0.25), 2, 1, (2, 4, "nccl")),  # CPUs permitting
    (dict(num_workers=1, gpus_per_worker=0.25, cpus_per_worker=0.5), 2, 1, (4, 4, "nccl")),
    (dict(num_workers=1, gpus_per_worker=0.3), 16, 1, (3, 3, "nccl")),  # 0.1 of it idle
    (dict(num_workers=1, gpus_per_worker=0.4), 16, 2, (4, 2, "nccl")),  # never 2.5 per GPU
    (dict(num_workers=1, gpus_per_worker=0.5), 16, 1, (2, 2, "nccl")),
    (dict(num_workers=1, gpus_per_worker=0.6), 16, 2, (2, 1, "nccl")),  # no two fit in one
    (dict(num_workers=1, gpus_per_worker=1.0), 16, 4, (4, 1, "nccl")),
    (dict(num_workers=2, gpus_per_worker=0.6), 16, 2, (1, 1, "nccl")),  # a GPU per rank
    (dict(num_workers=2, gpus_per_worker=0.5, backend="gloo"), 16, 1, (1, 2, "gloo")),
    (dict(num_workers=2, gpus_per_worker=0.25, backend="gloo"), 16, 1, (2, 4, "gloo")),
    (dict(num_workers=3, gpus_per_worker=0.4, backend="gloo"), 16, 2, (1, 2, "gloo")),
    (dict(num_workers=2, gpus_per_worker=0.5, use_gpu=False), 16, 1, (8, 1, "gloo")),
    (dict(num_workers=2, gpus_per_worker=0.5), 2, 0, (1, 1, "gloo")),  # auto: no GPU, CPU
]


@pytest.mark.parametrize(("scaling", "cpus", "gpus", "expected"), PACKING)
def test_a_gpu_packs_floor_one_over_the_share_workers(scaling: dict, cpus: float,
                                                      gpus: float, expected: tuple) -> None:
    plan = plan_resources(ScalingSection(**scaling), cpus, gpus)
    assert (plan.trials_that_fit, plan.workers_per_gpu, plan.backend) == expected
    assert plan.max_concurrent_trials == plan.trials_that_fit


REFUSED = [
    # (scaling, cpus, gpus) -> (error class, key, fragment of the message)
    (dict(num_workers=2, gpus_per_worker=0.5), 16, 1,
     (ConfigError, "scaling.gpus_per_worker",
      "0.5 lets Ray put 2 DDP ranks of one trial (scaling.num_workers=2) on one GPU, and nccl "
      "refuses that (\"Duplicate GPU detected\", after the workers started); set "
      "scaling.gpus_per_worker=1, or scaling.backend=gloo to train those ranks with gloo")),
    (dict(num_workers=4, gpus_per_worker=0.5, backend="nccl"), 16, 8,
     (ConfigError, "scaling.gpus_per_worker", "put 2 DDP ranks of one trial")),
    (dict(num_workers=8, gpus_per_worker=0.25, use_gpu=True), 16, 8,
     (ConfigError, "scaling.gpus_per_worker", "put 4 DDP ranks of one trial")),
    (dict(num_workers=2, backend="nccl", use_gpu=False), 16, 1,
     (ConfigError, "scaling.backend", "needs GPUs, but the trials train on CPUs "
                                      "(scaling.use_gpu=false)")),
    (dict(num_workers=1, backend="nccl"), 16, 0,
     (ConfigError, "scaling.backend", "(the cluster has no GPU); set scaling.backend=gloo")),
    (dict(num_workers=5, gpus_per_worker=0.4, backend="gloo"), 16, 2,
     (ClusterFitError, "scaling.num_workers", "(a GPU holds 2 such workers); set "
                                              "scaling.num_workers=4")),
    (dict(num_workers=1, gpus_per_worker=0.25, use_gpu=True), 16, 0,
     (ClusterFitError, "scaling.num_workers", "set scaling.use_gpu=false to train on CPUs")),
]


@pytest.mark.parametrize(("scaling", "cpus", "gpus", "expected"), REFUSED)
def test_a_trial_nccl_cannot_train_is_refused_in_one_line(scaling: dict, cpus: float,
                                                          gpus: float, expected: tuple) -> None:
    kind, key, fragment = expected
    with pytest.raises(ConfigError) as info:
        plan_resources(ScalingSection(**scaling), cpus, gpus)
    assert type(info.value) is kind
    assert str(info.value).startswith(f"{key}: ") and fragment in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("executor", "inline"), [("auto", True), ("train", False)])
def test_one_worker_trials_share_a_gpu_under_nccl_on_either_executor(executor: str,
                                                                      inline: bool) -> None:
    plan = plan_resources(ScalingSection(num_workers=1, gpus_per_worker=0.25), 16, 1, None,
                          executor)
    assert (plan.executor == "inline", plan.trials_that_fit) == (inline, 4)
    assert plan.worker_resources == {"CPU": 1.0, "GPU": 0.25}  # what the trial process holds


DESCRIBED = [
    # (scaling, cpus, gpus, executor) -> fragments of the plan's line, and one it must not have
    (dict(num_workers=1, gpus_per_worker=0.25), 16, 1, "auto",
     ["1 worker(s) x (0.25 GPU + 1 CPU), inline", "up to 4 trial(s) at once on 16 CPU / 1 GPU",
      "; 4 trials share each GPU (0.25 GPU each; Ray does not divide its memory: each must fit "
      "in 25% of it)"], "the CPUs"),
    (dict(num_workers=1, gpus_per_worker=0.25), 2, 1, "train",
     ["(0.25 GPU + 1 CPU), nccl;", "up to 2 trial(s) at once", "; a GPU takes 4 trials "
      "(0.25 GPU each; Ray does not divide its memory: each must fit in 25% of it), but the CPUs "
      "run 2 trial(s) at once"], "share each GPU"),
    (dict(num_workers=2, gpus_per_worker=0.5, backend="gloo"), 16, 1, "auto",
     ["2 worker(s) x (0.5 GPU + 1 CPU), gloo (scaling.backend=gloo);",
      "2 workers (DDP ranks, gloo) share each GPU (0.5 GPU each"], "trials share"),
    (dict(num_workers=2), 16, 2, "auto", ["2 worker(s) x (1 GPU + 1 CPU), nccl; up to 1"],
     "share"),
    (dict(num_workers=2), 2, 0, "auto", ["2 worker(s) x (1 CPU), gloo, inline: rank 0 runs",
                                         "; up to 1 trial(s) at once on 2 CPU / 0 GPU"],
     "scaling.backend"),
]


@pytest.mark.parametrize(("scaling", "cpus", "gpus", "executor", "fragments", "absent"),
                         DESCRIBED)
def test_the_plan_line_says_how_a_gpu_is_shared(scaling: dict, cpus: float, gpus: float,
                                                executor: str, fragments: list[str],
                                                absent: str) -> None:
    text = plan_resources(ScalingSection(**scaling), cpus, gpus, None, executor).describe()
    for fragment in fragments:
        assert fragment in text, text
    assert absent not in text, text


def test_the_dry_run_plans_four_trials_on_one_gpu_without_one() -> None:
    cfg = compose("digits", ["ray.num_cpus=16", "ray.num_gpus=1", "scaling.num_workers=1",
                             "scaling.gpus_per_worker=0.25"])
    text = format_plan(prepare(cfg))
    assert ("trials: 1 worker(s) x (0.25 GPU + 1 CPU), inline" in text
            and "up to 4 trial(s) at once on 16 CPU / 1 GPU; 4 trials share each GPU "
                "(0.25 GPU each" in text), text


@pytest.mark.parametrize(
    ("overrides", "key", "fragment"),
    [(["scaling.gpus_per_worker=0.5"], "scaling.gpus_per_worker",
      "scaling.backend=gloo to train those ranks with gloo"),
     (["scaling.backend=ncl"], "scaling.backend", "must be null, nccl or gloo; did you mean nccl?"),
     (["scaling.backend=GLOO"], "scaling.backend", "did you mean gloo?"),
     (["scaling.backend=mpi"], "scaling.backend", "'mpi' must be null, nccl or gloo; leave it"),
     (["scaling.backend=nccl", "scaling.use_gpu=false"], "scaling.backend", "needs GPUs")],
)
def test_prepare_refuses_before_ray_starts(overrides: list[str], key: str,
                                           fragment: str) -> None:
    import ray

    cfg = compose("digits", ["ray.num_cpus=16", "ray.num_gpus=1", *overrides])
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    assert str(info.value).startswith(f"{key}: ") and fragment in str(info.value)
    assert not ray.is_initialized()


def test_gloo_is_the_opt_in_and_reaches_the_trial_plan(tmp_path, monkeypatch) -> None:
    from sweeps._ray import placement
    from sweeps.driver.tuner import trial_plan

    # On a cluster the plan also pins the driver to the head node, which asks Ray; no Ray
    # here, and the pin is not what this test is about (tests/integration/test_cluster.py).
    monkeypatch.setattr(placement, "head_node_pin", lambda: {})

    cfg = compose("digits", ["ray.num_cpus=16", "ray.num_gpus=1", "scaling.backend=gloo",
                             "scaling.gpus_per_worker=0.5"])
    prepared = prepare(cfg)
    assert (prepared.resources.backend, prepared.resources.trials_that_fit) == ("gloo", 1)
    cfg.ray.address = "auto"  # (a cluster: trial_plan need not ask Ray how many nodes)
    plan = trial_plan(cfg, {}, prepared.resources, tmp_path, "sweep-id")
    assert (plan.backend, plan.worker_resources) == ("gloo", {"CPU": 1.0, "GPU": 0.5})
    default = prepare(compose("digits", ["ray.num_cpus=16", "ray.num_gpus=2"])).resources
    assert default.backend == "nccl"


def test_the_backend_may_change_on_resume() -> None:
    """scaling.* is not part of a sweep's identity (sweeps.resume.state), so a sweep started
    with nccl resumes with gloo (or with other shares)."""
    from sweeps.resume.state import identity_of
    from sweeps.search.space import parse_space

    base = compose("digits")
    other = compose("digits", ["scaling.backend=gloo", "scaling.gpus_per_worker=0.5"])
    params = parse_space(base.experiment.search_space)[0]
    assert identity_of(base, params) == identity_of(other, params)


def test_an_inline_trials_own_process_holds_the_gpu_share(tmp_path, monkeypatch) -> None:
    """Tune places the trial actor in its placement group's first bundle with that bundle's
    num_gpus (ray.air's PlacementGroupAcquiredResources), so Ray gives the inline trial's
    process the 0.25 share and sets its CUDA_VISIBLE_DEVICES; a Train trial's driver holds
    none (its worker does)."""
    from sweeps._ray import placement
    from sweeps.driver.tuner import _trainable, trial_plan

    monkeypatch.setattr(placement, "head_node_pin", lambda: {})  # asks Ray; none here
    cfg = compose("digits", ["ray.num_cpus=16", "ray.num_gpus=1", "ray.address=auto",
                             "scaling.num_workers=1", "scaling.gpus_per_worker=0.25"])
    for executor, head in (("auto", {"CPU": 1.0, "GPU": 0.25}), ("train", {"GPU": 0.0})):
        plan = plan_resources(cfg.scaling, 16, 1, None, executor)
        resources = _trainable(trial_plan(cfg, {}, plan, tmp_path, "sid"))._resources
        assert len(resources.bundles) == 1 and not resources.head_bundle_is_empty
        assert {k: resources.bundles[0].get(k, 0.0) for k in head} == head
