"""Tracking to a real MLflow server that goes away mid-sweep and comes back: nothing lost,
nothing duplicated, training never waits for it."""

from __future__ import annotations

import threading
import time

import pytest

from sweeps import run_sweep

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """One server for the module's tests (each in its own experiment and registered model);
    the outage test bounces it and leaves it up."""
    from tests.conftest import MLflowServer

    server = MLflowServer(tmp_path_factory.mktemp("mlflow-server"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _bounce_after_first_metrics(server, journal_path, down_s: float, log: list) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if journal_path.exists() and '"op":"metrics"' in journal_path.read_text():
            break
        time.sleep(0.2)
    server.stop()
    log.append(("down", time.monotonic()))
    time.sleep(down_s)
    server.start()
    log.append(("up", time.monotonic()))


def test_server_outage_mid_sweep_loses_and_duplicates_nothing(tmp_path, ray_cluster, small_config,
                                                              mlflow_server) -> None:
    from mlflow import MlflowClient

    sweep_dir = tmp_path / "outage"
    cfg = small_config(
        "search.num_samples=4", "scheduler.max_t=3", f"sweep.dir={sweep_dir}",
        f"tracking.uri={mlflow_server.uri}", "tracking.experiment_name=outage",
        "tracking.model_name=outage", "tracking.flush_timeout_s=120",
    )
    events: list = []
    bouncer = threading.Thread(target=_bounce_after_first_metrics, daemon=True, args=(
        mlflow_server, sweep_dir / "tracking" / "journal.jsonl", 8.0, events))
    bouncer.start()
    result = run_sweep(cfg)
    bouncer.join(timeout=120)
    assert [e for e, _ in events] == ["down", "up"], "the server really went away and came back"
    assert result.tracking_held == (0, "", "")

    client = MlflowClient(mlflow_server.uri)
    experiment = client.get_experiment_by_name("outage")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 5  # one parent + one child per trial, no duplicates from retries
    children = {r.data.tags["sweeps.trial_id"]: r for r in runs
                if r.data.tags.get("sweeps.role") == "trial"}
    outcome = dict(zip(result.summary.table["trial_id"], result.summary.table["status"],
                       strict=True))
    for trial in result.results:
        run = children[trial.metrics["trial_id"]]
        reported = trial.metrics_dataframe[["epoch", "val_acc"]].values.tolist()
        history = client.get_metric_history(run.info.run_id, "val_acc")
        assert sorted([m.step, m.value] for m in history) == sorted(reported)
        # Completed and early-stopped trials alike end FINISHED (KILLED is an aborted run: a
        # trial_end record lost in the outage), tagged with the summary's outcome.
        assert (run.info.status, run.data.tags["sweeps.status"]) == (
            "FINISHED", outcome[trial.metrics["trial_id"]]), run.data.tags
    versions = client.search_model_versions("name='outage'")
    assert len(versions) == 1, "best model registered once despite the outage"
    import mlflow.pytorch
    import torch

    from trainables.digits import evaluate, load_split

    mlflow.set_tracking_uri(mlflow_server.uri)
    model = mlflow.pytorch.load_model(f"models:/outage/{versions[0].version}").eval()
    _, _, x_va, y_va = load_split()
    _, correct, count = evaluate(model, torch.from_numpy(x_va), torch.from_numpy(y_va))
    assert correct / count == pytest.approx(result.best["value"], abs=1e-12)


def test_mlflow_variables_choose_the_server_and_a_resume_from_elsewhere_continues(
        tmp_path, ray_cluster, small_config, mlflow_server, monkeypatch) -> None:
    """MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME, as a team sets them for every tool:
    the runs land on that server, in that experiment; the same command from another directory
    continues the same runs (the parent reopened, no second set of trial runs)."""
    from mlflow import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team-exp")
    args = ("search.num_samples=2", "scheduler=none", "scheduler.max_t=2", "tracking.uri=null",
            f"sweep.dir={tmp_path / 'sw'}")
    for start, where in ((1, "a"), (2, "b")):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        result = run_sweep(small_config(*args))
        assert (result.tracking.uri, result.tracking.uri_from) == (mlflow_server.uri,
                                                                   "MLFLOW_TRACKING_URI")
        assert result.tracking.experiment_from == "MLFLOW_EXPERIMENT_NAME"
        assert not (tmp_path / where / "mlflow.db").exists()  # not the cwd's default store
        client = MlflowClient(mlflow_server.uri)
        experiment = client.get_experiment_by_name("team-exp")
        runs = client.search_runs([experiment.experiment_id])
        parents = [r for r in runs if r.data.tags.get("sweeps.role") == "parent"]
        assert len(parents) == 1 and len(runs) == 3
        assert parents[0].data.tags.get("sweeps.starts", "1") == str(start)
        assert parents[0].info.status == "FINISHED"
