"""A Ray Tune function trainable cannot tell a sweep from a plain ``tune.Tuner``: each Tune
function of the corpus (``tests/conformance/tune_loops/objectives.py``, written as Tune's docs
write them) runs under a plain ``Tuner`` (the reference, in the same test), then as a
one-trial sweep (on the default backend: inline; the Train backend refuses Tune functions);
it must observe what the reference observed (its config's keys,
``tune.get_context()``, the checkpoint ``tune.get_checkpoint()`` hands back after a failure,
every report), report the same metrics and keep the same last checkpoint. A driver killed
with ``kill -9`` and run again resumes the checkpointing function as Tune would retry it.

    python -m pytest tests/conformance/test_tune_functions.py -k checkpointing
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.harness import CONF
from tests.conformance.tune_loops.noted import read

pytestmark = pytest.mark.slow

MODULE = "tests.conformance.tune_loops.objectives"


@dataclass(frozen=True)
class Case:
    function: str
    params: dict[str, Any] = field(default_factory=dict)
    max_failures: int = 0  # Tune's FailureConfig; sweeps' trial.max_failures
    stop: int | None = None  # Tune's stop={"training_iteration": n}; sweeps' scheduler.max_t


CASES = {
    "objective": Case("objective", {"steps": 4}),
    "checkpointing": Case("checkpointing", {"steps": 5, "fail_at": 2}, max_failures=1),
    "endless": Case("endless", stop=5),
    "returns": Case("returns"),
}


def _config(case: Case, observe: Path) -> dict[str, Any]:
    return {"lr": 0.05, **case.params, "observe_dir": str(observe)}


def _state(checkpoint_dir: Path | str | None) -> Any:
    if checkpoint_dir is None:
        return None
    return json.loads((Path(checkpoint_dir) / "state.json").read_text())


def _reports(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the loop controls of each report: its own keys, rounded."""
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in row.items()
             if k in ("iterations", "mean_loss") and v == v} for row in rows]


def run_plain_tune(case: Case, tmp: Path) -> dict[str, Any]:
    """The reference: the function under a plain ``tune.Tuner``, as Tune's docs run it."""
    from ray import tune

    import tests.conformance.tune_loops.objectives as objectives

    tuner = tune.Tuner(
        getattr(objectives, case.function), param_space=_config(case, tmp / "observed"),
        tune_config=tune.TuneConfig(num_samples=1, metric="mean_loss", mode="min"),
        run_config=tune.RunConfig(
            name="plain", storage_path=str(tmp / "storage"),
            stop={"training_iteration": case.stop} if case.stop else None,
            failure_config=tune.FailureConfig(max_failures=case.max_failures)))
    (result,) = tuner.fit()
    assert result.error is None, result.error
    checkpoint = result.checkpoint
    with (checkpoint.as_directory() if checkpoint else _nothing()) as directory:
        state = _state(directory)
    return {"observed": read(tmp / "observed"),
            "reports": _reports(result.metrics_dataframe.to_dict("records")),
            "checkpoint": state}


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def sweep_overrides(case: Case, executor: str, tmp: Path) -> list[str]:
    params = _config(case, tmp / "observed")
    params.pop("lr")  # the search space's one point (conformance.yaml)
    return [f"experiment.trainable={MODULE}:{case.function}", "experiment.metric=mean_loss",
            f"sweep.dir={tmp / 'sweep'}", "sweep.seed=0", f"trial.executor={executor}",
            "scaling.use_gpu=false", f"tracking.uri=sqlite:///{tmp / 'mlflow.db'}",
            f"trial.max_failures={case.max_failures}", f"scheduler.max_t={case.stop or 1000}",
            *[f"+experiment.params.{k}={json.dumps(v)}" for k, v in params.items()]]


def run_sweeps(case: Case, executor: str, tmp: Path) -> dict[str, Any]:
    """The function as a one-trial sweep; what it observed, reported and checkpointed."""
    from sweeps import compose, run_sweep
    from sweeps._ray import train_snapshot
    from sweeps.trial import report_log

    result = run_sweep(compose("conformance", sweep_overrides(case, executor, tmp),
                               config_dir=CONF))
    assert not result.failed, result.failed
    (run_dir,) = Path(result.sweep_dir, "train").iterdir()
    latest = train_snapshot.latest(train_snapshot.load(run_dir))
    # the last report of each step (a step reported again after a restart counts once, as in
    # Tune's own progress.csv of a retried trial)
    reports = {r["n"]: r for r in report_log.records(run_dir)}
    return {"observed": read(tmp / "observed"),
            "reports": _reports([reports[n] for n in sorted(reports)]),
            "checkpoint": _state(run_dir / latest[0]) if latest else None,
            "result": result}


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(CASES))
def test_a_tune_function_observes_in_a_sweep_what_it_observes_under_a_plain_tuner(
        name: str, tmp_path: Path, ray_cluster, capsys, caplog) -> None:
    caplog.set_level(logging.INFO, logger="sweeps")
    case = CASES[name]
    reference = run_plain_tune(case, tmp_path / "plain")
    assert reference["observed"] and reference["reports"], reference
    capsys.readouterr()
    outcome = run_sweeps(case, "auto", tmp_path / "sweep")
    console = capsys.readouterr().out
    assert "is a Tune function trainable (ray.tune.report): one process per trial" \
        in caplog.text, caplog.text[-2000:]
    plan = next(line for line in console.splitlines() if line.startswith("sweep "))
    assert "1 worker(s)" in plan and "inline" in plan, plan
    for key in ("observed", "reports", "checkpoint"):
        assert outcome[key] == reference[key], (key, outcome[key], reference[key])
    assert "Trial run_trial_" not in console, console[-2000:]  # Ray's raw lines: in the log
    if case.max_failures:  # the restart, where the user looks
        line = ("the loop raised RuntimeError: Failing on iter=2!! after epoch 2; restarted "
                "from the checkpoint of epoch 2, attempt 2 of 2 (trial.max_failures)")
        assert line in console, console[-3000:]
        assert list(outcome["result"].summary.restarts.values()) == [(1, line)]
        _restart_tagged(tmp_path / "sweep", line)


