"""A Train worker that dies mid-run: the trial restarts from its own last checkpoint."""

from __future__ import annotations

import pytest

from sweeps import run_sweep

pytestmark = pytest.mark.slow


def test_worker_crash_resumes_from_last_checkpoint(tmp_path, ray_cluster, small_config,
                                                   capsys) -> None:
    log = tmp_path / "attempts.log"
    cfg = small_config(
        "trial.executor=train",  # the loop waits on Train's get_all_reported_checkpoints
        "experiment.trainable=tests.integration.flaky:train_crash_once",
        f"+experiment.params.log={log}", "+experiment.params.crash_epoch=3",
        "+experiment.params.crash_rank=1", "search=random", "scheduler=none",
        "search.num_samples=1", "scheduler.max_t=4", "trial.max_failures=1",
    )
    result = run_sweep(cfg)
    assert (tmp_path / "crashed").exists(), "the simulated crash happened"
    starts = sorted(log.read_text().split())
    # First attempt: both ranks start at epoch 1. After the crash in epoch 3, both restart at
    # epoch 3, i.e. right after the last checkpoint (epoch 2), not from scratch.
    assert starts == ["0:1", "0:3", "1:1", "1:3"], starts
    row = result.summary.table.iloc[0]
    assert (row["status"], row["epochs"]) == ("completed", 4)
    epochs = result.results[0].metrics_dataframe["epoch"].tolist()
    assert epochs == [1, 2, 3, 4], epochs
    # The restart Train made is seen: the console at the next report, the summary, MLflow.
    line = ("rank 1 of 2 raised RuntimeError: simulated worker crash after epoch 2; restarted "
            "from the checkpoint of epoch 2, attempt 2 of 2 (trial.max_failures)")
    console = capsys.readouterr().out
    assert f"trial {row['trial_id']} {line}" in console, console[-3000:]
    assert result.summary.restarts == {row["trial_id"]: (1, line)}
    assert row["restarts"] == 1
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()],
                                filter_string=f"tags.`sweeps.trial_id` = '{row['trial_id']}'")
    assert (run.data.tags["sweeps.restarts"], run.data.tags["sweeps.last_failure"]) == ("1", line)
    # System metrics from both Train workers (rank 1 under system/rank_1/), of both attempts,
    # inside the run, numbered on across the restart.
    for name in ("system/process_memory_usage_megabytes",
                 "system/rank_1/process_memory_usage_megabytes"):
        history = client.get_metric_history(run.info.run_id, name)
        assert len(history) >= 2 and min(m.value for m in history) > 100, (name, history)
        assert sorted(m.step for m in history) == list(range(len(history)))
        assert all(run.info.start_time <= m.timestamp <= run.info.end_time for m in history)


def test_worker_group_is_recorded_the_moment_train_creates_it(ray_cluster) -> None:
    """The ledger's record must not wait for the workers to start: a controller killed during
    those seconds would leave its group holding the CPUs, unrecorded, for the whole sweep."""
    import importlib

    from ray.util import placement_group_table

    from sweeps._ray import kv
    from sweeps._ray.placement import WORKER_GROUP_MODULE, record_groups_on_creation
    from sweeps.placement.ledger import PlacementGroupLedger, kv_key
    from sweeps.placement.reaper import release_all

    module = importlib.import_module(WORKER_GROUP_MODULE)
    original = module.placement_group
    pgs = []
    try:
        for trial in ("t1", "t2"):  # a second ledger in the same process takes the hook over
            assert record_groups_on_creation(PlacementGroupLedger("ledger-test", trial).record)
            pgs.append(module.placement_group(bundles=[{"CPU": 1}, {"CPU": 1}]))
            assert kv.get(kv_key("ledger-test", trial)) == pgs[-1].id.hex()
        assert module.placement_group is not original
        # The second group cannot be placed while the first holds both CPUs: recorded anyway.
        assert placement_group_table(pgs[-1])["state"] == "PENDING"
        assert release_all("ledger-test") == 2
        assert {placement_group_table(pg)["state"] for pg in pgs} == {"REMOVED"}
    finally:
        module.placement_group = original
        release_all("ledger-test")
