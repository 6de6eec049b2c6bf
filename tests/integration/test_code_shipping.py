"""A user's loop that lives only in their project directory runs on every Train worker.

The loop is written the way Ray Train's docs write it and imports neither ``sweeps`` nor
``trainables``; the project is a temp directory outside the checkout and off ``PYTHONPATH``.
Locally, Ray puts the driver's current directory on the workers' ``sys.path``; on a cluster
(``ray.address``) sweeps ships the directory as the job's runtime env ``working_dir``: each
loop reports whether it was imported from Ray's unpacked package (``_ray_pkg_...``).
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from sweeps import compose, run_sweep

pytestmark = pytest.mark.slow

LOOP = textwrap.dedent('''
    import os

    import ray.train


    def train_func(config):
        params = config.get("params", {})  # the older config shape: {"params": ..., "sweep": ...}
        lr = config.get("lr", params.get("lr", 0.1))
        epochs = config.get("epochs", params.get("epochs", 2))
        shipped = float("_ray_pkg_" in os.path.abspath(__file__))
        for epoch in range(1, epochs + 1):
            ray.train.report({"score": lr * epoch, "epoch": epoch, "shipped": shipped,
                              "sees_outputs": float(os.path.exists("outputs"))})
''')

EXPERIMENT = """\
# @package _global_
# python -m sweeps --config-dir conf +experiment=ship
experiment:
  name: ship
  trainable: {module}:train_func
  metric: score
  mode: max
  params:
    lr: 0.1
    epochs: 2
  search_space:
    lr: interval(0.01, 0.1)
"""

OVERRIDES = ["search=random", "search.num_samples=2", "scheduler=none", "scheduler.max_t=2",
             "scaling.num_workers=1", "tracking.enabled=false", "trial.max_retries=0"]


def _project(tmp_path: Path, module: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user project (loop + experiment) outside the checkout; the test runs inside it, as
    ``python -m sweeps`` would (the current directory first on the driver's ``sys.path``)."""
    project = tmp_path / "project"
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / f"{module}.py").write_text(LOOP)
    (project / "conf" / "experiment" / "ship.yaml").write_text(EXPERIMENT.format(module=module))
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "")
    monkeypatch.delitem(sys.modules, module, raising=False)
    return project


def _finished(result) -> list[dict]:
    table = result.summary.table
    assert len(table) == 2 and set(table["status"]) == {"completed"}, (table, result.failed)
    return [trial.metrics for trial in result.results]


def test_a_cwd_module_is_importable_by_train_workers_on_a_local_instance(
        tmp_path, monkeypatch) -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    project = _project(tmp_path, "local_train_loop", monkeypatch)
    cfg = compose("ship", [*OVERRIDES, "ray.num_cpus=2", "ray.num_gpus=0",
                           f"sweep.dir={tmp_path / 'sweep'}"], config_dir=project / "conf")
    result = run_sweep(cfg)  # starts and stops its own instance
    metrics = _finished(result)
    assert [m["epoch"] for m in metrics] == [2, 2]
    assert [m["shipped"] for m in metrics] == [0.0, 0.0]  # imported from the project itself
    assert not ray.is_initialized()


def test_on_a_cluster_the_working_dir_is_shipped_without_the_sweep_outputs(
        tmp_path, monkeypatch) -> None:
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    project = _project(tmp_path, "cluster_train_loop", monkeypatch)
    (project / "outputs" / "old_sweep").mkdir(parents=True)
    (project / "outputs" / "old_sweep" / "ckpt.pt").write_bytes(b"x" * 1000)
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 2, "num_gpus": 0, "include_dashboard": False})
    try:
        cfg = compose("ship", [*OVERRIDES, f"ray.address={cluster.address}"],
                      config_dir=project / "conf")  # sweep.dir: outputs/ship, in the project
        result = run_sweep(cfg)
        metrics = _finished(result)
        assert [m["shipped"] for m in metrics] == [1.0, 1.0]  # Ray's unpacked working_dir
        assert [m["sees_outputs"] for m in metrics] == [0.0, 0.0]  # excluded from it
        assert (project / "outputs" / "ship").is_dir()
    finally:
        ray.shutdown()
        cluster.shutdown()
