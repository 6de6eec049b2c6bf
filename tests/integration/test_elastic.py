"""An elastic trial (``scaling.num_workers=[1, 2]``) on a real multi-node Ray cluster: it starts
with the one worker the cluster holds, grows to two when a node joins, shrinks back to one when
that node is lost, and ends completed with one continuous clock.

The cluster is ``ray.cluster_utils.Cluster`` (a raylet per node, all on this host): a head
with no CPUs (the trial's driver and Train controller run there, ``sweeps.driver.tuner``) and
one worker node of 1 CPU. The sweep is ``python -m sweeps --config-dir conf +experiment=e
ray.address=<cluster>`` in a subprocess run from the user's project, as in test_cluster.py.

The loop is written as Ray Train's guides write one (``ray.train.report`` with a checkpoint
each epoch, ``ray.train.get_checkpoint`` to resume) and appends a JSON line per event to
``events.jsonl``: the epoch it starts from, each epoch it reported, with its rank, node and
``get_world_size()``. It holds, so that nothing here depends on this machine's speed:

1. at epoch ``GROW`` while it runs on 1 worker: the test adds a node of 1 CPU; Train's elastic
   policy sees room for 2 workers (within ``scaling.elastic_resize_interval_s`` and its
   coordinator's 20 s refresh), restarts the trial's workers as 2, and they resume at ``GROW``
   from epoch ``GROW - 1``'s checkpoint;
2. at epoch ``SHRINK`` while it runs on 2 workers: the test kills that node (its raylet and
   the worker on it); Train restarts the trial with the 1 worker that fits, from epoch
   ``SHRINK - 1``'s checkpoint;
3. the trial ends ``completed``: every epoch trained once, by 1, 2, then 1 worker, and reported
   once to Tune (the sweep's clock, ``sweeps_epoch``, 1..EPOCHS with no step back or repeat),
   to the report log and to MLflow (steps 0..EPOCHS-1); no placement group is left.

Not covered: GPUs, several elastic trials sharing a cluster, an autoscaling cluster.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT
from tests.integration.test_cluster import _jsonl, _wait_for

pytestmark = pytest.mark.slow

LOOP = textwrap.dedent('''
    """A per-worker Ray Train loop, as in Ray Train's guides, that says how many workers run it."""

    import json
    import os
    import tempfile
    import time

    import ray
    import ray.train
    import ray.train.torch
    import torch
    from ray.train import Checkpoint
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset


    def _event(config, **fields):
        context = ray.train.get_context()
        line = json.dumps({"rank": context.get_world_rank(), "ws": context.get_world_size(),
                           "node": ray.get_runtime_context().get_node_id(),
                           "pid": os.getpid(), "t": time.time(), **fields})
        fd = os.open(os.path.join(config["log_dir"], "events.jsonl"),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (line + "\\n").encode())
        finally:
            os.close(fd)


    def train_func(config):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(128, 8, generator=gen)
        data = TensorDataset(x, (x[:, 0] > 0).long())
        # Loaded before prepare_model and saved unwrapped (model.module), as Ray's guide does:
        # a state saved by 1 worker (no DDP wrapper) then loads into 2, and back.
        model, state = nn.Linear(8, 2), None
        checkpoint = ray.train.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as checkpoint_dir:
                state = torch.load(os.path.join(checkpoint_dir, "model.pt"))
            model.load_state_dict(state["model"])
        model = ray.train.torch.prepare_model(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
        loader = ray.train.torch.prepare_data_loader(DataLoader(data, batch_size=16))
        start = 0
        if state is not None:
            optimizer.load_state_dict(state["optimizer"])
            start = state["epoch"] + 1
        _event(config, start=start)
        context = ray.train.get_context()

        for epoch in range(start, config["epochs"]):
            # Hold until Train resizes the group: it restarts these workers, so they never
            # leave this loop; the restarted ones pass (their world size differs).
            hold = ((epoch == config["grow_at"] and context.get_world_size() == 1)
                    or (epoch == config["shrink_at"] and context.get_world_size() == 2))
            if hold:
                _event(config, hold=epoch)
                while True:
                    time.sleep(0.1)
            if context.get_world_size() > 1:
                loader.sampler.set_epoch(epoch)
            for xb, yb in loader:
                loss = nn.functional.cross_entropy(model(xb), yb)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
                checkpoint = None
                if context.get_world_rank() == 0:
                    torch.save({"model": getattr(model, "module", model).state_dict(),
                                "optimizer": optimizer.state_dict(), "epoch": epoch},
                               os.path.join(temp_checkpoint_dir, "model.pt"))
                    checkpoint = Checkpoint.from_directory(temp_checkpoint_dir)
                ray.train.report({"loss": loss.item(), "epoch": epoch,
                                  "world_size": context.get_world_size()},
                                 checkpoint=checkpoint)
            _event(config, epoch=epoch)
''')

EXPERIMENT = """\
# @package _global_
# python -m sweeps --config-dir conf +experiment=e ray.address=auto 'scaling.num_workers=[1,2]'
experiment:
  name: e
  trainable: train_elastic:train_func
  metric: loss
  mode: min
  params:
    lr: 0.1
    epochs: {epochs}
    grow_at: {grow}
    shrink_at: {shrink}
    log_dir: {log_dir}
  search_space:
    lr: interval(0.05, 0.2)
scheduler:
  max_t: {epochs}
"""

EPOCHS, GROW, SHRINK = 6, 2, 4  # 1 worker for epochs 0-1, 2 for 2-3, 1 for 4-5


def _trial_runs(db: Path) -> list[tuple[str, list[int]]]:
    """(status, steps of ``loss``) of each trial's MLflow run in experiment ``e``."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("e")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    return [(r.info.status, [m.step for m in client.get_metric_history(r.info.run_id, "loss")])
            for r in runs if r.data.tags.get("sweeps.role") == "trial"]


def test_an_elastic_trial_grows_with_a_joined_node_and_shrinks_with_a_lost_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ray
    from ray.cluster_utils import Cluster
    from ray.util import placement_group_table

    from sweeps import files
    from sweeps.trial import report_log

    if ray.is_initialized():
        ray.shutdown()
    project, logs = tmp_path / "project", tmp_path / "logs"
    (project / "conf" / "experiment").mkdir(parents=True)
    logs.mkdir()
    (project / "train_elastic.py").write_text(LOOP)
    (project / "conf" / "experiment" / "e.yaml").write_text(EXPERIMENT.format(
        epochs=EPOCHS, grow=GROW, shrink=SHRINK, log_dir=logs))
    sweep_dir, events_log = tmp_path / "sweep", logs / "events.jsonl"
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the raylets' workers import sweeps
    monkeypatch.setenv("RAY_ADDRESS", "")
    monkeypatch.setenv("RAY_health_check_period_ms", "1000")  # a lost node noticed in ~5 s
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "num_gpus": 0, "include_dashboard": False})
    proc, out = None, tmp_path / "sweep.txt"
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        with out.open("w") as stream:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sweeps", "--config-dir", "conf", "+experiment=e",
                 f"ray.address={cluster.address}", f"sweep.dir={sweep_dir}",
                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "scheduler=none",
                 "search.num_samples=1", "scaling.num_workers=[1,2]",
                 "scaling.elastic_resize_interval_s=1", "trial.poll_interval_s=0.05"],
                cwd=project, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=stream,
                stderr=subprocess.STDOUT, start_new_session=True)

        def holding(epoch: int, size: int) -> bool:
            """``size`` workers wait at ``epoch``, and the epoch before it has reached the
            sweep: a report the workers made but Train had not collected when their group
            restarts is lost with it (that epoch is trained again, and counted once)."""
            waiting = [e for e in _jsonl(events_log) if e.get("hold") == epoch
                       and e["ws"] == size]
            runs = [log.parent for log in (sweep_dir / "train").glob("*/reports.jsonl")]
            seen = [r["epoch"] for r in report_log.records(runs[0])] if runs else []
            return len(waiting) == size and epoch - 1 in seen

        # 1. One worker fits; it holds at GROW until a joined node lets Train grow the trial.
        _wait_for(lambda: holding(GROW, 1), proc, f"the 1-worker trial holding at {GROW}")
        joined = cluster.add_node(num_cpus=1)
        # 2. Two workers hold at SHRINK; the joined node is lost, with its worker.
        _wait_for(lambda: holding(SHRINK, 2), proc, f"2 workers holding at {SHRINK}")
        on_joined = {e["pid"] for e in _jsonl(events_log) if e["node"] == joined.node_id}
        assert on_joined  # the grown trial used the joined node
        cluster.remove_node(joined, allow_graceful=False)
        for pid in on_joined:  # a lost machine takes its processes along (test_cluster.py)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        rc = proc.wait(timeout=400)
        text = out.read_text()
        assert rc == 0, text
        ray.init(address=cluster.address)
        groups = {pg_id: pg["state"] for pg_id, pg in placement_group_table().items()}
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        ray.shutdown()
        cluster.shutdown()

    events = _jsonl(events_log)
    # The loop saw the resizes: each epoch trained once by rank 0, on 1, 2, then 1 worker,
    # each group resuming from the checkpoint of the epoch before.
    trained = [(e["epoch"], e["ws"]) for e in events if "epoch" in e and e["rank"] == 0]
    assert trained == [(0, 1), (1, 1), (2, 2), (3, 2), (4, 1), (5, 1)], trained
    starts = [(e["start"], e["ws"]) for e in events if "start" in e and e["rank"] == 0]
    assert starts == [(0, 1), (GROW, 2), (SHRINK, 1)], starts
    # The trial's clock went on across both restarts: one report per epoch, in order.
    summary = pd.read_csv(io.StringIO(files.read_text(sweep_dir / "summary.csv")),
                          dtype={"trial_id": str})
    assert list(summary["status"]) == ["completed"] and list(summary["epochs"]) == [EPOCHS]
    trial = summary["trial_id"][0]
    reports = report_log.records(sweep_dir / "train" / trial)
    assert [(r["sweeps_epoch"], r["n"], r["world_size"]) for r in reports] == [
        (1, 1, 1), (2, 2, 1), (3, 3, 2), (4, 4, 2), (5, 5, 1), (6, 6, 1)], reports
    judged = [r["epoch"] for r in map(json.loads, files.read_lines(
        sweep_dir / "state" / "scheduler.jsonl")) if r.get("trial") == trial and "epoch" in r]
    assert judged == sorted(set(judged)) and judged[-1] == EPOCHS, judged
    runs = _trial_runs(tmp_path / "mlflow.db")
    assert runs == [("FINISHED", list(range(EPOCHS)))], runs
    assert "retrying it from its last checkpoint" not in text, text  # Train resized, not Tune
    assert [s for s in groups.values() if s != "REMOVED"] == [], groups
