"""A real PBT sweep: 4 trials x 4 epochs, 1 Train worker each, on 2 CPUs, tracked in SQLite;
once with the sweep directory on disk, once on S3 (moto's server), asserted the same way.

Asserted from the decision log and the run directories: an exploit happened, the exploited
trial's loop really continued from the donor's checkpoint (its first report after the exploit
is the donor's epoch + 1), with the explored values as its config, every trial trained to
``max_t``, and no placement group is left (a paused trial's workers included).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweeps import files, load_checkpoint, run_sweep
from sweeps.protocol import CLOCK_KEY, TRIAL_FILE
from sweeps.search.schedulers import decision_log
from sweeps.search.space import flatten
from sweeps.trial import report_log
from sweeps.trial.exploit import applied_generation, latest_exploit

pytestmark = pytest.mark.slow

MAX_T = 4
EPOCH_S = 1.5  # the digits epoch takes ~0.1 s: stretched, two trials' epochs interleave


def slow_mlp(config: dict) -> None:
    """``trainables.digits:train_mlp`` with every report delayed by ``EPOCH_S``, so that the
    two trials running at once report alternately and PBT has a population to rank (the
    built-in loop can finish all its epochs before the other trial's workers are up)."""
    import time

    import ray.train

    from trainables.digits import train_mlp

    report = ray.train.report

    def slow_report(*args, **kwargs):
        time.sleep(EPOCH_S)
        return report(*args, **kwargs)

    ray.train.report = slow_report  # this worker process only
    train_mlp(config)


@pytest.fixture(scope="module", params=["local", "s3"])
def pbt_sweep(request, tmp_path_factory):
    import ray

    from sweeps import compose
    from tests.conftest import private_ray

    root = tmp_path_factory.mktemp("pbt")
    sweep_dir = str(root / "sweep")
    if request.param == "s3":  # exported before Ray starts: its workers reach the store too
        sweep_dir = f"s3://{request.getfixturevalue('moto_s3').BUCKET}/{root.name}/pbt"
    cfg = compose("digits", [
        f"experiment.trainable={__name__}:slow_mlp", "scheduler=pbt", "search=random",
        "search.num_samples=4", f"scheduler.max_t={MAX_T}",
        "scheduler.perturbation_interval=1", "scheduler.quantile_fraction=0.5",
        "scaling.num_workers=1", "ray.num_cpus=2", "sweep.seed=0",
        # hidden/depth stay searched: scheduler.mutate's default perturbs only the floats and
        # copies the rest from the donor, so its checkpoint fits the model
        f"sweep.dir={sweep_dir}", f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
    ])
    with private_ray():
        result = run_sweep(cfg)
        return result, ray.util.placement_group_table()


def test_an_exploited_trial_continues_from_its_donors_checkpoint(pbt_sweep) -> None:
    result, _ = pbt_sweep
    records = decision_log(result.sweep_dir).records()
    exploited = sorted({r["trial"] for r in records if r.get("exploit")})
    assert exploited, [(r["trial"], r.get("epoch"), r.get("action")) for r in records]
    for trial_id in exploited:
        ex = latest_exploit(records, trial_id)
        run_dir = result.sweep_dir / "train" / trial_id
        assert applied_generation(run_dir) == ex["generation"]
        reports = report_log.records(run_dir)
        assert reports, f"trial {trial_id} trained nothing after its exploit"
        # TrialSession restored the donor's checkpoint: it went on right after the donor's epoch
        assert reports[0]["epoch"] == ex["donor_epoch"] + 1, (ex, reports[0])
        assert reports[0][CLOCK_KEY] == ex["donor_epoch"] + 1
        # ... with the explored values as its config (what the loop got, and what it saved)
        pinned = flatten(json.loads(files.read_text(run_dir / TRIAL_FILE)))
        assert {k: pinned[k] for k in ex["config"]} == ex["config"]
        last = Path(reports[-1]["checkpoint_path"])
        saved = flatten(load_checkpoint(last)["params"])
        assert {k: saved[k] for k in ex["config"]} == ex["config"]
        trial = next(r for r in result.results if r.metrics.get("trial_id") == trial_id)
        assert {k: flatten(trial.config)[k] for k in ex["config"]} == ex["config"]
        assert files.is_dir(result.sweep_dir / "train" / f"{trial_id}.pbt" / "gen0")


def test_every_trial_trained_to_max_t(pbt_sweep) -> None:
    result, _ = pbt_sweep
    table = result.summary.table
    assert len(table) == 4
    assert set(table["status"]) == {"completed"}, table
    assert (table["epochs"] == MAX_T).all(), table


def test_no_placement_group_left(pbt_sweep) -> None:
    _, pg_table = pbt_sweep
    states = [pg["state"] for pg in pg_table.values()]
    assert "CREATED" not in states and "PENDING" not in states, pg_table


def test_mlflow_shows_every_exploit_and_keeps_every_report(pbt_sweep) -> None:
    from mlflow import MlflowClient

    from sweeps.report.exploits import exploits_of

    result, _ = pbt_sweep
    exploits = exploits_of(result.sweep_dir)
    assert exploits
    client = MlflowClient(result.tracking_uri)
    experiment = client.get_experiment_by_name("digits")
    runs = {r.data.tags["sweeps.trial_id"]: r for r in client.search_runs(
        [experiment.experiment_id]) if r.data.tags.get("sweeps.role") == "trial"}
    for trial_id in {e.trial for e in exploits}:
        mine = [e for e in exploits if e.trial == trial_id]
        tags = runs[trial_id].data.tags
        assert tags["sweeps.pbt.exploits"] == str(len(mine))
        for e in mine:
            assert tags[f"sweeps.pbt.exploit.{e.generation}"] == e.describe()
            assert e.donor in e.describe()
        for key, (_, new) in mine[-1].changed.items():
            assert tags[f"sweeps.pbt.value.{key}"] == str(new)
        # Every result Tune saw is in MLflow, the post-exploit ones after the earlier steps
        history = client.get_metric_history(runs[trial_id].info.run_id, "val_acc")
        steps = [m.step for m in history]
        assert len(steps) == len(set(steps))
        trial = next(r for r in result.results if r.metrics.get("trial_id") == trial_id)
        seen = trial.metrics_dataframe["val_acc"].dropna()
        assert len(history) == len(seen), (steps, list(seen))
