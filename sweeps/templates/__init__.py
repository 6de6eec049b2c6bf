"""sweeps template slurm|rayjob|raycluster > FILE: the files that run a sweep on a cluster.

    sweeps template slurm > sweep.sbatch        # sbatch sweep.sbatch +experiment=... sweep.dir=...
    sweeps template rayjob > sweep-rayjob.yaml  # kubectl apply -f sweep-rayjob.yaml (KubeRay)

Each is a file of this package (``sweep.sbatch``, ``rayjob.yaml``, ``raycluster.yaml``), printed
as it is, to be copied and edited (docs/clusters.md says what each line is for).
"""

from __future__ import annotations

import sys
from importlib.resources import files

__all__ = ["TEMPLATES", "main", "text"]

TEMPLATES = {"slurm": "sweep.sbatch", "rayjob": "rayjob.yaml", "raycluster": "raycluster.yaml"}


def text(name: str) -> str:
    """The template ``name`` (a key of ``TEMPLATES``) as shipped."""
    return files(__name__).joinpath(TEMPLATES[name]).read_text()


def main(argv: list[str]) -> int:
    """``sweeps template NAME``: print the template; exit 2 naming the choices otherwise."""
    if len(argv) != 1 or argv[0] not in TEMPLATES:
        print(f"sweeps: error: usage: sweeps template {{{'|'.join(TEMPLATES)}}} > FILE "
              f"(got {' '.join(argv) or 'nothing'})", file=sys.stderr)
        return 2
    sys.stdout.write(text(argv[0]))
    return 0
