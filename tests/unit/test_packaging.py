"""The wheel ships every package of the source tree (pyproject lists them explicitly)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_directory_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    on_disk = {init.parent.relative_to(ROOT).as_posix().replace("/", ".")
               for top in ("sweeps", "trainables") for init in (ROOT / top).rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - on_disk == {"sweeps.conf"}  # the data package mapped to conf/
