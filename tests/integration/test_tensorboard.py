"""``tensorboard --logdir <sweep dir>`` after a real sweep, read by TensorBoard's own reader:
one run per trial at the trial's epochs, HParams sessions with the sampled values and the
final/best metric. Written by the driver from what Tune receives, whatever backend ran the
trial (the conformance suite shows the backends report alike), so one backend here."""

from __future__ import annotations

import math

import pytest

from sweeps import run_sweep
from tests.integration.tensorboard_runs import read_runs, scalar_steps, session

pytestmark = pytest.mark.slow
pytest.importorskip("tensorboard")

PARAMS = ("lr", "hidden", "depth", "dropout", "batch_size")  # digits' search space


def test_each_trial_is_a_run_at_its_epochs_with_its_hparams(tmp_path, ray_cluster,
                                                            small_config) -> None:
    result = run_sweep(small_config(
        "trial.executor=inline", "scaling.num_workers=1", "search.num_samples=3",
        "search.max_concurrent_trials=1", "scheduler.max_t=3", "scheduler.grace_period=1",
        "scheduler.reduction_factor=2"))
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
        assert not {t for t in tags if t.startswith("ray/") or t == "training_iteration"}
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
