"""The canary a Ray upgrade trips first: every Ray internal the adapter uses, checked in seconds.

No cluster is started. ``sweeps._ray.compat`` imports each private symbol and checks the
attributes and parameters the adapter relies on; a sweep runs the same check before its first
trial and fails with one line. What the adapter reads in Ray's source text is checked here alone
(``source_probes``).
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest

from sweeps._ray import compat, compat_probes
from tests.unit.ray_adapter.source_probes import source_probes

SWEEPS = Path(__file__).resolve().parents[3] / "sweeps"
PRIVATE = re.compile(r"_private|_internal|_raylet|_local_tuner|_experiment_analysis")


@pytest.fixture(autouse=True)
def _fresh_check():
    compat._findings.cache_clear()
    yield
    compat._findings.cache_clear()


def test_the_installed_ray_has_every_internal_the_adapter_uses() -> None:
    assert compat.problems() == ()
    compat.check()


def test_every_probe_fails_when_its_internal_is_gone(monkeypatch) -> None:
    """Each probe really looks: remove what it checks and it reports it, by name."""
    from ray.experimental import internal_kv
    from ray.train.v2._internal.execution.worker_group import worker_group

    monkeypatch.delattr(internal_kv, "_internal_kv_list")
    monkeypatch.delattr(worker_group, "placement_group")
    found = compat.problems()
    assert any(p.startswith("internal_kv list: AttributeError") for p in found), found
    # An internal whose adapter function has a fallback is reported, not refused.
    assert not any(p.startswith("worker group creates its placement group:") for p in found)
    assert any(p.startswith("worker group creates its placement group:")
               for p in compat.degraded()), compat.degraded()


def test_the_installed_ray_still_has_the_source_the_adapter_reads() -> None:
    failed = {}
    for name, probe in source_probes().items():
        try:
            probe()
        except Exception as exc:  # ImportError, AttributeError, AssertionError, OSError, ...
            failed[name] = f"{type(exc).__name__}: {exc}"
    assert failed == {}


def test_a_source_probe_reports_what_the_source_no_longer_says(monkeypatch) -> None:
    source = "class _TrainSession:\n    def __init__(self):\n        self.queue = None\n"
    monkeypatch.setattr(compat_probes.inspect, "getsource", lambda obj: source)
    with pytest.raises(AssertionError, match="no longer sets self.result_queue"):
        source_probes()["trial session queues"]()
    assert set(source_probes()).isdisjoint(compat._probes())  # each checked in one place
    assert compat.SOFT <= set(compat._probes())  # a misspelt name would refuse, not warn


def test_an_internal_with_a_fallback_warns_and_the_sweep_runs(monkeypatch, caplog) -> None:
    from ray.train.v2._internal.callbacks import datasets

    monkeypatch.delattr(datasets, "DatasetsCallback")
    with caplog.at_level("WARNING", logger="sweeps._ray.compat"):
        compat.check()
    assert "Train's datasets callback" in caplog.text and "runs without it" in caplog.text


def test_a_renamed_ray_constant_is_a_problem(monkeypatch) -> None:
    from ray.tune.execution.tune_controller import TuneController

    monkeypatch.setattr(TuneController, "CKPT_FILE_TMPL", "experiment-{}.json")
    assert any(p.startswith("Tune's experiment-state file:") and "experiment-{}.json" in p
               for p in compat.problems())


def test_a_changed_signature_fails_the_sweep_with_one_line(monkeypatch) -> None:
    from ray.experimental import internal_kv

    monkeypatch.setattr(internal_kv, "_internal_kv_del", lambda key, namespace=None: 0)
    with pytest.raises(compat.RayIncompatible) as caught:
        compat.check()
    message = str(caught.value)
    assert "\n" not in message
    assert f"ray {importlib.metadata.version('ray')} is not supported" in message
    assert "internal_kv del" in message and "del_by_prefix" in message
    assert f"ray[default,tune,train]{compat.TESTED}" in message


def test_the_tested_range_is_the_one_the_package_requires() -> None:
    pyproject = (SWEEPS.parent / "pyproject.toml").read_text()
    assert f'"ray[default,tune,train]{compat.TESTED}"' in pyproject


def test_rays_private_api_is_used_only_in_the_adapter() -> None:
    """Every private Ray name lives in ``sweeps/_ray/`` (and Hydra's one in ``_hydra.py``),
    so a Ray upgrade touches that package alone."""
    offenders = [f"{path.relative_to(SWEEPS)}:{n}: {line.strip()}"
                 for path in sorted(SWEEPS.rglob("*.py"))
                 if path.parent.name != "_ray" and path.name != "_hydra.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if PRIVATE.search(line)]
    assert offenders == []
