"""A sweep pickled by a sweeps with flat modules (``sweeps.schedulers``...) still restores."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from sweeps.search.outcome import Objective
from sweeps.search.schedulers import ResumableFIFO

LOAD = """
import pickle, sys
data = open(sys.argv[1], 'rb').read()
if sys.argv[2] == 'alias':
    from sweeps.resume.legacy import alias_old_modules
    alias_old_modules()
obj = pickle.loads(data)
print(type(obj).__module__, type(obj).__name__)
"""


def _old_pickle(obj: object, new: str, old: str) -> bytes:
    """``obj`` pickled as an older sweeps would have: its class under the old module path."""
    data = pickle.dumps(obj, protocol=0)  # text protocol: module paths are plain lines
    assert f"c{new}\n".encode() in data
    return data.replace(f"c{new}\n".encode(), f"c{old}\n".encode())


def _load(path, mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LOAD, str(path), mode], capture_output=True,
                          text=True, timeout=120)


def test_an_old_scheduler_pickle_loads_after_aliasing(tmp_path) -> None:
    scheduler = ResumableFIFO(tmp_path, Objective("val_acc", "max", 3))
    path = tmp_path / "tuner.pkl"
    path.write_bytes(_old_pickle(scheduler, "sweeps.search.schedulers", "sweeps.schedulers"))
    plain = _load(path, "plain")
    assert plain.returncode != 0 and "No module named 'sweeps.schedulers'" in plain.stderr
    aliased = _load(path, "alias")
    assert aliased.returncode == 0, aliased.stderr
    assert aliased.stdout.split() == ["sweeps.search.schedulers", "ResumableFIFO"]


def test_old_tracking_callback_names_resolve_on_the_package() -> None:
    import sweeps.tracking
    from sweeps.tracking.callback import MLflowTracking

    assert sweeps.tracking.MLflowTracking is MLflowTracking


@pytest.mark.parametrize("old", ["sweeps.execution.trial_driver", "sweeps.trial"])
def test_a_plan_pickled_before_the_driver_trial_loop_split_loads(tmp_path, old: str) -> None:
    """Sweeps before the split pickled TrialPlan as sweeps.execution.trial_driver.TrialPlan
    (and before packages, sweeps.trial.TrialPlan): both load, as the new class."""
    from sweeps.trial.plan import _EXAMPLE, TrialPlan

    path = tmp_path / "plan.pkl"
    path.write_bytes(_old_pickle(TrialPlan(**_EXAMPLE), "sweeps.trial.plan", old))
    if old.startswith("sweeps.execution"):
        plain = _load(path, "plain")
        assert plain.returncode != 0 and "No module named 'sweeps.execution" in plain.stderr
    aliased = _load(path, "alias")
    assert aliased.returncode == 0, aliased.stderr
    assert aliased.stdout.split() == ["sweeps.trial.plan", "TrialPlan"]


# Every class each module of sweeps.execution defined (read from the last tree that had it):
# an old pickle may name any of them, so each must resolve under its old path.
EXECUTION_CLASSES = {
    "clock": ["TrialClock"], "cluster_watch": ["ClusterWatch"], "code_shipping": ["PackageSize"],
    "context": ["TrialContext"], "datasets": ["DatasetSource"], "inline": ["InlineRun"],
    "interrupt": ["Interrupt", "GraceTimer"],
    "peers": ["PeerJob", "PeerReports", "RankZeroReports", "Peer", "PeerGroup"],
    "prepare": ["Prepared"], "rank_error": ["PeerError"],
    "rendezvous": ["TrialStopped", "PeerFailed", "ReportMismatch", "WorldSpec", "Rendezvous"],
    "report_bridge": ["SweepReportCallback"], "resources": ["ResourcePlan"],
    "result": ["SweepResult"], "session": ["TrialSession"], "storage_watch": ["StorageWatch"],
    "trial_driver": ["TrialPlan"], "unread": ["UnreadKeysCheck"],
    "worker": ["ReadLog", "TrackedConfig"],
}


def test_every_class_of_the_old_execution_package_resolves_under_its_old_path() -> None:
    from sweeps.resume.legacy import EXECUTION_MODULES

    assert set(EXECUTION_CLASSES) <= set(EXECUTION_MODULES)
    names = [f"{old}:{cls}" for old, classes in EXECUTION_CLASSES.items() for cls in classes]
    script = ("import importlib, sys\nfrom sweeps.resume.legacy import alias_old_modules\n"
              "alias_old_modules()\nfor ref in sys.argv[1:]:\n"
              "    old, cls = ref.split(':')\n"
              "    obj = getattr(importlib.import_module('sweeps.execution.' + old), cls)\n"
              "    print(ref, obj.__module__)\n")
    proc = subprocess.run([sys.executable, "-c", script, *names], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    moved = dict(line.split() for line in proc.stdout.splitlines())
    assert sorted(moved) == sorted(names)
    assert not [m for m in moved.values() if m.startswith("sweeps.execution")]


OLD_PLAN = """
import dataclasses, pickle, sys, types
module = types.ModuleType("sweeps.execution.resources")
sys.modules[module.__name__] = module

@dataclasses.dataclass(frozen=True)
class ResourcePlan:  # its fields as the last layout with sweeps.execution had them
    use_gpu: bool = False
    num_workers: int = 2
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    max_concurrent_trials: int = 1
    trials_that_fit: int = 1
    cluster_cpus: float = 2.0
    cluster_gpus: float = 0.0
    inline: bool = False
    backend: str = "gloo"

ResourcePlan.__module__ = module.__name__
module.ResourcePlan = ResourcePlan
sys.stdout.buffer.write(pickle.dumps([ResourcePlan(inline=True), ResourcePlan(inline=False)]))
"""


def test_a_resource_plan_pickled_with_inline_loads(tmp_path) -> None:
    """The cluster watch Tune pickles holds the sweep's ResourcePlan, which had ``inline: bool``
    before the backend interface: under its old path it loads, as this version's class (the
    restored callbacks are replaced by the run's own, so loading is all it needs)."""
    path = tmp_path / "plan.pkl"
    path.write_bytes(subprocess.run([sys.executable, "-c", OLD_PLAN], capture_output=True,
                                    check=True, timeout=120).stdout)
    plain = _load(path, "plain")
    assert plain.returncode != 0 and "No module named 'sweeps.execution" in plain.stderr
    script = ("import pickle, sys\nfrom sweeps.resume.legacy import alias_old_modules\n"
              "alias_old_modules()\nplans = pickle.loads(open(sys.argv[1], 'rb').read())\n"
              "print([(type(p).__module__, p.num_workers) for p in plans])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("[('sweeps.driver.resources', 2), "
                                   "('sweeps.driver.resources', 2)]")
