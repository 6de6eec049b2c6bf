"""A real 12-trial ASHA sweep, one trial at a time, on 2 CPUs, on the default backend: as
1-worker trials and as 2-worker trials (rank 1 in a peer process,
``sweeps.trial.backends.peers``), every test on both. What differs per backend is the
conformance suite's (tests/conformance); a Train-run ASHA sweep's processes and releases are
tests/integration/test_reused_train_process.py's.

Tracked in MLflow on the default kind of store (SQLite, here in the test's directory).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
import torch

from sweeps import compose, load_checkpoint, load_model, run_sweep
from tests.integration.tensorboard_runs import read_runs, scalar_steps, session
from trainables.digits import evaluate, load_split

pytestmark = pytest.mark.slow

NUM_SAMPLES = 12
PARAMS = ("lr", "hidden", "depth", "dropout", "batch_size")  # digits' search space


def _actor_classes() -> Counter:
    """How many actors of each class this Ray instance has created so far (dead ones too)."""
    from ray._private.state import actors

    return Counter(a.get("ActorClassName", "").rpartition(".")[2] for a in actors().values())


@pytest.fixture(scope="module", params=["inline", "inline-2"])
def sweep(request, tmp_path_factory, ray_cluster):
    """The same sweep as inline 1-worker trials and as inline 2-worker trials."""
    import ray

    executor, _, workers = request.param.partition("-")
    workers = workers or "1"
    root = tmp_path_factory.mktemp(f"sweeps-{request.param}")
    sweep_dir = root / "asha12"
    cfg = compose("digits", [
        f"search.num_samples={NUM_SAMPLES}", "search.max_concurrent_trials=1",
        f"scaling.num_workers={workers}", f"trial.executor={executor}",
        "scheduler.max_t=9", "scheduler.grace_period=1",
        "scheduler.reduction_factor=3", f"sweep.dir={sweep_dir}", "sweep.seed=0",
        f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
    ])
    before = _actor_classes()
    result = run_sweep(cfg)
    table = ray.util.placement_group_table()
    result.executor, result.workers = executor, int(workers)
    result.actors = _actor_classes() - before
    return result, table


@pytest.fixture(scope="module")
def mlflow_runs(sweep):
    """(client, parent run, {trial id: child run}) of the sweep."""
    from mlflow import MlflowClient

    result, _ = sweep
    uri = f"sqlite:///{result.sweep_dir.parent / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("digits")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
    assert len(parents) == 1
    parent = parents[0]
    children = {r.data.tags["sweeps.trial_id"]: r for r in runs
                if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
    return client, parent, children


def test_every_trial_ran_and_asha_stopped_at_least_half(sweep) -> None:
    result, _ = sweep
    table = result.summary.table
    assert len(table) == NUM_SAMPLES
    assert set(table["status"]) <= {"completed", "stopped"}, table
    stopped = table[table["status"] == "stopped"]
    assert len(stopped) >= NUM_SAMPLES / 2, table
    assert (stopped["epochs"] < 9).all() and (table[table["status"] == "completed"]["epochs"]
                                              == 9).all()


def test_no_placement_group_left(sweep) -> None:
    result, pg_table = sweep
    states = [pg["state"] for pg in pg_table.values()]
    assert "CREATED" not in states and "PENDING" not in states, pg_table
    assert result.released == {}  # no Train worker group to release; Tune's is checked above


def test_processes_per_trial(sweep) -> None:
    """No Train process at all, and with 2 workers one peer per trial process; the trial
    process is reused (one trial at a time here), and with it its peer."""
    result, _ = sweep
    actors = result.actors
    assert actors["TrainController"] == actors["RayTrainWorker"] == 0, actors
    assert actors["Peer"] == (result.workers - 1) * actors["ImplicitFunc"], actors
    assert 1 <= actors["ImplicitFunc"] <= 2, actors


def test_epochs_are_reported_once_each_in_order(sweep) -> None:
    result, _ = sweep
    for trial in result.results:
        epochs = trial.metrics_dataframe["epoch"].tolist()
        assert epochs == list(range(1, len(epochs) + 1)), epochs


def test_best_checkpoint_reproduces_the_reported_accuracy(sweep) -> None:
    result, _ = sweep
    best = result.best
    assert best is not None and best["value"] >= 0.9, best
    payload = load_checkpoint(best["checkpoint"])
    assert payload["epoch"] == best["epoch"]
    assert payload["optimizer_state"]["state"], "optimizer state is saved for resuming"
    model = load_model(best["checkpoint"])
    _, _, x_va, y_va = load_split()
    _, correct, count = evaluate(model, torch.from_numpy(x_va), torch.from_numpy(y_va))
    assert correct / count == pytest.approx(best["value"], abs=1e-12)


def test_checkpoints_kept_are_the_best_and_the_latest(sweep) -> None:
    result, _ = sweep
    completed = result.summary.table.query("status == 'completed'")
    assert not completed.empty
    trial_id = completed.iloc[0]["trial_id"]
    kept = sorted(Path(result.sweep_dir, "train", trial_id).glob("checkpoint_epoch_*"))
    epochs = [load_checkpoint(d)["epoch"] for d in kept]
    assert 9 in epochs, "the latest checkpoint is always kept"
    assert len(kept) <= 2 + 1, epochs  # checkpoint.keep best by val_acc, plus the latest
    scores = {load_checkpoint(d)["epoch"]: load_checkpoint(d)["metrics"]["val_acc"]
              for d in kept}
    trial = next(r for r in result.results if r.metrics.get("trial_id") == trial_id)
    history = trial.metrics_dataframe.set_index("epoch")["val_acc"]
    assert max(scores.values()) == history.max()


def test_summary_files_and_plots_are_written(sweep) -> None:
    import pandas as pd

    result, _ = sweep
    assert (result.sweep_dir / "summary.csv").read_text().count("\n") == NUM_SAMPLES + 1
    parquet = pd.read_parquet(result.sweep_dir / "summary.parquet")
    assert list(parquet["trial_id"]) == list(result.summary.table["trial_id"])
    assert '"checkpoint"' in (result.sweep_dir / "best.json").read_text()
    assert "experiment:" in (result.sweep_dir / "config.yaml").read_text()
    assert [p.name for p in result.plots] == ["learning_curves.png", "parallel_coordinates.png",
                                              "metric_vs_params.png", "importance.png"]
    ranked = result.summary.importance.values  # 12 trials: enough to rank the 5 params
    assert len(ranked) == 5 and sum(ranked.values()) == pytest.approx(1.0)
    assert json.loads((result.sweep_dir / "importance.json").read_text())["values"] == ranked
    assert all(p.parent == result.sweep_dir / "plots" and p.stat().st_size > 10_000
               for p in result.plots)


def test_load_best_reproduces_the_best_accuracy(sweep) -> None:
    from sweeps import load_best

    result, _ = sweep
    model = load_best(result.sweep_dir)
    _, _, x_va, y_va = load_split()
    _, correct, count = evaluate(model, torch.from_numpy(x_va), torch.from_numpy(y_va))
    assert correct / count == pytest.approx(result.best["value"], abs=1e-12)


def test_mlflow_parent_run_holds_the_sweep(sweep, mlflow_runs) -> None:
    result, _ = sweep
    client, parent, children = mlflow_runs
    assert parent.info.status == "FINISHED"
    assert parent.data.params["search.num_samples"] == str(NUM_SAMPLES)
    assert parent.data.params["experiment.search_space.lr"] == "tag(log, interval(1e-4, 0.5))"
    assert parent.data.tags["sweeps.best_trial_id"] == result.best["trial_id"]
    assert parent.data.tags["sweeps.trials_failed"] == "0"
    counts = result.summary.table["status"].value_counts()
    assert parent.data.tags["sweeps.trials"] == (
        f"{NUM_SAMPLES} trials: {counts.get('completed', 0)} completed, "
        f"{counts.get('stopped', 0)} stopped, 0 failed")
    experiment = client.get_experiment(parent.info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"config.yaml", "search_space.json", "summary.csv", "best.json", "plots"} <= artifacts
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert plots == {"plots/learning_curves.png", "plots/parallel_coordinates.png",
                     "plots/metric_vs_params.png", "plots/importance.png"}
    assert {k: v for k, v in parent.data.metrics.items() if k.startswith("importance.")} == \
        pytest.approx({f"importance.{p}": v for p, v in result.summary.importance.values.items()})
    assert len(children) == NUM_SAMPLES


def test_mlflow_child_per_trial_with_one_point_per_epoch(sweep, mlflow_runs) -> None:
    result, _ = sweep
    client, _, children = mlflow_runs
    rows = result.summary.table.set_index("trial_id")
    for trial in result.results:
        trial_id = trial.metrics["trial_id"]
        run = children[trial_id]
        epochs = trial.metrics_dataframe["epoch"].tolist()
        history = client.get_metric_history(run.info.run_id, "val_acc")
        assert sorted(m.step for m in history) == epochs  # one point per epoch, steps 1..k
        assert run.data.params["lr"] == str(trial.config["lr"])
        assert run.data.tags["sweeps.trial_id"] == trial_id
        status = rows.loc[trial_id, "status"]
        assert run.data.tags["sweeps.status"] == status
        # Stopped by ASHA is the search working, not a failure: FINISHED, and named so.
        assert run.info.status == "FINISHED"
        if status == "stopped":
            assert run.data.tags["sweeps.stop_reason"].startswith("early-stopped by asha")
            if trial_id != result.best["trial_id"]:
                epoch = rows.loc[trial_id, "epochs"]
                assert run.info.run_name == f"{trial_id} stopped@{epoch}"
    best_run = children[result.best["trial_id"]]
    assert best_run.info.run_name == f"{result.best['trial_id']} best"
    assert best_run.data.tags["sweeps.best"] == "true"
    runs_map = json.loads((result.sweep_dir / "tracking" / "runs.json").read_text())
    assert runs_map["trials"] == {t: r.info.run_id for t, r in children.items()}


def test_mlflow_trial_runs_hold_system_metrics_of_every_ranks_process(sweep, mlflow_runs) -> None:
    """tracking.system_metrics (on by default): sampled in the trial's processes (inline: the
    trial process, rank 1 in its peer), at times inside the trial's run, steps 0, 1, ...; they
    are no metric anywhere else (Tune's results, sweeps.load's history)."""
    from sweeps import load

    result, _ = sweep
    client, _, children = mlflow_runs
    ranks = ["system/"] + (["system/rank_1/"] if result.workers == 2 else [])
    names = {f"{r}process_{m}" for r in ranks for m in ("memory_usage_megabytes",
                                                          "cpu_utilization_percentage")}
    for run in children.values():
        run = client.get_run(run.info.run_id)
        assert {k for k in run.data.metrics if k.startswith("system/")} == names
        for name in names:
            history = client.get_metric_history(run.info.run_id, name)
            assert sorted(m.step for m in history) == list(range(len(history)))
            assert all(run.info.start_time <= m.timestamp <= run.info.end_time
                       for m in history), (name, history, run.info)
            if "memory" in name:  # a process that imported torch and trained
                assert min(m.value for m in history) > 100, history
    for trial in result.results:
        assert not [k for k in [*trial.metrics, *trial.metrics_dataframe] if "system" in k]
    assert not [k for k in load(result.sweep_dir).history if "system" in k]


def test_registered_model_loads_and_reproduces_best_accuracy(sweep, mlflow_runs) -> None:
    import mlflow.pytorch

    result, _ = sweep
    client, _, children = mlflow_runs
    versions = client.search_model_versions("name='digits'")
    assert len(versions) == 1
    version = versions[0]
    assert version.run_id == children[result.best["trial_id"]].info.run_id
    mlflow.set_tracking_uri(client.tracking_uri)
    model = mlflow.pytorch.load_model(f"models:/digits/{version.version}").eval()
    _, _, x_va, y_va = load_split()
    _, correct, count = evaluate(model, torch.from_numpy(x_va), torch.from_numpy(y_va))
    assert correct / count == pytest.approx(result.best["value"], abs=1e-12)


def test_tensorboard_has_each_trial_as_a_run_at_its_epochs_with_its_hparams(sweep) -> None:
    """``tensorboard --logdir <sweep dir>``, read by TensorBoard's own reader: one run per
    trial at the trial's epochs, HParams sessions with the sampled values and the final/best
    metric. Written by the driver from what Tune receives, whatever backend ran the trial (the
    conformance suite shows the backends report alike)."""
    pytest.importorskip("tensorboard")
    result, _ = sweep
    table = result.summary.table.set_index("trial_id")
    multiplexer = read_runs(result.sweep_dir)
    # One run per trial: Tune's own event files (tags ray/tune/..., in <sweep dir>/<trial>/)
    # are not written.
    assert sorted(multiplexer.Runs()) == sorted(f"tensorboard/{t}" for t in table.index)
    for trial, row in table.iterrows():
        run = f"tensorboard/{trial}"
        epochs = list(range(1, int(row["epochs"]) + 1))
        assert scalar_steps(multiplexer, run, "val_acc") == epochs
        tags = set(multiplexer.GetAccumulator(run).Tags()["tensors"])
        assert not {t for t in tags if t.startswith(("ray/", "system/", "sweeps_system"))
                    or t == "training_iteration"}
        assert {"final/val_acc", "best/val_acc"} <= tags
        values = [e.tensor_proto.float_val[0] for e in multiplexer.Tensors(run, "val_acc")]
        best = multiplexer.Tensors(run, "best/val_acc")
        assert [e.step for e in best] == [epochs[-1]]
        assert math.isclose(best[0].tensor_proto.float_val[0], max(values), rel_tol=1e-6)
        assert math.isclose(best[0].tensor_proto.float_val[0], row["val_acc"], rel_tol=1e-5)
        hparams, status = session(multiplexer, run)
        assert hparams == pytest.approx({p: float(row[p]) for p in PARAMS}), (hparams, row)
        assert status == "STATUS_SUCCESS"  # completed or stopped by ASHA
    assert not list(result.sweep_dir.glob("*/events.out.tfevents.*"))
