"""Placement groups and actors by id, and the Train controller's worker-group hook.

    remove_group(pg_hex)                   # True when this call removed a held group
    group_from_hex(pg_hex)                 # a handle for ray.util.placement_group_table
    actor_state(actor_id)                  # "ALIVE", "DEAD", ... or None
    class Ledger(WorkerGroupCallback): ... # Train V2 controller callback base class
    record_groups_on_creation(on_create)   # call on_create(pg) as Train creates each group
    group_of(worker_group)                 # the placement group of a started worker group
    head_node_pin()                        # {"node:__internal_head__": 0.001} on a cluster
    alive_nodes()                          # node id -> resources, of each alive node

Why private: a stopped trial's worker placement group outlives its controller (ray#54305) and
Train V2 has no public hook where its groups are created, nor a public callback base class
(``ray.train.v2._internal.execution.callback.WorkerGroupCallback``). ``ray._raylet``'s
``PlacementGroupID`` rebuilds a handle from a recorded hex id (public route: keep the
``PlacementGroup`` object, impossible across processes). ``ray._private.state.actors`` reads an
actor's state without the dashboard (public route: ``ray.util.state.get_actor``, which needs
``ray[default]``'s dashboard running; the sweep's local instance starts without it).
``node:__internal_head__`` is the resource only the head node has
(``ray._common.constants.HEAD_NODE_RESOURCE_NAME``); Ray pins its own Train state actor and
autoscaling coordinator to the head with 0.001 of it (public route: a custom resource the
cluster's operator declares on the head, or a node label, neither of which sweeps can assume).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import ray
from ray.train.v2._internal.execution.callback import WorkerGroupCallback
from ray.util import placement_group_table, remove_placement_group
from ray.util.placement_group import PlacementGroup

__all__ = ["WorkerGroupCallback", "remove_group", "group_from_hex", "actor_state",
           "record_groups_on_creation", "group_of", "head_node_pin", "alive_nodes",
           "WORKER_GROUP_MODULE", "HEAD_NODE_RESOURCE"]

WORKER_GROUP_MODULE = "ray.train.v2._internal.execution.worker_group.worker_group"
HEAD_NODE_RESOURCE = "node:__internal_head__"


def group_from_hex(pg_hex: str) -> Any:
    """The ``PlacementGroup`` handle of a recorded group id (for ``placement_group_table``)."""
    from ray._raylet import PlacementGroupID

    return PlacementGroup(PlacementGroupID.from_hex(pg_hex))


def remove_group(pg_hex: str) -> bool:
    """Remove placement group ``pg_hex`` unless already gone; True when this call removed it."""
    pg = group_from_hex(pg_hex)
    if placement_group_table(pg).get("state") in (None, "REMOVED"):
        return False
    remove_placement_group(pg)
    return True


def actor_state(actor_id: str) -> str | None:
    """State of actor ``actor_id`` from the GCS (``ALIVE``, ``DEAD``...), None if unknown."""
    from ray._private.state import actors

    return actors(actor_id=actor_id).get("State")


def record_groups_on_creation(on_create: Callable[[Any], None]) -> bool:
    """Make Train's worker-group module call ``on_create(pg)`` for each placement group it
    creates in this process (the trial's Train controller; a later call replaces the
    callback). Ray 2.60 creates the group with the module-level ``placement_group``; False
    (nothing done) on a layout without it."""
    try:
        module = importlib.import_module(WORKER_GROUP_MODULE)
    except ImportError:
        return False
    create = getattr(module, "placement_group", None)
    if create is None:
        return False
    if hasattr(create, "_sweeps_on_create"):  # wrapped already in this process
        create._sweeps_on_create = on_create
        return True

    def recording_placement_group(*args: Any, **kwargs: Any) -> Any:
        pg = create(*args, **kwargs)
        recording_placement_group._sweeps_on_create(pg)
        return pg

    recording_placement_group._sweeps_on_create = on_create
    module.placement_group = recording_placement_group
    return True


def group_of(worker_group: Any) -> Any:
    """The placement group of a started Train worker group (``after_worker_group_start``)."""
    return worker_group.get_worker_group_state().placement_group_handle.placement_group


def head_node_pin() -> dict[str, float]:
    """Resources that place an actor on the connected cluster's head node: 0.001 of the head's
    own resource, or {} when no node has it (a Ray that renamed it: unpinned, not unplaceable).

    Example:
        >>> head_node_pin()  # doctest: +SKIP
        {'node:__internal_head__': 0.001}
    """
    return {HEAD_NODE_RESOURCE: 0.001} if HEAD_NODE_RESOURCE in ray.cluster_resources() else {}


def alive_nodes() -> dict[str, dict[str, float]]:
    """Node id -> resources (``CPU``, ``GPU``, ...) of each alive node of the connected Ray."""
    return {n["NodeID"]: dict(n.get("Resources") or {}) for n in ray.nodes() if n.get("Alive")}
