"""Train-backend trials start warm: while a trial trains, its Train run starts the next trial's
processes (``trial.prestart``, ``sweeps.trial.backends.prestart_next``).

Observed from a loop written as Ray's guides write one (``prestart_loop``): it reports when its
worker process was created (``t_proc_start``, from psutil), when it reported (``t_report``) and
torch's thread count. With prestart on, the second trial's worker process exists before the
first trial's last report; with it off, it is created after the first trial ended. Both are
run: the second case is what the first would read if the prestarted processes went unused (a
runtime env Ray hashes differently, a request the raylet cut, say). Either way a worker has the
threads a cold one has (the first trial's is always cold): Ray sets ``OMP_NUM_THREADS`` to the
worker's CPUs only when it hands the process its actor, after a prestarted one imported torch.
"""

from __future__ import annotations

import pytest

from sweeps import compose, run_sweep

pytestmark = pytest.mark.slow

EPOCHS = 3
EPOCH_S = 2.0  # long enough for the warm processes to boot beside training on 2 cores


def _reports(result) -> list[list[dict]]:
    """Each trial's reports (process start, report time, threads, OMP_NUM_THREADS), trials in
    the order they ran."""
    trials = []
    for res in result.results:
        frame = res.metrics_dataframe
        trials.append(frame[["t_proc_start", "t_report", "threads", "omp"]].to_dict("records"))
    return sorted(trials, key=lambda rows: rows[0]["t_report"])


@pytest.mark.parametrize("prestart", [True, False])
def test_next_trial_worker_starts_while_the_previous_trial_trains(tmp_path, ray_cluster,
                                                                   prestart) -> None:
    cfg = compose("digits", [
        "experiment.trainable=tests.integration.prestart_loop:train_func",
        f"+experiment.params.epoch_s={EPOCH_S}", f"+experiment.params.epochs={EPOCHS}",
        *[f"~experiment.search_space.{k}" for k in ("hidden", "depth", "dropout", "batch_size")],
        "search=random", "scheduler=none", "search.num_samples=2",
        "search.max_concurrent_trials=1", f"scheduler.max_t={EPOCHS}",
        "scaling.num_workers=1", "trial.executor=train", f"trial.prestart={str(prestart).lower()}",
        f"sweep.dir={tmp_path / 'sweep'}", "tracking.enabled=false", "sweep.seed=0",
    ])
    result = run_sweep(cfg)

    table = result.summary.table
    assert list(table["status"]) == ["completed", "completed"], result.summary.failed
    first, second = _reports(result)
    assert len(first) == len(second) == EPOCHS
    first_ended = first[-1]["t_report"]
    second_process = second[0]["t_proc_start"]
    if prestart:
        assert second_process < first_ended, (
            f"the second trial's worker started {second_process - first_ended:.2f} s after the "
            "first trial's last report: it was not a prestarted process")
    else:
        assert second_process > first_ended
    # 1 CPU per worker: Ray's OMP_NUM_THREADS=1, and torch uses that many threads, warm or cold
    assert {r["omp"] for r in first + second} == {1}
    assert [r["threads"] for r in second] == [r["threads"] for r in first] == [1] * EPOCHS
