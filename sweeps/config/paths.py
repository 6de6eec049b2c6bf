"""Where the package's bundled Hydra configs live.

    python -c "from sweeps.config.paths import CONF_DIR; print(CONF_DIR)"

The built-in configs live in the repository's top-level ``conf/``. A wheel ships the same files
as the data package ``sweeps.conf`` (``pyproject.toml`` maps ``sweeps.conf`` to ``conf/``), so
an installed copy finds them at ``<site-packages>/sweeps/conf`` and a checkout or an editable
install finds them at ``<repo>/conf``.
"""

from __future__ import annotations

from pathlib import Path

from sweeps.errors import ConfigError

__all__ = ["CONF_DIR", "find_conf_dir"]

PRIMARY = "sweep.yaml"


def find_conf_dir(package_dir: Path | None = None) -> Path:
    """The directory holding ``sweep.yaml`` and ``experiment/``: installed copy first, then repo.

    Example:
        >>> (find_conf_dir() / "sweep.yaml").is_file()
        True
    """
    here = package_dir or Path(__file__).resolve().parent.parent  # the sweeps package
    candidates = (here / "conf", here.parent / "conf")
    for candidate in candidates:
        if (candidate / PRIMARY).is_file():
            return candidate
    raise ConfigError("CONF_DIR", str(candidates[0]), f"has no {PRIMARY} (nor has "
                      f"{candidates[1]})", "reinstall sweeps: `pip install .` ships conf/ inside "
                      "the package")


CONF_DIR = find_conf_dir()
