"""Elastic trials (``scaling.num_workers=[min, max]``): the key's grammar, the plan at ``max``
workers, the inline backend routing them to Ray Train, the dry-run line and what a trial's
Train run is given. No Ray; the multi-node run is tests/integration/test_elastic.py."""

from __future__ import annotations

import pytest

from sweeps import compose, prepare
from sweeps.config.schema import ScalingSection
from sweeps.config.workers import check, is_elastic, worker_range
from sweeps.driver.dry_run import format_plan
from sweeps.driver.resources import plan_resources
from sweeps.errors import ClusterFitError, ConfigError

LOCAL = ["ray.num_cpus=2", "ray.num_gpus=0"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, (1, 1, False)), (2, (2, 2, False)), ([1, 4], (1, 4, True)), ([2, 2], (2, 2, True)),
     ((1, 3), (1, 3, True))],
)
def test_a_count_or_a_range_is_accepted(value, expected) -> None:
    check(value)
    assert (*worker_range(value), is_elastic(value)) == expected


@pytest.mark.parametrize(
    ("value", "rule", "fix"),
    [
        ([3, 2], "has min 3 > max 2", "write scaling.num_workers=[2,3]"),
        ([0, 2], "two whole numbers >= 1", "write scaling.num_workers=[1,4]"),
        ([-1, 2], "two whole numbers >= 1", "write scaling.num_workers=[1,4]"),
        ([1, 0], "two whole numbers >= 1", "write scaling.num_workers=[1,4]"),
        ([1.5, 2], "two whole numbers >= 1", "write scaling.num_workers=[1,4]"),
        ([True, 2], "two whole numbers >= 1", "write scaling.num_workers=[1,4]"),
        ([1, 2, 3], "has 3 element(s)", "write scaling.num_workers=[1,4]"),
        ([2], "has 1 element(s)", "or one number for a fixed count"),
        ([], "has 0 element(s)", "write scaling.num_workers=[1,4]"),
        (0, "must be >= 1", "set scaling.num_workers=2"),
        (-3, "must be >= 1", "set scaling.num_workers=2"),
        ("two", "a whole number >= 1", "scaling.num_workers=[1,4]"),
        (2.5, "a whole number >= 1", "set scaling.num_workers=2"),
        (True, "a whole number >= 1", "set scaling.num_workers=2"),
        (None, "a whole number >= 1", "set scaling.num_workers=2"),
    ],
)
def test_a_bad_worker_count_names_key_value_and_fix(value, rule, fix) -> None:
    with pytest.raises(ConfigError) as info:
        check(value)
    message = str(info.value)
    shown = list(value) if isinstance(value, list) else value
    assert message.startswith(f"scaling.num_workers: {shown!r} ")
    assert rule in message and fix in message


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        (["scaling.num_workers=[3,2]"], "has min 3 > max 2"),
        (["scaling.num_workers=[0,2]"], "two whole numbers >= 1"),
        (["scaling.num_workers=[1,2,3]"], "has 3 element(s)"),
        (["scaling.elastic_resize_interval_s=0"], "must be > 0 (seconds)"),
    ],
)
def test_composed_config_is_refused_before_ray_starts(overrides, fragment) -> None:
    from sweeps.config.validate import validate

    with pytest.raises(ConfigError) as info:
        validate(compose("digits", overrides))
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("num_workers", "cpus", "expected"),
    [
        # (min workers, max workers, trials at once): planned at max, at least 1 if min fits
        ([1, 2], 2, (1, 2, 1)),
        ([1, 2], 4, (1, 2, 2)),
        ([1, 4], 2, (1, 4, 1)),
        ([2, 3], 7, (2, 3, 2)),
        ([2, 2], 4, (2, 2, 2)),
    ],
)
def test_elastic_trials_are_planned_at_max_workers(num_workers, cpus, expected) -> None:
    plan = plan_resources(ScalingSection(num_workers=num_workers), cpus, 0)
    assert (plan.num_workers, plan.max_workers, plan.max_concurrent_trials) == expected
    assert plan.elastic and plan.executor == "train" and plan.cpus_per_worker == 1.0
    assert plan.fits_in(cpus, 0) == expected[2]
    assert plan.fits_in(3 * plan.max_workers, 0) == 3  # a grown cluster: max workers each
    assert plan.fits_in(plan.num_workers, 0) == 1 and plan.fits_in(plan.num_workers - 1, 0) == 0


