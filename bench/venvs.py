"""A benchmark's own virtual environment, for packages that cannot share this one's versions.

    python = venv_python(ROOT / "bench" / ".venv-mf", ["mf-prior-bench==1.10.0"], "import mfpbench")

Made once under ``bench/`` (git ignores ``bench/.venv-*``), reused while its ``installed.txt``
says the same layout, requirements and borrowed environment; a half-made one, or one made for
another environment, is made again. Used by ``bench.search_efficiency`` (Hydra's Optuna sweeper
needs optuna<3) and ``bench.mf`` (mf-prior-bench and dehb pin numpy<2).

Not ``venv --system-site-packages``: inside a venv that exposes the base interpreter's packages,
not this venv's (``No module named 'torch'``). Instead a ``.pth`` file in the venv's
site-packages lists this environment's site-packages; ``site`` appends it to ``sys.path`` after
the venv's own, so its pinned packages come first. It is written before ``pip install``, so pip
takes what this environment already has as installed and adds only what differs: one copy of
everything else. Only the listed directories are added (their own ``.pth`` files are not run):
run the venv's interpreter with ``PYTHONPATH`` set to the checkout.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

__all__ = ["venv_python", "parent_paths", "LAYOUT"]

LAYOUT = 2  # 2: own venv + a .pth to this environment (1: --system-site-packages)


def parent_paths() -> list[str]:
    """This interpreter's site-packages (purelib, then platlib when it differs)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def marker(requirements: list[str]) -> str:
    """What ``installed.txt`` must say for a venv to be reused.

    Example:
        >>> marker(["dehb==0.1.2"]).splitlines()[:2]
        ['layout: 2', 'dehb==0.1.2']
    """
    return "\n".join([f"layout: {LAYOUT}", *requirements,
                      *(f"borrows: {p}" for p in parent_paths())]) + "\n"


def venv_python(where: Path, requirements: list[str], import_check: str) -> Path:
    """The interpreter of the venv at ``where`` holding ``requirements`` and borrowing the rest
    from this environment; made on first use (needs PyPI), reused after. ``import_check`` is
    code the new venv must run (its own packages must win over this environment's)."""
    python = where / "bin" / "python"
    ready = where / "installed.txt"  # written last: a half-made venv is made again
    expected = marker(requirements)
    if ready.is_file() and ready.read_text() == expected and python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(where)], check=True)
    site = subprocess.run([str(python), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "_bench_parent_env.pth").write_text("\n".join(parent_paths()) + "\n")
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q",
                          "--disable-pip-version-check", *requirements],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        raise RuntimeError(f"could not install {requirements} into {where} "
                           f"(needs PyPI):\n{pip.stderr[-2000:]}")
    check = subprocess.run([str(python), "-c", import_check], capture_output=True, text=True)
    if check.returncode != 0:
        raise RuntimeError(f"the venv {where} cannot import what it needs:\n"
                           f"{check.stderr[-2000:]}")
    ready.write_text(expected)
    return python
