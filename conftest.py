"""Doctests of ``sweeps/`` run with pytest (``--doctest-modules``, see pyproject.toml): the
names their examples use without importing them, as a reader of the docstring would."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict) -> None:
    from sweeps import compose

    doctest_namespace.update(compose=compose, Path=Path, tempfile=tempfile)
