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
