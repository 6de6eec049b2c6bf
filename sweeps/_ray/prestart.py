"""Warm processes for the next Train run: started ahead, with Train's imports done.

    preload(enabled=True)                    # in the trial process, before trainer.fit()
    prestart(env_string, count, keep_alive_s) # in a Train controller: count processes, idle
    child_env_string(own_env_string)         # the env a Train controller's children get

Why: every process of a Train V2 run (its controller, the ``SynchronizationActor`` and each
worker) runs under a runtime env with ``env_vars``, so Ray's prestarted default workers never
serve them (the raylet reuses an idle worker only when its runtime-env hash matches) and each
trial pays N+2 cold Python starts, each importing ``ray.train`` and torch
(``docs/train-backend-costs.md`` has the measurements and the Ray source lines).

What this does, all of it private Ray API (public route: none at 2.60; the upstream text is in
that doc):
- ``preload`` puts ``__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR`` (``ray_constants.
  WORKER_PROCESS_SETUP_HOOK_ENV_VAR``, read by ``default_worker.py`` at process start) into the
  env vars Train propagates to its controller (``ENV_VARS_TO_PROPAGATE`` of ``ray.train.v2.
  _internal.constants``), so the controller and, by runtime-env inheritance, its children
  import ``ray.train.torch`` (``HOOK``) when their process starts, before Ray hands them an
  actor. Never when the job
  already has a setup hook (the user's stays theirs).
- ``prestart`` asks the raylet of this node for idle processes with a given runtime env
  through its ``PrestartWorkers`` RPC (``NodeManagerService`` in ``ray.core.generated``, the
  call Anyscale's ``prestart_workers_on_local_node`` makes; the OSS wheel has no wrapper).
- ``child_env_string``: the raylet hashes the serialized runtime env string, not its content.
  A child of a process with a non-empty runtime env gets the parent's env merged in C++ and
  re-serialized compactly with sorted keys (``{"env_vars":{"A":"1"}}``), where Python's
  ``RuntimeEnv.serialize`` writes ``{"env_vars": {"A": "1"}}``: the same env, another hash.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

__all__ = ["HOOK_ENV", "HOOK", "PROPAGATED_MODULE", "preload", "prestart",
           "child_env_string", "own_env_string", "startup_concurrency",
           "idle_processes", "match_cold_threads", "torch_threads"]

log = logging.getLogger(__name__)

# ray_constants.WORKER_PROCESS_SETUP_HOOK_ENV_VAR, which default_worker.py reads at process start
HOOK_ENV = "__RAY_WORKER_PROCESS_SETUP_HOOK_ENV_VAR"
# The hook is a ``module.attr`` Ray imports and calls at process start, before the process is
# connected to the job (so before the driver's directory is on its path): a public Ray name
# whose import is what every process of a Train run does first (``ray.train.torch``, torch
# with it: TorchConfig's module is where the controller unpickles its backend config from)
# and whose call only builds a default ``TorchConfig``. A hook that cannot be imported or
# raises makes Ray drain the process, failing the actor it was for; this one cannot fail
# where Train can run.
HOOK = "ray.train.torch.TorchConfig"
PROPAGATED_MODULE = "ray.train.v2._internal.constants"  # its ENV_VARS_TO_PROPAGATE
IDLE_TITLE = b"ray::IDLE"  # ray_constants.WORKER_PROCESS_TYPE_IDLE_WORKER: an idle process


def preload(enabled: bool) -> bool:
    """Whether each process of the Train run this process starts next imports
    ``ray.train.torch`` as it starts (``HOOK``), set as ``enabled`` says (a reused trial
    process may have run a trial that asked otherwise). False when the job has a setup hook
    of its own (Train's processes inherit it, untouched) or this Ray has no such propagation
    set."""
    import importlib

    if os.environ.get(HOOK_ENV, HOOK) != HOOK:
        return False
    try:
        propagated = importlib.import_module(PROPAGATED_MODULE).ENV_VARS_TO_PROPAGATE
        if enabled:  # as Ray will call it: one that raises would fail every Train process
            module, _, name = HOOK.rpartition(".")
            getattr(importlib.import_module(module), name)()
    except Exception as exc:
        log.debug("no preload: %s", exc)
        enabled, propagated = False, set()
    if enabled:
        propagated.add(HOOK_ENV)
        os.environ[HOOK_ENV] = HOOK
    else:
        propagated.discard(HOOK_ENV)
        os.environ.pop(HOOK_ENV, None)
    return enabled


def own_env_string() -> str:
    """This process's runtime env as the raylet saw it (``""`` or ``"{}"``: none)."""
    import ray

    return ray.get_runtime_context().get_runtime_env_string() or ""


def child_env_string(own: str) -> str:
    """The serialized runtime env of a child this process creates with env vars it already
    has (a Train controller's ``SynchronizationActor`` and workers): ``own`` re-serialized as
    Ray's C++ merge writes it.

    Example:
        >>> child_env_string('{"env_vars": {"B": "2", "A": "1"}}')
        '{"env_vars":{"A":"1","B":"2"}}'
    """
    return json.dumps(json.loads(own or "{}"), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)  # nlohmann writes UTF-8 as is


def startup_concurrency() -> int:
    """How many worker processes this node's raylet starts at once (``maximum_startup_
    concurrency`` in ``ray/_private/services.py``: this node's CPUs, at most the machine's
    cores, unless ``RAY_worker_maximum_startup_concurrency`` says otherwise). A prestart
    request for more is cut to what is free: the rest are never started."""
    import ray

    configured = os.environ.get("RAY_worker_maximum_startup_concurrency", "")
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    here = ray.get_runtime_context().get_node_id()
    cpus = next((n.get("Resources", {}).get("CPU", 1.0) for n in ray.nodes()
                 if n.get("NodeID") == here), 1.0)
    return max(1, min(os.cpu_count() or 1, int(cpus)))


def idle_processes() -> int:
    """How many idle Ray worker processes this machine has (``ray::IDLE``); -1: not known
    (no ``/proc``)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return -1
    count = 0
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                    count += cmdline.read(64).split(b"\0", 1)[0] == IDLE_TITLE
            except OSError:
                continue
    return count


def torch_threads() -> int | None:
    """torch's intra-op thread count now, or None when this process has not imported torch."""
    import sys

    torch = sys.modules.get("torch")
    return None if torch is None else int(torch.get_num_threads())


def match_cold_threads(preloaded_threads: int | None) -> None:
    """In a prestarted process, give torch and the BLAS/OpenMP pools the thread count a cold
    one has: Ray sets ``OMP_NUM_THREADS`` to the actor's CPUs just before it runs the actor
    (``set_omp_num_threads_if_unset``), after a prestarted process imported torch and numpy
    (their pools then span every core). ``preloaded_threads``: torch's count before the user's
    module was imported (``torch_threads()`` then); a count the module set itself is kept, as
    a cold process keeps it, and so is a BLAS pool with its own variable set. Called in each
    Train worker before the user's loop."""
    import sys

    threads = os.environ.get("OMP_NUM_THREADS", "")
    if os.environ.get(HOOK_ENV) != HOOK or not threads.isdigit() or int(threads) < 1:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() == preloaded_threads != int(threads):
        torch.set_num_threads(int(threads))
    if any(os.environ.get(v) for v in ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")):
        return
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(threads), user_api="blas")
    except Exception as exc:  # threadpoolctl absent: torch's own pool is what loops use
        log.debug("BLAS thread pools left as they are: %s", exc)


def prestart(env_string: str, count: int, keep_alive_s: float) -> bool:
    """Ask this node's raylet for ``count`` idle worker processes with the runtime env
    ``env_string`` (kept at least ``keep_alive_s``), for this job; False when it refused or
    could not be reached (nothing else changes: the next run starts cold)."""
    if count <= 0:
        return False
    try:
        import ray
        from ray._common.network_utils import build_address
        from ray._private.grpc_utils import init_grpc_channel
        from ray.core.generated import (
            common_pb2,
            node_manager_pb2,
            node_manager_pb2_grpc,
            runtime_environment_pb2,
        )

        worker: Any = ray._private.worker.global_worker
        node = worker.node
        channel = init_grpc_channel(build_address(node.node_ip_address,
                                                  node.node_manager_port))
        try:
            node_manager_pb2_grpc.NodeManagerServiceStub(channel).PrestartWorkers(
                node_manager_pb2.PrestartWorkersRequest(
                    language=common_pb2.Language.PYTHON,
                    job_id=worker.current_job_id.binary(),
                    runtime_env_info=runtime_environment_pb2.RuntimeEnvInfo(
                        serialized_runtime_env=env_string),
                    keep_alive_duration_secs=int(keep_alive_s), num_workers=int(count)),
                timeout=10)
        finally:
            channel.close()
        return True
    except Exception as exc:
        log.debug("prestart of %d process(es) refused: %s", count, exc)
        return False