@pytest.mark.parametrize(
    ("scaling", "cpus", "gpus", "fragment"),
    [
        (dict(num_workers=[3, 4]), 2, 0, "needs 3 CPUs for min 3 worker(s) (1 per worker) but "
         "the cluster has 2; set scaling.num_workers=[2,4]"),
        (dict(num_workers=[2, 4], cpus_per_worker=2), 3, 0, "set scaling.num_workers=[1,4]"),
        (dict(num_workers=[2, 3], use_gpu=True), 8, 1, "needs 2 GPUs for min 2 worker(s)"),
    ],
)
def test_a_min_the_cluster_cannot_hold_is_refused(scaling, cpus, gpus, fragment) -> None:
    with pytest.raises(ClusterFitError) as info:
        plan_resources(ScalingSection(**scaling), cpus, gpus)
    assert str(info.value).startswith(f"scaling.num_workers: {scaling['num_workers']} ")
    assert fragment in str(info.value)


@pytest.mark.parametrize(("executor", "chosen"), [("auto", "train"), ("train", "train")])
def test_elastic_trials_run_on_ray_train(executor, chosen) -> None:
    plan = plan_resources(ScalingSection(num_workers=[1, 2]), 2, 0, executor=executor)
    assert plan.executor == chosen
    assert plan.notes == (() if executor == "train" else (
        "elastic trials (scaling.num_workers=[min, max]) run as Ray Train runs, which resize "
        "them (trial.executor=train)",))


def test_the_inline_backend_refuses_elastic_trials() -> None:
    with pytest.raises(ConfigError) as info:
        plan_resources(ScalingSection(num_workers=[1, 2]), 2, 0, executor="inline")
    assert str(info.value).startswith("trial.executor: 'inline' runs a fixed set of ranks")


def test_the_plan_says_the_trials_are_elastic_and_on_ray_train(tmp_path) -> None:
    prep = prepare(compose("digits", [*LOCAL, "scaling.num_workers=[1,2]",
                                      f"sweep.dir={tmp_path}/d"]))
    lines = format_plan(prep).splitlines()
    trials = next(line for line in lines if line.startswith("  trials: "))
    assert trials.startswith("  trials: elastic 1..2 worker(s) x (1 CPU), gloo; up to 1 "
                             "trial(s) at once on 2 CPU / 0 GPU (planned at 2 workers each; "
                             "Ray Train grows and shrinks each trial"), trials
    assert ("  warning: elastic trials (scaling.num_workers=[min, max]) run as Ray Train runs, "
            "which resize them (trial.executor=train)") in lines


def test_a_fixed_count_plans_as_before(tmp_path) -> None:
    prep = prepare(compose("digits", [*LOCAL, "scaling.num_workers=2",
                                      f"sweep.dir={tmp_path}/d"]))
    trials = next(line for line in format_plan(prep).splitlines() if "  trials: " in line)
    assert trials.startswith("  trials: 2 worker(s) x (1 CPU), gloo, inline:"), trials
    assert "elastic" not in trials and "planned at" not in trials


def test_an_elastic_trial_gets_a_range_and_a_resize_interval(tmp_path, monkeypatch) -> None:
    from sweeps._ray import placement
    from sweeps.driver.tuner import trial_plan
    from sweeps.trial.backends.train import elastic_options, start_limits

    monkeypatch.setattr(placement, "alive_nodes", lambda: {"n1": {}})  # one local node; no Ray

    cfg = compose("digits", [*LOCAL, "scaling.num_workers=[1,2]",
                             "scaling.elastic_resize_interval_s=3", f"sweep.dir={tmp_path}/d"])
    prep = prepare(cfg)
    plan = trial_plan(cfg, prep.constants, prep.resources, tmp_path, "s")
    opts = plan.backend_options
    assert opts.train_workers(plan.num_workers) == (1, 2)
    assert elastic_options(opts) == {"elastic_resize_monitor_interval_s": 3.0}
    assert start_limits(opts.start_timeout_s, elastic=True) == (25.0, 23)
    fixed = prepare(compose("digits", [*LOCAL, f"sweep.dir={tmp_path}/f",
                                       "trial.executor=train"]))
    plan = trial_plan(fixed.cfg, fixed.constants, fixed.resources, tmp_path, "s")
    opts = plan.backend_options
    assert (opts.train_workers(plan.num_workers), elastic_options(opts)) == (2, {})
