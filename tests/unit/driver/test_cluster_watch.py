"""The cluster watch (``sweeps.driver.cluster_watch``) on a scripted cluster, without Ray:
what it says when nodes join or leave, and the trial limit it gives Tune."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sweeps.config.schema import ScalingSection
from sweeps.driver.cluster_watch import ClusterWatch
from sweeps.driver.resources import plan_resources
from sweeps.protocol import CLOCK_KEY

HEAD = {"memory": 1e9}  # a head node with no CPUs
TWO = {"CPU": 2.0, "memory": 1e9}


class Cluster:
    """Scripted nodes and the nodes each trial's workers hold; records what the watch says
    and every limit it sets."""

    def __init__(self, nodes: dict[str, dict[str, float]]) -> None:
        self.nodes = dict(nodes)
        self.workers: dict[str, set[str]] = {}
        self.lines: list[str] = []
        self.limits: list[int] = []

    def watch(self, cpus: float = 4, follow: bool = True, resizable: bool = True,
              limit: int | None = None) -> ClusterWatch:
        plan = plan_resources(ScalingSection(num_workers=2), cpus, 0, limit)
        watch = ClusterWatch("sid", plan, self.lines.append, follow=follow, interval_s=0,
                             nodes=lambda: dict(self.nodes),
                             worker_nodes=lambda sweep, trial: set(self.workers.get(trial, ())))
        watch.attach(self.set_limit if resizable else None)
        return watch

    def set_limit(self, n: int) -> bool:
        self.limits.append(n)
        return True


def _trial(trial_id: str, epoch: float | None = None, status: str = "RUNNING"):
    return SimpleNamespace(trial_id=trial_id, status=status,
                           last_result={} if epoch is None else {CLOCK_KEY: epoch})


def test_a_joined_node_is_said_and_raises_the_limit() -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO, "node2222cc": TWO})
    watch = cluster.watch()
    watch.look([])
    assert (cluster.lines, cluster.limits, watch.at_once) == ([], [], 2)  # as planned
    cluster.nodes["node3333dd"] = TWO
    watch.look([])
    assert cluster.lines == ["node node3333 joined the cluster (2 CPU)",
                             "cluster: 4 node(s), 6 CPU / 0 GPU; up to 3 trial(s) at once"]
    assert (cluster.limits, watch.at_once) == ([3], 3)
    watch.look([])  # nothing changed: nothing said, nothing set
    assert len(cluster.lines) == 2 and cluster.limits == [3]


def test_a_lost_node_names_the_trials_whose_workers_it_held_and_lowers_the_limit() -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO, "node2222cc": TWO,
                       "node3333dd": TWO})
    watch = cluster.watch(cpus=6)
    a, b, c = _trial("a", 3), _trial("b"), _trial("c", 1)
    cluster.workers = {"a": {"node2222cc"}, "b": {"node2222cc"}, "c": {"node1111bb"}}
    watch.look([a, b, c])
    # Train restarts a's workers on another node before Ray declares the node dead.
    cluster.workers["a"] = {"node3333dd"}
    watch.look([a, b, c])
    del cluster.nodes["node2222cc"]
    watch.look([a, b, c])
    assert cluster.lines == [
        "node node2222 left the cluster: trial(s) a (at epoch 3), b (no epoch reported yet) "
        "had workers there; they restart from their last checkpoint on another node",
        "cluster: 3 node(s), 4 CPU / 0 GPU; up to 2 trial(s) at once"]
    assert cluster.limits == [2]


def test_a_lost_node_without_trial_workers_and_trials_that_ended() -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO, "node2222cc": TWO})
    watch = cluster.watch()
    cluster.workers = {"a": {"node2222cc"}}
    watch.look([_trial("a", 2)])
    watch.look([_trial("a", 4, status="TERMINATED")])  # a ended: no longer its node's
    del cluster.nodes["node2222cc"]
    watch.look([])
    assert cluster.lines[0] == "node node2222 left the cluster (no trial's workers ran there)"
    assert cluster.limits == [1]


@pytest.mark.parametrize(
    ("follow", "resizable", "suffix"),
    [(False, True, " (search.max_concurrent_trials, kept)"),
     (True, False, " (this search's limit cannot change)")],
)
def test_a_limit_that_is_kept_is_said_so(follow: bool, resizable: bool, suffix: str) -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO, "node2222cc": TWO})
    watch = cluster.watch(follow=follow, resizable=resizable, limit=None if follow else 5)
    watch.look([])
    cluster.nodes["node3333dd"] = TWO
    watch.look([])
    assert cluster.lines[-1] == (f"cluster: 4 node(s), 6 CPU / 0 GPU; up to "
                                 f"{watch.at_once} trial(s) at once{suffix}")
    assert cluster.limits == [] and watch.at_once == (2 if follow else 5)


def test_the_first_look_corrects_a_cluster_that_changed_since_the_plan() -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO, "node2222cc": TWO,
                       "node3333dd": TWO})
    watch = cluster.watch(cpus=4)  # planned on 4 CPUs, 6 by the time Tune starts
    watch.look([])
    assert cluster.limits == [3]
    assert cluster.lines == ["cluster: 4 node(s), 6 CPU / 0 GPU; up to 3 trial(s) at once"]


def test_the_limit_never_goes_below_one_trial() -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO, "node2222cc": TWO})
    watch = cluster.watch()
    watch.look([])
    cluster.nodes = {"head0000aa": HEAD, "node1111bb": {"CPU": 1.0}}
    watch.look([])
    assert cluster.limits == [1]  # 0 would mean "no limit" to Tune's random search


def test_looks_are_spaced_and_a_failed_look_is_not_the_sweeps_end() -> None:
    cluster = Cluster({"head0000aa": HEAD, "node1111bb": TWO})
    watch = cluster.watch(cpus=2)
    watch.interval_s = 3600.0
    watch.on_step_begin(0, [])
    cluster.nodes["node2222cc"] = TWO
    watch.on_step_begin(1, [])  # within the interval: not looked at
    assert cluster.lines == []

    def unreachable() -> dict:
        raise ConnectionError("GCS unavailable")

    watch._nodes_of_cluster = unreachable
    watch._last = float("-inf")
    watch.on_step_begin(2, [])  # logged at debug level; the sweep goes on
    assert cluster.lines == []


def test_the_watch_pickles_without_its_live_parts() -> None:
    import pickle

    cluster = Cluster({"head0000aa": HEAD})
    watch = cluster.watch()
    watch.say = print  # a picklable sink; the sweep's is ProgressLines.note
    restored = pickle.loads(pickle.dumps(watch))
    assert restored._limit is None and restored.at_once == watch.at_once
