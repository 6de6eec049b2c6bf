"""Inline trials of 2 workers: rank 0 in the Tune trial process, rank 1 in a peer process the
trial process keeps (``sweeps.trial.backends.peers``), no Ray Train controller or worker.

The loop (``ranks_loop.py``) is written as Ray Train's docs write one: DDP, a distributed
sampler, every rank reporting its part of each checkpoint, ``ray.train.collective``, resume
with ``get_checkpoint``. What such loops observe is compared with what a plain Ray Train run
gives them in ``tests/conformance``; here, what only inline trials do: peers kept across trials
and unwound by ASHA's stops, a peer killed or raising mid-step, ranks reporting unevenly.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sweeps import compose, run_sweep
from sweeps._ray import train_snapshot

pytestmark = pytest.mark.slow

EPOCHS = 4


def _actor_classes() -> Counter:
    """How many actors of each class this Ray instance has created so far (dead ones too)."""
    from ray._private.state import actors

    return Counter(a.get("ActorClassName", "").rpartition(".")[2] for a in actors().values())


def _sweep(tmp_path: Path, name: str, *overrides: str, budget: int = EPOCHS) -> tuple:
    import ray

    (tmp_path / "markers").mkdir(exist_ok=True)
    cfg = compose("digits", [
        "experiment.trainable=tests.integration.ranks_loop:train_ranks",
        "experiment.metric=loss", "experiment.mode=min",
        *[f"~experiment.search_space.{k}" for k in ("hidden", "depth", "dropout", "batch_size")],
        "experiment.search_space.lr='tag(log, interval(0.001, 0.1))'",
        f"+experiment.params.epochs={EPOCHS}", "+experiment.params.fault=none",
        f"+experiment.params.marker_dir={tmp_path / 'markers'}", f"scheduler.max_t={budget}",
        "search=random", "search.max_concurrent_trials=1", "scaling.num_workers=2",
        f"sweep.dir={tmp_path / name}", "sweep.seed=0", "tracking.enabled=false", *overrides,
    ])
    before = _actor_classes()
    result = run_sweep(cfg)
    groups = ray.util.placement_group_table()
    return result, _actor_classes() - before, groups


# The same loop as a Ray Train run: the conformance suite's torch_ddp and shards loops, against
# a plain TorchTrainer.
@pytest.mark.parametrize("executor", ["auto"], ids=["inline"])
def test_the_docs_loop_sees_two_ranks_and_checkpoints_hold_both_parts(tmp_path, ray_cluster,
                                                                      executor) -> None:
    result, actors, groups = _sweep(
        tmp_path, "two", "search.num_samples=4", "scheduler.grace_period=1",
        "scheduler.reduction_factor=2", f"trial.executor={executor}")
    table = result.summary.table
    assert len(table) == 4 and set(table["status"]) <= {"completed", "stopped"}, table
    assert (table["status"] == "stopped").any(), table  # a stopped trial's peer unwound too
    for trial in result.results:
        frame = trial.metrics_dataframe
        assert frame["epoch"].tolist() == list(range(1, len(frame) + 1))
        assert set(frame["world_size"]) == {2} and frame["ddp"].all() and frame["sampler"].all()
        assert frame["shared_ok"].all()
    for run_dir in Path(result.sweep_dir, "train").iterdir():
        # The checkpoints the run registered (Train may also leave the part a stopped run's
        # rank 1 uploaded after the stop, unregistered: not compared here).
        kept = [run_dir / name for name, _ in train_snapshot.entries(train_snapshot.load(run_dir))]
        assert kept
        for checkpoint in kept:  # each rank's part, in one directory
            names = sorted(p.name for p in checkpoint.iterdir())
            assert names == ["model.pt", "rank0.txt", "rank1.txt"], (checkpoint, names)
    states = [pg["state"] for pg in groups.values()]
    assert "CREATED" not in states and "PENDING" not in states, groups
    if executor == "auto":
        assert actors["TrainController"] == actors["RayTrainWorker"] == 0, actors
        assert 1 <= actors["ImplicitFunc"] <= 2, actors
        assert actors["Peer"] == actors["ImplicitFunc"], actors  # kept across trials
    else:
        assert actors["TrainController"] == 4 and actors["RayTrainWorker"] == 8, actors


@pytest.mark.timeout(300)  # a rank left in a collective would wait for gloo's 30 minutes
def test_the_peer_starts_while_rank_0_imports_the_loop(tmp_path, ray_cluster) -> None:
    """A new trial process starts its peer before it imports the loop, so both import it at
    once (``import_overlap``: each import waits for the other's): each saw two imports."""
    import shutil

    from tests.integration.import_overlap import MARKS

    shutil.rmtree(MARKS, ignore_errors=True)
    MARKS.mkdir()
    try:
        result, actors, _ = _sweep(tmp_path, "overlap", "search.num_samples=1",
                                   "experiment.trainable=tests.integration.import_overlap:"
                                   "train_ranks", budget=1)
        saw = sorted(p.read_text() for p in MARKS.glob("*.saw"))
    finally:
        shutil.rmtree(MARKS, ignore_errors=True)
    assert list(result.summary.table["status"]) == ["completed"]
    assert actors["Peer"] == 1 and saw == ["2", "2"], (actors, saw)


@pytest.mark.parametrize("fault", ["step", "kill"])
def test_a_failed_peer_restarts_the_trial_from_its_checkpoint(tmp_path, ray_cluster,
                                                              fault) -> None:
    """Rank 1 raises while rank 0 waits in DDP's all-reduce (``step``: only killing the peers
    releases it), or rank 1's process dies (``kill``). (Rank 1 raising while rank 0 waits at
    its report is the conformance suite's torch_ddp loop, against plain Ray Train.)"""
    result, actors, groups = _sweep(tmp_path, fault, "search.num_samples=1", "scheduler=none",
                                    f"experiment.params.fault={fault}", "trial.max_failures=1")
    table = result.summary.table
    assert table["status"].tolist() == ["completed"], table
    assert (tmp_path / "markers" / f"{table['trial_id'][0]}.{fault}").exists()  # it happened
    frame = result.results[0].metrics_dataframe
    assert frame["epoch"].tolist() == [1, 2, 3, 4]  # epoch 2 again after the restart, once
    assert frame["resumed_from"].tolist() == [0, 1, 1, 1]  # from epoch 1's checkpoint
    assert actors["Peer"] == 2, actors  # the failed attempt's peer is replaced, as Train does
    states = [pg["state"] for pg in groups.values()]
    assert "CREATED" not in states and "PENDING" not in states, groups


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("fault", "failures", "message"), [
    ("uneven", 1, "ReportMismatch: rank 1 ended its loop (returned) while rank 0 waits for it "
                  "at a ray.train.report: every rank must call ray.train.report as often"),
])
def test_a_failed_trial_names_the_rank_and_why(tmp_path, ray_cluster, fault, failures,
                                               message) -> None:
    """A restart that would fail the same way (ranks that report unevenly) is not made. (A
    rank's own error with no restart left is the conformance suite's rank_fails loops.)"""
    result, _, _ = _sweep(tmp_path, "fails", "search.num_samples=1", "scheduler=none",
                          f"experiment.params.fault={fault}", f"trial.max_failures={failures}",
                          "trial.max_retries=0", budget=EPOCHS + 2)  # rank 0's extra report
    # is not past the budget, where Tune would end the trial before it waits for rank 1
    table = result.summary.table
    assert table["status"].tolist() == ["error"], table
    error = str(result.results[0].error)
    assert message in error, error
