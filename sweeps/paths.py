"""Where the package's bundled Hydra configs live (``conf/`` next to ``sweeps/``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CONF_DIR"]

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
