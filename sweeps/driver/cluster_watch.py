"""Follow the Ray cluster a sweep joined: nodes that join or leave, and how many trials fit.

    python -m sweeps +experiment=digits ray.address=auto    # fit() adds ClusterWatch to Tune

On a cluster (``ray.address``) the sweep driver reads the alive nodes every ``interval_s``
(2 s) while Tune runs (``ray.nodes()``, no State API needed) and:

* says when a node joins or leaves, naming the trials whose Train workers it held (from their
  recorded placement groups) and their epochs (docs/clusters.md#when-a-node-dies);
* with ``search.max_concurrent_trials`` unset, makes trials at once follow the cluster
  (``ResourcePlan.fits_in`` the alive nodes' totals, at least 1; after a loss none starts until
  the running ones, restarting included, fit). An explicit value is kept (an autoscaling
  cluster grows to fit it; following its current size would never ask it to).

Divergence from Tune, deliberate: Tune fixes the limit when it starts (ray#43451 for its own
pending-trial limit), so a node added to a running sweep sat idle until a node was lost.
Ray marks a node whose raylet was killed dead only after its health checks fail (15 s with Ray
2.60's defaults, measured), so the "left" line comes that long after the loss; Train notices
the lost workers within a second and has usually begun the restart by then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ray.tune import Callback
from ray.util import placement_group_table

from sweeps._ray import kv
from sweeps._ray.placement import alive_nodes, group_from_hex
from sweeps.driver.resources import ResourcePlan
from sweeps.placement.ledger import kv_key
from sweeps.protocol import CLOCK_KEY

__all__ = ["ClusterWatch", "describe_resources"]

log = logging.getLogger(__name__)


def describe_resources(resources: dict[str, float]) -> str:
    """``2 CPU`` / ``8 CPU, 1 GPU``: what a node brings to trials.

    Example:
        >>> describe_resources({"CPU": 8.0, "GPU": 1.0, "memory": 1e9}), describe_resources({})
        ('8 CPU, 1 GPU', 'no CPU')
    """
    parts = [f"{resources[k]:g} {k}" for k in ("CPU", "GPU") if resources.get(k)]
    return ", ".join(parts) or "no CPU"


class ClusterWatch(Callback):
    """Tune callback in the sweep driver: node changes said, trial concurrency followed."""

    def __init__(self, sweep_id: str, plan: ResourcePlan, say: Callable[[str], None],
                 follow: bool, interval_s: float = 2.0,
                 nodes: Callable[[], dict[str, dict[str, float]]] = alive_nodes,
                 worker_nodes: Callable[[str, str], set[str]] | None = None) -> None:
        self.sweep_id, self.plan, self.say, self.follow = sweep_id, plan, say, follow
        self.interval_s = interval_s
        self.at_once = plan.max_concurrent_trials  # the limit Tune holds now
        self._nodes_of_cluster = nodes
        self._worker_nodes = worker_nodes or recorded_worker_nodes
        self._limit: Callable[[int], bool] | None = None
        self._known: dict[str, dict[str, float]] | None = None  # alive nodes at the last look
        # running trial -> every node its workers held while it ran: Ray says a node is dead
        # seconds after Train has moved the trial's workers elsewhere
        self._trial_nodes: dict[str, set[str]] = {}
        self._last = float("-inf")

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles callbacks with the experiment; the live limit setter stays behind."""
        return {**self.__dict__, "_limit": None, "_nodes_of_cluster": alive_nodes,
                "_worker_nodes": recorded_worker_nodes}

    def attach(self, limit: Callable[[int], bool] | None) -> None:
        """The setter of Tune's trial limit (``sweeps._ray.tune.concurrency_limit``); None
        when this Tune's search holds none that can change (nothing is followed then)."""
        self._limit = limit
        if self.follow and limit is None:
            log.info("trial concurrency stays at %d: this search's limit cannot change while "
                     "Tune runs", self.at_once)

    def on_step_begin(self, iteration: int, trials: list, **info: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return
        self._last = now
        try:
            self.look(trials)
        except Exception as exc:  # Ray going down, a GCS hiccup: look again next time
            log.debug("cluster watch: %s", exc)

    def look(self, trials: list) -> None:
        """Compare the cluster with the last look: say what changed, follow its size."""
        nodes = self._nodes_of_cluster()
        known, self._known = self._known, nodes
        if known is not None:
            for node in sorted(known.keys() - nodes.keys()):
                self.say(self._left(node, trials))
            for node in sorted(nodes.keys() - known.keys()):
                self.say(f"node {node[:8]} joined the cluster "
                         f"({describe_resources(nodes[node])})")
        if known is None or known.keys() != nodes.keys():
            cpus = sum(r.get("CPU", 0.0) for r in nodes.values())
            gpus = sum(r.get("GPU", 0.0) for r in nodes.values())
            before = self.at_once
            fits = max(1, self.plan.fits_in(cpus, gpus)) if self.follow and self._limit else 0
            if fits and fits != self.at_once and self._limit(fits):
                log.debug("trials at once: %d -> %d (cluster: %g CPU / %g GPU)", self.at_once,
                          fits, cpus, gpus)
                self.at_once = fits
            if known is not None or self.at_once != before:
                how = ("" if self.follow and self._limit is not None
                       else " (search.max_concurrent_trials, kept)" if not self.follow
                       else " (this search's limit cannot change)")
                self.say(f"cluster: {len(nodes)} node(s), {cpus:g} CPU / {gpus:g} GPU; up to "
                         f"{self.at_once} trial(s) at once{how}")
        running = {t.trial_id for t in trials if getattr(t, "status", None) == "RUNNING"}
        for trial_id in running:
            try:
                found = self._worker_nodes(self.sweep_id, trial_id)
            except Exception as exc:
                log.debug("nodes of trial %s: %s", trial_id, exc)
                continue
            self._trial_nodes.setdefault(trial_id, set()).update(found)
        for trial_id in set(self._trial_nodes) - running:
            del self._trial_nodes[trial_id]

    def _left(self, node: str, trials: list) -> str:
        hit = sorted(t for t, where in self._trial_nodes.items() if node in where)
        if not hit:
            return f"node {node[:8]} left the cluster (no trial's workers ran there)"
        epochs = {t.trial_id: (t.last_result or {}).get(CLOCK_KEY) for t in trials}
        named = ", ".join(f"{t} (at epoch {epochs[t]:g})" if epochs.get(t) is not None
                          else f"{t} (no epoch reported yet)" for t in hit)
        return (f"node {node[:8]} left the cluster: trial(s) {named} had workers there; they "
                "restart from their last checkpoint on another node")


def recorded_worker_nodes(sweep_id: str, trial_id: str) -> set[str]:
    """Nodes holding the workers of ``trial_id``'s current Train worker group, from the
    placement group its Train controller recorded (``sweeps.placement``); empty if none."""
    pg_hex = kv.get(kv_key(sweep_id, trial_id))
    if not pg_hex:
        return set()
    table = placement_group_table(group_from_hex(pg_hex))
    return {n for n in (table.get("bundles_to_node_id") or {}).values() if n}
