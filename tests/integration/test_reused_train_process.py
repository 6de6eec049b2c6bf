"""Train trials keep their trial process for the next trial (``trial.reuse_process``, Tune's
``reuse_actors``), also when a stopped trial's Train run keeps reporting.

When ASHA stops a trial, Tune keeps its process for the next trial but does not end the trial's
Train run; the sweep releases the run's workers a moment later (``sweeps.placement``). Until
then the loop goes on reporting, and the run's controller hands each report to a Tune session
that no longer reads it. Ray's ``TuneReportCallback`` puts it into a one-slot queue and waits
for room forever, on the controller's only event loop: the controller never notices its workers
are gone, the cached process's thread never ends, the next trial on that process errors after
the thread wait, and the sweep loops forever (reproduced by a reviewer with these settings:
reports every few milliseconds, ``trial.poll_interval_s=0.01``, one trial at a time).

Whether a stopped run gets a second report to the controller before the sweep releases its
workers is a race (in this suite's sweep it mostly does not), so the queue's behaviour is also
tested on its own, against a real Ray queue: a report waits for room only while its trial has
not been stopped.

The sweep runs with a second Ray instance on the machine and without the dashboard (no State
API): the two conditions under which Ray Train's own placement-group cleaner fails
(ray#54305), so its stopped runs' workers are released by the sweep alone.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from sweeps import compose, run_sweep
from sweeps._ray.train import StopAwareQueue

pytestmark = pytest.mark.slow

NUM_SAMPLES = 6
EPOCHS = 40


def _actor_classes() -> Counter:
    """How many actors of each class this Ray instance has created so far (dead ones too)."""
    from ray._private.state import actors

    return Counter(a.get("ActorClassName", "").rpartition(".")[2] for a in actors().values())


@pytest.mark.timeout(420)  # the wedge this guards against never ends
def test_stopped_train_runs_that_keep_reporting_do_not_wedge_a_reused_process(
        tmp_path, second_ray_instance, ray_cluster) -> None:
    cfg = compose("digits", [
        "experiment.trainable=tests.integration.rapid_reports:train_rapid",
        "experiment.metric=loss", "experiment.mode=min",
        *[f"~experiment.search_space.{k}" for k in ("hidden", "depth", "dropout", "batch_size")],
        "experiment.search_space.lr='tag(log, interval(0.01, 1.0))'",
        f"+experiment.params.epochs={EPOCHS}", f"scheduler.max_t={EPOCHS}",
        "scheduler.grace_period=1", "scheduler.reduction_factor=2",
        "search=random", f"search.num_samples={NUM_SAMPLES}", "search.max_concurrent_trials=1",
        "scaling.num_workers=1", "trial.executor=train", "trial.reuse_process=true",
        "trial.poll_interval_s=0.01", f"sweep.dir={tmp_path / 'rapid'}", "sweep.seed=0",
        "tracking.enabled=false",
    ])
    import ray

    before = _actor_classes()
    result = run_sweep(cfg)
    actors = _actor_classes() - before
    groups = ray.util.placement_group_table()

    table = result.summary.table
    assert len(table) == NUM_SAMPLES, table
    assert set(table["status"]) <= {"completed", "stopped"}, table  # none errored
    assert (table["status"] == "stopped").sum() >= 2, table  # the case under test happened
    assert actors["TrainController"] == NUM_SAMPLES, actors  # a Train run per trial
    assert actors["RayTrainWorker"] == NUM_SAMPLES, actors
    assert actors["ImplicitFunc"] < NUM_SAMPLES, actors  # a trial process served several trials
    states = [pg["state"] for pg in groups.values()]
    assert "CREATED" not in states and "PENDING" not in states, groups  # none left
    # Each stopped run's workers were released by the sweep's reaper while it watched the
    # ended trial (not by the release at sweep end), by the first of its polls that read the
    # trial's group: no failed or repeated call in between. (The seconds go to the driver's log,
    # "released the workers of N ended trial(s), at most S s after each ended", unasserted.)
    stopped = set(table.query("status == 'stopped'")["trial_id"])
    assert stopped <= set(result.released), (stopped, result.released)
    assert {result.release_polls[t] for t in stopped} == {1}, result.release_polls
    for trial in result.results:  # a stopped run's late reports never reach the next trial
        epochs = trial.metrics_dataframe["epoch"].tolist()
        assert epochs == list(range(1, len(epochs) + 1)), (trial.metrics["trial_id"], epochs)


@pytest.mark.timeout(120)  # Ray's own put would wait here forever
def test_a_stopped_trials_report_is_dropped_instead_of_waiting_for_room(ray_cluster) -> None:
    from ray.util.queue import Queue

    queue = Queue(1)
    queue.put({"epoch": 1})  # a report Tune has not taken: the slot is full
    stopped = threading.Event()
    threading.Timer(0.5, stopped.set).start()  # the sweep stops the trial meanwhile
    StopAwareQueue(queue, stopped.is_set, recheck_s=0.1).put({"epoch": 2})
    assert stopped.is_set()  # it waited until the stop, then gave up
    assert queue.qsize() == 1 and queue.get() == {"epoch": 1}  # the dropped one went nowhere


@pytest.mark.timeout(120)
def test_a_running_trials_report_waits_for_room_and_is_delivered(ray_cluster) -> None:
    from ray.util.queue import Queue

    queue = Queue(1)
    queue.put({"epoch": 1})
    taken: list[dict] = []
    # Tune takes the first report later. The slot frees inside the queue actor before this
    # thread appends what it got, so the put may return first: the elapsed time is what shows
    # that the put waited, and the thread is joined before its list is read.
    tune = threading.Timer(0.5, lambda: taken.append(queue.get()))
    started = time.monotonic()
    tune.start()
    StopAwareQueue(queue, lambda: False, recheck_s=0.1).put({"epoch": 2})
    waited = time.monotonic() - started
    tune.join(timeout=30)
    assert waited >= 0.5, waited  # returned only once there was room
    assert taken == [{"epoch": 1}]
    assert queue.get(timeout=5) == {"epoch": 2}
