"""The rules of Train-backend prestarting that need no cluster (``sweeps._ray.prestart``,
``sweeps.trial.backends.prestart_next``); ``tests/integration/test_prestart.py`` runs it."""

from __future__ import annotations

import importlib

import pytest

from sweeps._ray import prestart
from sweeps.trial.backends.prestart_next import keep_alive_s, trials_left


class _Trial:
    def __init__(self, status: str) -> None:
        self.status = status


@pytest.mark.parametrize(("statuses", "total", "left"), [
    ([], 1, 1),  # nothing made yet
    (["RUNNING"], 1, 0),  # the only trial runs: its successor is nobody
    (["RUNNING"], 3, 2),  # the searcher makes the next ones later
    (["RUNNING", "PENDING"], 2, 1),  # made, waiting for room
    (["TERMINATED", "RUNNING", "PAUSED"], 3, 1),  # PBT resumes a paused trial
    (["TERMINATED", "ERROR", "RUNNING"], 3, 0),
    (["RUNNING", "PENDING", "PENDING"], 3, 2),  # a grid of 3 (the sweep's trial count)
])
def test_trial_starts_still_to_come(statuses, total, left) -> None:
    assert trials_left([_Trial(s) for s in statuses], total) == left


@pytest.mark.parametrize(("longest", "keep"), [
    (None, 3600.0), (1.0, 120.0), (100.0, 300.0), (5000.0, 3600.0)])
def test_keep_alive_follows_the_longest_trial(longest, keep) -> None:
    assert keep_alive_s(longest) == keep


@pytest.fixture
def propagated(monkeypatch):
    """Ray Train's set of env vars it propagates, and the hook variable, restored after the
    test (a hook left in this process's environment would reach every later Ray instance)."""
    constants = importlib.import_module(prestart.PROPAGATED_MODULE)
    monkeypatch.setattr(constants, "ENV_VARS_TO_PROPAGATE",
                        set(constants.ENV_VARS_TO_PROPAGATE))
    monkeypatch.setenv(prestart.HOOK_ENV, "placeholder")  # recorded, so undone after
    monkeypatch.delenv(prestart.HOOK_ENV)
    return constants


def test_the_hook_reaches_the_controller_through_train_s_own_propagation(
        propagated, monkeypatch) -> None:
    assert prestart.preload(True) is True
    # What Train passes its controller (DataParallelTrainer._initialize_and_run_controller).
    assert propagated.get_env_vars_to_propagate()[prestart.HOOK_ENV] == prestart.HOOK


def test_a_job_s_own_setup_hook_is_left_alone(propagated, monkeypatch) -> None:
    monkeypatch.setenv(prestart.HOOK_ENV, "mypkg.setup")
    assert prestart.preload(True) is False
    assert prestart.HOOK_ENV not in propagated.ENV_VARS_TO_PROPAGATE
    assert prestart.HOOK_ENV not in propagated.get_env_vars_to_propagate()


def test_a_run_without_prestart_takes_the_hook_back(propagated) -> None:
    """A trial process whose earlier Train run preloaded passes nothing on to a run that does
    not (one with experiment.datasets)."""
    import os

    assert prestart.preload(True) is True
    assert prestart.preload(False) is False
    assert prestart.HOOK_ENV not in propagated.get_env_vars_to_propagate()
    assert prestart.HOOK_ENV not in os.environ


def test_a_hook_that_raises_here_is_never_handed_to_ray(propagated, monkeypatch) -> None:
    monkeypatch.setattr(prestart, "HOOK", "json.loads")  # called with no argument: raises
    monkeypatch.delenv(prestart.HOOK_ENV, raising=False)
    assert prestart.preload(True) is False
    assert prestart.HOOK_ENV not in propagated.get_env_vars_to_propagate()


def test_the_hook_imports_and_cannot_fail() -> None:
    """Ray drains a process whose hook raises: the hook is a public name that builds a
    default config."""
    module, _, name = prestart.HOOK.rpartition(".")
    getattr(importlib.import_module(module), name)()


def test_workers_env_is_the_controllers_as_ray_re_serializes_it() -> None:
    # Seen in a Train worker under a controller started by a trial with no runtime env.
    own = '{"env_vars": {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1", "A": "x y"}}'
    assert prestart.child_env_string(own) == (
        '{"env_vars":{"A":"x y","RAY_TRAIN_HEALTH_CHECK_INTERVAL_S":"0.1"}}')
    assert prestart.child_env_string("") == "{}"


def test_prestart_without_a_raylet_asks_nothing_and_says_so() -> None:
    assert prestart.prestart("{}", 0, 60) is False
    assert prestart.prestart("{}", 2, 60) is False  # no Ray connected here: refused, no raise


def _limits(monkeypatch) -> list:
    """threadpoolctl's global limit, recorded instead of applied (it would outlive the test)."""
    calls: list = []
    threadpoolctl = pytest.importorskip("threadpoolctl")
    monkeypatch.setattr(threadpoolctl, "threadpool_limits",
                        lambda limits, user_api=None: calls.append((limits, user_api)))
    return calls


@pytest.mark.parametrize(("before_loop", "user_set", "expected"), [
    (2, None, 1),  # left as the preload made it: set to Ray's OMP_NUM_THREADS, as if cold
    (2, 3, 3),  # the user's module set 3 at import: kept, as a cold worker keeps it
])
def test_a_prestarted_worker_gets_the_threads_a_cold_one_has(monkeypatch, before_loop, user_set,
                                                             expected) -> None:
    import torch

    calls = _limits(monkeypatch)
    saved = torch.get_num_threads()
    monkeypatch.setenv(prestart.HOOK_ENV, prestart.HOOK)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    try:
        torch.set_num_threads(user_set or before_loop)
        prestart.match_cold_threads(before_loop)
        assert torch.get_num_threads() == expected
        assert calls == [(1, "blas")]
    finally:
        torch.set_num_threads(saved)


def test_a_blas_pool_with_its_own_variable_is_left_alone(monkeypatch) -> None:
    calls = _limits(monkeypatch)
    monkeypatch.setenv(prestart.HOOK_ENV, prestart.HOOK)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    prestart.match_cold_threads(None)
    assert calls == []


def test_a_cold_worker_is_left_alone(monkeypatch) -> None:
    import torch

    calls = _limits(monkeypatch)
    monkeypatch.delenv(prestart.HOOK_ENV, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    prestart.match_cold_threads(before)
    assert torch.get_num_threads() == before and calls == []


def test_the_model_flavour_is_imported_beside_training() -> None:
    import sys

    from sweeps.tracking.callback import MODEL_LOGGING_MODULES, warm_model_logging

    warm_model_logging().join(timeout=120)
    assert all(name in sys.modules for name in MODEL_LOGGING_MODULES)
