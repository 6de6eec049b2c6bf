"""A sweep on a real multi-node Ray cluster: trials placed on worker nodes only, a node that
joins mid-sweep gets trials, and a node lost mid-trial costs only the epoch in progress.

One scenario, run as a user runs it. The cluster is ``ray.cluster_utils.Cluster`` (a raylet
per node, all on this host): a head node with no CPUs, so every Train worker lands on a worker
node, and two worker nodes of 2 CPUs. The user's project lives outside the checkout: its own
Ray Train loop, written the way Ray Train's docs write it, and its own experiment config. The
sweep is ``python -m sweeps --config-dir conf +experiment=x ray.address=<cluster>
sweep.dir=s3://<bucket>/<prefix>`` (moto's S3 server) in a subprocess run from the project;
the workers have only sweeps on their ``PYTHONPATH`` (the raylets' environment), so the loop
reaches them through the shipped ``working_dir`` alone.

Each worker of the loop appends a JSON line per event to ``events.jsonl``: its trial, rank and
node (``ray.get_runtime_context().get_node_id()``), the epoch it starts from, each epoch it
reported. Before epoch ``hold_epoch`` it waits for a ``go`` file, so the test decides when the
first trials may finish, and nothing here depends on how fast this machine is:

1. two trials of 2 workers fit on the two worker nodes; both report epochs 0..2 and hold;
2. a third node joins: the sweep raises its limit to 3 trials at once and starts a third trial,
   whose workers can only go to the new node;
3. the node of one of the first two trials is killed (its raylet and every process on it,
   SIGKILL), then the trials are released: that trial's workers restart from its epoch-2
   checkpoint (epoch 3, not 0) on a surviving node, while the other trials, whose drivers run
   on the head, go on untouched; the sweep says which node left and which trial it held;
4. every trial ends ``completed`` with all its epochs, one MLflow run each, and neither the
   sweep (``state/end.json``) nor the cluster holds a placement group.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

LOOP = textwrap.dedent('''
    """A per-worker Ray Train loop, as in Ray Train's docs, that says where it runs."""

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


    def _data(n=256, seed=0):
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 8, generator=gen)
        return TensorDataset(x, (x[:, 0] + 0.5 * x[:, 1] > 0).long())


    def _event(config, **fields):
        context = ray.train.get_context()
        line = json.dumps({"trial": context.get_experiment_name(),
                           "rank": context.get_world_rank(),
                           "node": ray.get_runtime_context().get_node_id(),
                           "pid": os.getpid(),
                           "shipped": "_ray_pkg_" in os.path.abspath(__file__),
                           "t": time.time(), **fields})
        fd = os.open(os.path.join(config["log_dir"], "events.jsonl"),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (line + "\\n").encode())
        finally:
            os.close(fd)


    def train_func(config):
        model = nn.Sequential(nn.Linear(8, config["hidden"]), nn.ReLU(),
                              nn.Linear(config["hidden"], 2))
        model = ray.train.torch.prepare_model(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
        loader = ray.train.torch.prepare_data_loader(
            DataLoader(_data(), batch_size=32, shuffle=True))
        val = _data(128, seed=1)

        start = 0
        checkpoint = ray.train.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as checkpoint_dir:
                state = torch.load(os.path.join(checkpoint_dir, "model.pt"))
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                start = state["epoch"] + 1
        _event(config, start=start)

        for epoch in range(start, config["epochs"]):
            if epoch == config["hold_epoch"]:
                while not os.path.exists(os.path.join(config["log_dir"], "go")):
                    time.sleep(0.1)
            if ray.train.get_context().get_world_size() > 1:
                loader.sampler.set_epoch(epoch)
            model.train()
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                accuracy = (model(val.tensors[0]).argmax(1) == val.tensors[1]).float().mean()
            with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
                checkpoint = None
                if ray.train.get_context().get_world_rank() == 0:
                    torch.save({"model": model.state_dict(),
                                "optimizer": optimizer.state_dict(), "epoch": epoch},
                               os.path.join(temp_checkpoint_dir, "model.pt"))
                    checkpoint = Checkpoint.from_directory(temp_checkpoint_dir)
                ray.train.report({"val_accuracy": accuracy.item(), "epoch": epoch},
                                 checkpoint=checkpoint)
            _event(config, epoch=epoch)
''')

EXPERIMENT = """\
# @package _global_
# python -m sweeps --config-dir conf +experiment=x ray.address=auto sweep.dir=/shared/x
experiment:
  name: x
  trainable: train_cluster:train_func
  metric: val_accuracy
  mode: max
  params:
    lr: 0.1
    hidden: 16
    epochs: {epochs}
    hold_epoch: {hold}
    log_dir: {log_dir}
  search_space:
    lr: tag(log, interval(0.01, 0.5))
    hidden: choice(8, 16)
scheduler:
  max_t: {epochs}
"""

EPOCHS, HOLD, TRIALS = 6, 3, 4  # epochs 0-2 reported and checkpointed before the hold


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 300):
    """``predicate()``'s first truthy value; fails if the sweep exits first. The timeout only
    ends a hung run: no assertion depends on it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        if proc.poll() is not None:
            raise AssertionError(f"the sweep exited ({proc.returncode}) before {what}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _project(tmp_path: Path) -> Path:
    """The user's project, outside the checkout (and off every PYTHONPATH)."""
    project = tmp_path / "project"
    (project / "conf" / "experiment").mkdir(parents=True)
    (project / "train_cluster.py").write_text(LOOP)
    (tmp_path / "logs").mkdir()
    (project / "conf" / "experiment" / "x.yaml").write_text(EXPERIMENT.format(
        epochs=EPOCHS, hold=HOLD, log_dir=tmp_path / "logs"))
    return project


def _mlflow_runs(db: Path) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("x")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    return [(r.data.tags.get("sweeps.role"), r.data.tags.get("sweeps.trial_id"), r.info.status,
             [m.step for m in client.get_metric_history(r.info.run_id, "val_accuracy")])
            for r in runs]


def test_trials_use_a_joined_node_and_survive_a_lost_one(tmp_path, monkeypatch, moto_s3) -> None:
    """The sweep directory on S3 (moto's server; every node reaches it with the credentials the
    raylets inherit), the harder case: checkpoints are uploaded from the node that is lost. A
    sweep directory on a filesystem every node sees is test_elastic's (a node lost mid-trial,
    the trial restarted from its checkpoint there) and test_code_shipping's cluster test."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.util import placement_group_table

    from sweeps import files
    from sweeps.storage import stand_in

    if ray.is_initialized():
        ray.shutdown()
    project = _project(tmp_path)
    where = f"s3://{moto_s3.BUCKET}/cluster-{tmp_path.name}/sweep"  # its endpoint, keys exported
    sweep_dir = stand_in(where)
    logs = tmp_path / "logs"
    events_log, judged_log = logs / "events.jsonl", sweep_dir / "state" / "scheduler.jsonl"
    # The raylets, and so every worker, inherit this environment: sweeps importable, the
    # user's project not.
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("RAY_ADDRESS", "")
    monkeypatch.setenv("RAY_health_check_period_ms", "1000")  # a lost node noticed in ~5 s
    cluster = Cluster(initialize_head=True,
                      head_node_args={"num_cpus": 0, "num_gpus": 0, "include_dashboard": False})
    proc = None
    out = tmp_path / "sweep.txt"
    try:
        first, doomed = cluster.add_node(num_cpus=2), cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        with out.open("w") as stream:
            proc = subprocess.Popen(
                [sys.executable, "-m", "sweeps", "--config-dir", "conf", "+experiment=x",
                 f"ray.address={cluster.address}", f"sweep.dir={where}",
                 f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "scheduler=none",
                 f"search.num_samples={TRIALS}", "scaling.num_workers=2", "sweep.seed=0",
                 "trial.poll_interval_s=0.05"],
                cwd=project, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=stream,
                stderr=subprocess.STDOUT, start_new_session=True)

        def seen(trial: str) -> int:
            """The last epoch of ``trial`` Tune has seen (so Train registered its checkpoint):
            the trial's clock, 1-based."""
            return max([r["epoch"] for r in map(json.loads, files.read_lines(judged_log))
                        if r["trial"] == trial and r.get("epoch")], default=0)

        def holding() -> list[str]:
            trials = sorted({e["trial"] for e in _jsonl(events_log)})
            return trials if len(trials) == 2 and all(seen(t) == HOLD for t in trials) else []

        # 1. The two trials that fit report epochs 0..2 and wait at epoch 3.
        held = _wait_for(holding, proc, "two trials holding at epoch 3")
        # 2. A node joins: a third trial starts, and only the new node has room for it.
        joined = cluster.add_node(num_cpus=2)
        third = _wait_for(lambda: sorted({e["trial"] for e in _jsonl(events_log)} - set(held)),
                          proc, "a third trial's workers")
        # 3. A node with trial workers on it is killed; then every trial may go on.
        on_doomed = [e for e in _jsonl(events_log) if e["node"] == doomed.node_id]
        victims = sorted({e["trial"] for e in on_doomed})
        assert victims and set(victims) <= set(held), victims
        last_seen = {t: seen(t) for t in victims}
        cluster.remove_node(doomed, allow_graceful=False)
        killed_at = time.time()
        # remove_node kills the node's raylet and agents; its workers, on this same host, would
        # run on until they notice, and write checkpoints to the sweep directory. A lost
        # machine takes them along: so does this test, before it lets any trial go on.
        for pid in {e["pid"] for e in on_doomed}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Every trial holds until the sweep has said the node left: Ray notices a lost node by
        # its missed health checks (seconds), and a sweep whose last trials start fast could
        # otherwise end before that, saying nothing.
        left = f"node {doomed.node_id[:8]} left the cluster"
        _wait_for(lambda: left in out.read_text(), proc, "the sweep saying the node left")
        (logs / "go").touch()
        rc = proc.wait(timeout=600)
        text = out.read_text()
        assert rc == 0, text
        ray.init(address=cluster.address)
        groups = {pg_id: pg["state"] for pg_id, pg in placement_group_table().items()}
        head = cluster.head_node.node_id
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        ray.shutdown()
        cluster.shutdown()

    events = _jsonl(events_log)
    assert events and all(e["shipped"] for e in events)  # imported from Ray's working_dir copy
    # Placement: no worker on the CPU-less head; the third trial on the joined node (its driver
    # may have been on the lost node, and the trial restarted elsewhere: look before the loss).
    assert head not in {e["node"] for e in events}
    assert len(third) == 1, third
    assert {e["node"] for e in events if e["trial"] == third[0] and e["t"] < killed_at} == {
        joined.node_id}
    # Node loss: each victim restarted once, on a surviving node, from the epoch after the
    # last one Tune had seen, i.e. its last checkpoint; nothing was retrained from scratch.
    for trial in victims:
        restarts = [e for e in events if e["trial"] == trial and "start" in e
                    and e["t"] > killed_at]
        assert {e["start"] for e in restarts} == {last_seen[trial]} == {HOLD}, restarts
        assert {e["node"] for e in restarts} <= {first.node_id, joined.node_id}, restarts
        trained = [e["epoch"] for e in events if e["trial"] == trial and "epoch" in e
                   and e["rank"] == 0]
        assert trained == list(range(EPOCHS)), trained  # epoch 3 began on the lost node only
    # The other trials lost nothing: their drivers and Train controllers run on the head, so
    # the node's loss did not touch them (each worker started once, at epoch 0).
    for trial in set(held) - set(victims) | set(third):
        assert sorted(e["start"] for e in events if e["trial"] == trial and "start" in e) == [
            0, 0], trial
    assert "retrying it from its last checkpoint" not in text, text  # no Tune retry needed
    assert f"node {doomed.node_id[:8]} left the cluster: trial(s) {victims[0]}" in text, text
    assert f"node {joined.node_id[:8]} joined the cluster (2 CPU)" in text, text
    assert "up to 3 trial(s) at once" in text, text
    # The end: every trial ended with all its epochs, once in MLflow, nothing held.
    summary = pd.read_csv(io.StringIO(files.read_text(sweep_dir / "summary.csv")),
                          dtype={"trial_id": str})
    assert len(summary) == TRIALS, summary
    assert set(summary["status"]) == {"completed"} and set(summary["epochs"]) == {EPOCHS}
    runs = _mlflow_runs(tmp_path / "mlflow.db")
    trial_runs = sorted((trial, status, steps) for role, trial, status, steps in runs
                        if role == "trial")
    assert trial_runs == sorted((t, "FINISHED", list(range(EPOCHS)))
                                for t in summary["trial_id"]), runs
    assert json.loads(files.read_text(sweep_dir / "state" / "end.json"))[
        "held_placement_groups"] == 0
    assert [s for s in groups.values() if s != "REMOVED"] == [], groups
