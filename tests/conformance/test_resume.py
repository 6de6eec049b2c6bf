"""A sweep whose driver is killed (``kill -9``) and rerun with the same command hands the loop
the checkpoint plain Ray Train would resume it from, and the loop ends where an uninterrupted
plain ``TorchTrainer`` run ends: the same metrics every epoch, the same checkpoints.

The loop stands still on rank 0 after the report of epoch ``pause_at`` (``observe.stand_still``)
until the test has seen that checkpoint registered and killed the driver. The reference runs in
a private Ray instance that is shut down before the sweep starts its own (two instances on one
machine break Ray Train's cleanup).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conformance.corpus import LOOPS
from tests.conformance.harness import CONF, run_plain, sweep_checkpoints, sweep_overrides
from tests.conformance.observe import read
from tests.conftest import private_ray
from tests.integration.test_resume import Sweep, _wait_for

pytestmark = pytest.mark.slow

PAUSE_AT = {"torch_ddp": 1, "lightning_ddp": 0}  # the epoch after which the driver is killed
# What the loop notes when it resumes: (event, its occurrence on each rank, the epoch it names):
# torch_ddp notes "start" at every start (the killed run's first), with the epoch it starts;
# Lightning notes "resumed" with the epoch of the checkpoint it resumes from.
RESUMED = {"torch_ddp": ("start", 1, 2), "lightning_ddp": ("resumed", 0, 0)}


def _last_reports(observed: dict[int, list[dict]]) -> dict[int, dict[int, float]]:
    """Per rank, the loss each epoch ended with (an epoch run again after a restart or a
    resume counts once: its last report)."""
    last: dict[int, dict[int, float]] = {}
    for rank, records in observed.items():
        for record in records:
            if record["event"] == "report":
                last.setdefault(rank, {})[record["epoch"]] = record["loss"]
    return last


def _registered(sweep_dir: Path) -> bool:
    """Whether the trial's run has registered a checkpoint (the resume starts from it)."""
    for path in sweep_dir.glob("train/*/checkpoint_manager_snapshot.json"):
        try:
            if json.loads(path.read_text()).get("latest_checkpoint_result"):
                return True
        except ValueError:
            continue
    return False


def kill_when_paused_and_rerun(runs: Path, overrides: list[str],
                               ready: Callable[[], bool] = lambda: True) -> str:
    """``+experiment=conformance`` with ``overrides`` in ``runs``: its driver killed with
    ``kill -9`` once the loop stands still (``observe.stand_still``) and ``ready()``, then the
    same command run to its end; that run's output (it resumed, rc 0)."""
    runs.mkdir()
    sweep = Sweep(runs, ["--config-dir", str(CONF), "+experiment=conformance", *overrides])
    sweep.start()
    assert _wait_for(lambda: (runs / "observed" / "paused").exists(), sweep.proc, 300), \
        sweep.out.read_text()[-3000:]
    assert _wait_for(ready, sweep.proc, 60)
    sweep.kill9()
    sweep.start()
    rc, out = sweep.wait()
    assert rc == 0, out[-3000:]
    assert "resuming:" in out, out[-3000:]
    return out


# Each loop on one backend (the suite's time): Lightning on the default (inline), where it broke,
# torch on Ray Train. tests/integration/test_resume.py kills the driver of a several-trial ASHA
# sweep at seeded moments on the default backend only; on Ray Train runs, this kill is it.
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("name", "backend"), [("torch_ddp", "train"), ("lightning_ddp", "auto")])
def test_a_killed_driver_resumes_the_loop_as_plain_ray_train_would(name, backend,
                                                                    tmp_path) -> None:
    loop = dataclasses.replace(LOOPS[name], params={**LOOPS[name].params,
                                                   "pause_at": PAUSE_AT[name]})
    with private_ray():
        reference = run_plain(dataclasses.replace(LOOPS[name]), 2, tmp_path / "plain")
    runs = tmp_path / backend
    kill_when_paused_and_rerun(runs, sweep_overrides(loop, 2, backend, runs),
                               lambda: _registered(runs / "sweep"))
    observed = read(runs / "observed")
    event, occurrence, epoch = RESUMED[name]
    for rank in (0, 1):  # from the checkpoint of the epoch the driver was killed after
        starts = [r["epoch"] for r in observed[rank] if r["event"] == event]
        assert starts[occurrence:occurrence + 1] == [epoch], (rank, observed[rank])
    if name == "torch_ddp":
        assert _last_reports(observed) == _last_reports(reference.observed)
    ended = {rank: [r for r in records if r["event"] == "ended"]
             for rank, records in observed.items()}
    assert ended == {rank: [r for r in records if r["event"] == "ended"]
                     for rank, records in reference.observed.items()}
    (run_dir,) = (runs / "sweep" / "train").iterdir()
    assert sweep_checkpoints(run_dir, loop) == reference.checkpoints
