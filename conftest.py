"""Doctests of ``sweeps/`` run with pytest (``--doctest-modules``, see pyproject.toml): the
names their examples use without importing them, as a reader of the docstring would."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

# The ``pytester`` fixture: tests of the suite's own rules (tests/unit/test_layout.py).
pytest_plugins = ["pytester"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Doctest collection imports only the modules of ``sweeps/`` that have examples, so a Ray
    whose internals changed fails the canary (tests/unit/ray_adapter) rather than collection."""
    if collection_path.suffix == ".py" and "tests" not in collection_path.parts \
            and ">>>" not in collection_path.read_text():
        return True
    return None


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from sweeps import compose

    doctest_namespace.update(compose=compose, Path=Path, tempfile=tempfile)
    # The examples run as in a clean shell: a developer's MLflow server or Ray job is not theirs
    # (tests/conftest.py does the same for the tests under tests/).
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "RAY_ADDRESS",
                 "RAY_JOB_CONFIG_JSON_ENV_VAR"):
        monkeypatch.delenv(name, raising=False)