def _restart_tagged(tmp: Path, line: str) -> None:
    """The trial's MLflow run says it restarted, and why."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              filter_string="tags.`sweeps.restarts` = '1'")
    assert [r.data.tags.get("sweeps.last_failure") for r in runs] == [line]


@pytest.mark.timeout(600)
def test_a_killed_driver_resumes_the_tune_function_from_its_checkpoint(tmp_path: Path) -> None:
    """``kill -9`` of the driver after the report of step 1, then the same command: the function
    restarts from the checkpoint of step 1 (as a Tune retry would hand it back) and ends where
    an uninterrupted plain Tuner run ends."""
    import dataclasses

    from tests.conformance.test_resume import kill_when_paused_and_rerun
    from tests.conftest import private_ray

    case = CASES["checkpointing"]
    with private_ray():
        reference = run_plain_tune(dataclasses.replace(case, max_failures=0,
                                                       params={"steps": 5}), tmp_path / "plain")
    paused = dataclasses.replace(case, max_failures=0, params={"steps": 5, "pause_at": 1})
    runs = tmp_path / "sweep_runs"
    kill_when_paused_and_rerun(runs, sweep_overrides(paused, "auto", runs))
    observed = read(runs / "observed")
    assert [r.get("step") for r in observed if r["event"] == "restored"] == [1], observed
    last = {r["step"]: r["mean_loss"] for r in observed if r["event"] == "report"}
    assert last == {r["step"]: r["mean_loss"] for r in reference["observed"]
                    if r["event"] == "report"}
    assert [r for r in observed if r["event"] == "ended"] == \
        [r for r in reference["observed"] if r["event"] == "ended"]


def _exploits(observed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The restores where a trial continued from another trial's checkpoint (PBT's exploit)."""
    return [r for r in observed if r["event"] == "restored" and r["writer"] != r["trial"]]


@pytest.mark.timeout(600)
def test_pbt_hands_a_tune_function_its_donors_checkpoint_as_a_plain_tuner_does(
        tmp_path: Path, ray_cluster) -> None:
    """Tune's PBT example function under plain ``PopulationBasedTraining`` and as a sweep with
    ``scheduler=pbt``: in both, exploited trials continue from a donor's own checkpoint (the
    state its loop wrote), right after the donor's step, and every trial reaches the end."""
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    import tests.conformance.tune_loops.objectives as objectives
    from sweeps import compose, run_sweep
    from sweeps.search.schedulers import decision_log

    # Ray's PBT ranks each trial's latest score, whatever step it came from, and this objective's
    # accuracy grows by lr a step: with lrs drawn at random, a slow trial that two CPUs let run
    # ahead can outrank a better one and no trial ever exploits. Fixed lrs ten times apart keep
    # the 0.001 trial the worst at any step, so the reference exploits in every ordering.
    steps, observe = 4, tmp_path / "plain" / "observed"
    lrs = tune.grid_search([0.001, 0.01, 0.05, 0.1])
    tune.Tuner(objectives.pbt, param_space={"lr": lrs, "steps": steps,
                                            "observe_dir": str(observe)},
               tune_config=tune.TuneConfig(
                   num_samples=1, metric="mean_accuracy", mode="max",
                   scheduler=PopulationBasedTraining(
                       time_attr="training_iteration", perturbation_interval=1,
                       quantile_fraction=0.5, hyperparam_mutations={"lr": [0.001, 0.1]})),
               run_config=tune.RunConfig(name="plain", storage_path=str(tmp_path / "storage"),
                                         stop={"training_iteration": steps})).fit()
    assert _exploits(read(observe)), read(observe)  # the reference exploited

    observe = tmp_path / "sweep" / "observed"
    result = run_sweep(compose("conformance", [
        f"experiment.trainable={MODULE}:pbt", "experiment.metric=mean_accuracy",
        "experiment.mode=max", "experiment.time_attr=iterations", "search=random",
        "experiment.search_space.lr='interval(0.001, 0.1)'", "search.num_samples=4",
        "scheduler=pbt", f"scheduler.max_t={steps}", "scheduler.perturbation_interval=1",
        "scheduler.quantile_fraction=0.5", f"+experiment.params.steps={steps}",
        f"+experiment.params.observe_dir={observe}", f"sweep.dir={tmp_path / 'sweep' / 'dir'}",
        "tracking.enabled=false", "sweep.seed=0"], config_dir=CONF))
    exploits = _exploits(read(observe))
    decided = [r for r in decision_log(result.sweep_dir).records() if r.get("exploit")]
    assert exploits and decided, (read(observe), decided)
    for restore in exploits:  # from the donor PBT chose, at the step it had reached
        assert any(d["trial"] == restore["trial"] and d["exploit"]["donor"] == restore["writer"]
                   and d["exploit"]["donor_epoch"] == restore["step"] for d in decided), \
            (restore, decided)
    assert set(result.summary.table["epochs"]) == {steps}, result.summary.table
