"""Every experiment config composes and validates; every bad input fails before Ray starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps import ConfigError, compose, prepare
from sweeps.config.overrides import check_overrides, schema_keys
from sweeps.config.schema import available_experiments, to_config
from sweeps.config.validate import validate

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", available_experiments())
def test_every_experiment_composes_and_validates(name: str) -> None:
    cfg = compose(name, ["ray.num_cpus=2", "ray.num_gpus=0"])
    validate(cfg)
    assert cfg.experiment.name == name
    assert cfg.sweep.dir == f"outputs/{name}"
    prepared = prepare(cfg)
    assert prepared.params, "every built-in experiment searches something"


def test_experiment_files_follow_the_convention() -> None:
    for path in sorted((ROOT / "conf" / "experiment").glob("*.yaml")):
        lines = path.read_text().splitlines()
        assert lines[0] == "# @package _global_", path
        assert lines[1] == f"# python -m sweeps +experiment={path.stem}", path


def test_overrides_reach_the_typed_config() -> None:
    cfg = compose("digits", ["search.num_samples=20", "scaling.num_workers=1",
                             "scheduler.max_t=12", "search=random", "scheduler=none"])
    assert (cfg.search.num_samples, cfg.scaling.num_workers, cfg.scheduler.max_t) == (20, 1, 12)
    assert (cfg.search.algorithm, cfg.scheduler.name) == ("random", "none")


BAD = [
    # (overrides, key in message, fragment of the fix)
    (["experiment.mode=maximize"], "experiment.mode", "set experiment.mode=max"),
    (["scaling.num_workers=0"], "scaling.num_workers", ">= 1"),
    (["scaling.num_workers=[3,2]"], "scaling.num_workers", "write scaling.num_workers=[2,3]"),
    (["scaling.elastic_resize_interval_s=0"], "scaling.elastic_resize_interval_s",
     "set scaling.elastic_resize_interval_s=10"),
    (["scaling.num_workers=3", "scaling.cpus_per_worker=1"], "scaling.num_workers",
     "needs 3 CPUs"),
    (["scaling.num_workers=64"], "scaling.num_workers", "under 0.1 each"),
    (["scaling.use_gpu=true"], "scaling.num_workers", "scaling.use_gpu=false"),
    (["experiment.trainable=nope.module:train"], "experiment.trainable", "cannot be imported"),
    (["sweep.budget.epochs=0"], "sweep.budget.epochs", "set sweep.budget.epochs=30"),
    (["sweep.budget.worker_hours=-1"], "sweep.budget.worker_hours", "or null"),
    (["sweep.budget.wall=soon"], "sweep.budget.wall", "sweep.budget.wall=2h"),
    (["sweep.budget.wall=0m"], "sweep.budget.wall", "must be > 0"),
    (["experiment.trainable=trainables.digits:nope"], "experiment.trainable",
     "names nothing in trainables.digits"),
    (["experiment.trainable=trainables.digits:train_mpl"], "experiment.trainable",
     "did you mean trainables.digits:train_mlp?"),
    (["experiment.trainable=tests.unit.bad_loops:NOT_A_FUNCTION"], "experiment.trainable",
     "is a int, not a function"),
    (["experiment.trainable=tests.unit.bad_loops:two_args"], "experiment.trainable",
     "takes 2 required arguments; Ray Train and Ray Tune call it with 1 (config)"),
    (["experiment.trainable=tests.unit.bad_loops:no_args"], "experiment.trainable",
     "takes no config argument"),
    (["experiment.trainable=tests.unit.broken_loop:train"], "experiment.trainable",
     "raised RuntimeError on import (missing dataset path)"),
    (["+experiment.search_space.lr_decay='interval(0.1, 0.9)'"], "experiment.search_space.lr_decay",
     "add lr_decay: <default> to experiment.params, or list it in experiment.loop_defaults"),
    (["+experiment.search_space.hiden='choice(1, 2)'"], "experiment.search_space.hiden",
     "did you mean hidden?"),
    (["experiment.loop_defaults=[nope]"], "experiment.loop_defaults", "not a key of"),
    (["experiment.model_loader=tests.unit.bad_loops:loader_without_args"],
     "experiment.model_loader", "called with 1 (the checkpoint directory)"),
    (["experiment.trainable=trainables.digits"], "experiment.trainable", "module:function"),
    (["experiment.search_space.lr='interval(0.1, 0.01)'"], "experiment.search_space.lr",
     "write interval(0.01, 0.1)"),
    (["experiment.search_space.lr='tag(log, interval(0, 1))'"], "experiment.search_space.lr",
     "low <= 0"),
    (["experiment.search_space.depth='range(3, 1)'"], "experiment.search_space.depth",
     "low > high"),
    (["experiment.search_space.depth='range(1, 4, 2)'"], "experiment.search_space.depth",
     "write range(1, 3, 2)"),
    (["experiment.search_space.dropout='range(0.1, 0.5, 0.15)'"],
     "experiment.search_space.dropout", "write range(0.1, 0.4, 0.15)"),
    (["experiment.search_space.lr='range(1.0, 1.0000001, 1e-17)'"], "experiment.search_space.lr",
     "below the float resolution of its bounds"),
    (["experiment.search_space.lr='interval(0.1,'"], "experiment.search_space.lr",
     "does not parse"),
    (["search.num_samples=0"], "search.num_samples", ">= 1"),
    (["scheduler.max_t=0"], "scheduler.max_t", ">= 1"),
    (["scheduler.grace_period=20"], "scheduler.grace_period", "between 1 and"),
    (["scheduler.reduction_factor=1"], "scheduler.reduction_factor", ">= 2"),
    (["search.algorithm=hyperband"], "search.algorithm", "search=random, search=grid"),
    # issue 16: grid, samplers, multi-objective, conditional spaces, PBT, warm start
    (["search=grid"], "experiment.search_space.lr", "grid needs discrete values"),
    (["+search.sampler._target_=optuna.samplers.CmaEsSampler"], "search.sampler",
     "add search=optuna"),
    (["search=optuna", "search.sampler._target_=os.system"], "search.sampler._target_",
     "outside optuna.samplers"),
    (["search=optuna", "search.sampler._target_=optuna.samplers.CmaEs"],
     "search.sampler._target_", "did you mean optuna.samplers.CmaEsSampler?"),
    (["search=optuna", "search.sampler._target_=optuna.samplers.CmaEsSampler",
      "++search.sampler.sigma=2"], "search.sampler.sigma", "did you mean sigma0?"),
    (["search=optuna", "search.sampler._target_=optuna.samplers.CmaEsSampler",
      "+experiment.metrics={val_acc: max, val_loss: min}", "scheduler=none"],
     "search.sampler._target_", "cannot sample this sweep"),
    (["search=optuna", "search.sampler._target_=optuna.samplers.GridSampler"],
     "search.sampler._target_", "use search=grid"),
    (["+experiment.metrics={val_acc: max, val_loss: min}", "scheduler=pbt"], "scheduler.name",
     "judges trials by one metric"),
    (["+experiment.metrics={val_acc: max, val_loss: down}", "scheduler=none"],
     "experiment.metrics.val_loss", "'min' or 'max'"),
    (["+experiment.metrics={val_loss: min}"], "experiment.metric",
     "is not one of experiment.metrics"),
    (["+experiment.search_space.momentum.when.optimizr=sgd",
      "+experiment.search_space.momentum.sample='interval(0.5,0.99)'"],
     "experiment.search_space.momentum.when.optimizr", "not a searched parameter"),
    (["+experiment.search_space.optimizer='choice(sgd,adam)'",
      "+experiment.search_space.momentum.when.optimizer=rmsprop",
      "+experiment.search_space.momentum.sample='interval(0.5,0.99)'"],
     "experiment.search_space.momentum.when.optimizer", "branch on one of ['sgd', 'adam']"),
    (["+experiment.search_space.optimizer='choice(sgd,adam)'",
      "+experiment.search_space.momentum.when.optimizer=sgd",
      "+experiment.search_space.momentum.sample='interval(0.5,0.99)'", "search=random"],
     "search.algorithm", "optuna.samplers.RandomSampler"),
    (["scheduler=pbt", "scheduler.quantile_fraction=0.9"], "scheduler.quantile_fraction",
     "(0, 0.5]"),
    (["scheduler=pbt", "scheduler.perturbation_interval=0"], "scheduler.perturbation_interval",
     "between 1 and"),
    (["search=random", "search.warm_start=digits"], "search.warm_start",
     "search=random has none"),
    (["scheduler=pbt"], "search.algorithm", "use search=random"),
    (["scheduler=pbt", "search=random", "scheduler.mutate=[lr, hiden]"], "scheduler.mutate",
     "did you mean hidden?"),
    (["scheduler=pbt", "search=random", "~experiment.search_space.lr",
      "~experiment.search_space.dropout"],
     "scheduler.mutate", "leaves PBT nothing to perturb"),
    (["scheduler=pbt", "+experiment.search_space.optimizer='choice(sgd,adam)'",
      "+experiment.search_space.momentum.when.optimizer=sgd",
      "+experiment.search_space.momentum.sample='interval(0.5,0.99)'"], "scheduler.name",
     "cannot perturb the conditional space of momentum"),
    (["sweep.dir=/proc/sweeps-test"], "sweep.dir", "not writable"),
    (["sweep.dir=/etc/hostname/sub"], "sweep.dir", "which is a file"),
    (["trial.start_timeout_s=0"], "trial.start_timeout_s", "-1 to wait forever"),
    (["trial.executor=local"], "trial.executor", "must be one of auto, train, inline"),
    (["scaling.backend=nc"], "scaling.backend", "did you mean nccl?"),
    (["scaling.backend=nccl"], "scaling.backend", "(the cluster has no GPU)"),
    (["+experiment.datasets.train=trainables.digits_data:digits", "trial.executor=inline",
      "scaling.num_workers=2"],
     "trial.executor", "which do not split experiment.datasets"),
]


@pytest.mark.parametrize(("overrides", "key", "fragment"), BAD)
def test_bad_input_is_rejected_before_ray_starts(overrides, key, fragment) -> None:
    import ray

    cfg = compose("digits", ["ray.num_cpus=2", "ray.num_gpus=0", *overrides])
    with pytest.raises(ConfigError) as info:
        prepare(cfg)
    assert str(info.value).startswith(f"{key}: "), str(info.value)
    assert fragment in str(info.value)
    assert not ray.is_initialized()


@pytest.mark.parametrize("overrides", [o for o, key, _ in BAD if key == "trial.executor"])
def test_a_refused_trial_executor_is_refused_by_validate_and_before_the_claim(
        overrides: list[str], tmp_path) -> None:
    import ray

    import sweeps

    cfg = compose("digits", [*overrides, f"sweep.dir={tmp_path / 'sweep'}"])
    with pytest.raises(ConfigError, match="^trial.executor: "):
        sweeps.validate(cfg)
    (tmp_path / "sweep").mkdir()  # an existing sweep directory: nothing is written in it
    with pytest.raises(ConfigError, match="^trial.executor: "):
        sweeps.run_sweep(cfg)
    assert list((tmp_path / "sweep").iterdir()) == []
    assert not ray.is_initialized()


def test_missing_experiment_lists_the_choices() -> None:
    from sweeps.config.compose import compose_raw

    expected = r"\+experiment=NAME` with NAME one of: digits, digits_cnn"
    with pytest.raises(ConfigError, match=expected):
        to_config(compose_raw(None))


@pytest.mark.parametrize(
    ("arg", "quoted"),
    [("experiment.search_space.lr=interval(0.1,0.5)",
      "++experiment.search_space.lr='interval(0.1,0.5)'"),
     ("+experiment.search_space.m.w=choice(1,2)", "+experiment.search_space.m.w='choice(1,2)'"),
     ("experiment.search_space.lr='interval(0.1,0.5)'",
      "++experiment.search_space.lr='interval(0.1,0.5)'"),
     ("~experiment.search_space.lr", "~experiment.search_space.lr"),
     ("search.sampler.sigma0=0.5", "++search.sampler.sigma0=0.5"),
     ("search.num_samples=3", "search.num_samples=3")],
)
def test_search_space_values_are_quoted_for_hydra(arg: str, quoted: str) -> None:
    from sweeps.config.overrides import quote_search_space

    assert quote_search_space([arg]) == [quoted]


@pytest.mark.parametrize(
    ("args", "message"),
    [(["search.num_sample=20"], "search.num_sample: 20 is not a config key; did you mean "
                                "search.num_samples?"),
     (["schedulr.max_t=3"], "did you mean scheduler.max_t?"),
     (["+experiment=digts"], "did you mean +experiment=digits?")],
)
def test_typos_get_a_suggestion(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("?", r"\?").replace("+", r"\+")):
        check_overrides(args)


@pytest.mark.parametrize("args", [["+experiment=digits", "search=random",
                                   "experiment.params.lr=0.1", "hydra.verbose=true",
                                   "experiment.search_space.model.width='choice(1, 2)'",
                                   "scaling.cpus_per_worker=0.5"]])
def test_valid_overrides_pass_the_precheck(args: list[str]) -> None:
    check_overrides(args)
    assert "scaling.cpus_per_worker" in schema_keys()


CLI_BAD = [
    (["+experiment=nope"], "experiment: 'nope' is not an experiment"),
    ([], "experiment: None names no complete experiment"),
    (["+experiment=digits", "search.num_sample=20"], "did you mean search.num_samples?"),
    (["+experiment=digits", "experiment.search_space.lr=interval(0.1,0.01)"],
     "experiment.search_space.lr: 'interval(0.1,0.01)' has low > high"),
    (["+experiment=digits", "experiment.mode=up"], "experiment.mode: 'up' must be"),
    (["+experiment=digits", "tracking.tensorboard=maybe"],
     "tracking.tensorboard: 'maybe' must be true or false; write tracking.tensorboard=true"),
    (["+experiment=digits", "scaling.num_workers=0"], "scaling.num_workers: 0 must be >= 1"),
    (["+experiment=digits", "experiment.trainable=nope:fn"], "experiment.trainable: 'nope:fn'"),
    (["+experiment=digits", "sweep.dir=/proc/x"], "sweep.dir: '/proc/x' is not writable"),
    # An object store: nothing listens at the endpoint; a scheme pyarrow does not know.
    (["+experiment=digits", "sweep.dir='s3://bucket/digits?endpoint_override=127.0.0.1:1"
      "&scheme=http'"],
     "sweep.dir: 's3://bucket/digits' could not be reached: nothing answered at 127.0.0.1:1"),
    (["+experiment=digits", "sweep.dir=foo://bucket/digits"],
     "sweep.dir: 'foo://bucket/digits' has the scheme foo://, which pyarrow"),
    # issue 14: ranks of one trial sharing a GPU under nccl, and the backend key (a GPU that
    # is not there: ray.num_gpus plans for it without starting Ray)
    (["+experiment=digits", "ray.num_gpus=1", "scaling.gpus_per_worker=0.5"],
     "sweeps: error: scaling.gpus_per_worker: 0.5 lets Ray put 2 DDP ranks of one trial "
     "(scaling.num_workers=2) on one GPU, and nccl refuses that (\"Duplicate GPU detected\", "
     "after the workers started); set scaling.gpus_per_worker=1, or scaling.backend=gloo to "
     "train those ranks with gloo"),
    (["+experiment=digits", "scaling.backend=ncl"],
     "scaling.backend: 'ncl' must be null, nccl or gloo; did you mean nccl?"),
    # Port 1 on loopback: nothing listens. Ray's own join would wait ~2 minutes; the
    # subprocess timeout below (30 s) is the bound for this one line.
    (["+experiment=digits", "ray.address=127.0.0.1:1"],
     "ray.address: '127.0.0.1:1' does not answer (nothing listens on 127.0.0.1:1"),
]


@pytest.mark.parametrize(("args", "message"), CLI_BAD)
def test_cli_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, message) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""}
    proc = subprocess.run([sys.executable, "-m", "sweeps", *args, "ray.num_cpus=2"]
                          if args else [sys.executable, "-m", "sweeps"],
                          cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=30 if any("ray.address" in a for a in args) else 120)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr  # one line, no traceback
    assert list(tmp_path.iterdir()) == []  # no outputs/, no Hydra dirs, no mlflow.db


def test_best_overrides_pin_the_configuration_and_search_nothing() -> None:
    from sweeps.config.overrides import quote_search_space
    from sweeps.report.summary import best_overrides

    best = {"lr": 0.19644563572959983, "hidden": 256, "depth": 2, "dropout": 0.0,
            "batch_size": 128}
    line = best_overrides(best)
    cfg = compose("digits", ["search=random", "search.num_samples=1", "scheduler=none",
                             "ray.num_cpus=2", "ray.num_gpus=0",
                             *quote_search_space(line.split())])
    prepared = prepare(cfg)
    assert prepared.params == []
    assert prepared.constants == best  # same values and types, float precision kept


def test_start_timeout_becomes_train_attempts_and_a_failure_limit() -> None:
    from sweeps.trial.backends.train import start_limits

    # Ray Train waits 60 s per attempt; 600 s = the first attempt + 9 more, then the trial fails.
    assert start_limits(600) == (60.0, 9)
    assert start_limits(90) == (60.0, 1)
    assert start_limits(20) == (20.0, 0)
    assert start_limits(-1) == (60.0, -1)  # Ray Train's default: retry forever
