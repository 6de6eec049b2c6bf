"""Ship the user's code to a Ray cluster's workers through Ray's runtime env.

    python -m sweeps +experiment=mine ray.address=auto                   # ships the current dir
    python -m sweeps +experiment=mine ray.address=auto ray.working_dir=src ray.py_modules=[../lib]
    python -m sweeps +experiment=mine ray.address=auto ray.working_dir=none  # installed there

A trainable (``train_mnist:train_func``) lives in the user's project. The private local
instance puts the driver's cwd on every worker's ``sys.path``; on a cluster ``runtime_env()``
builds ``{"working_dir", "py_modules", "excludes"}`` for ``ray.init(runtime_env=...)``. Ray
refuses a package of ``GCS_STORAGE_MAX_SIZE`` bytes or more only after zipping it (the numbers and
the matcher come from Ray through ``sweeps._ray.shipping``); ``check_shipping()`` measures the same
files before Ray starts and names the biggest. What the user sees:
docs/clusters.md#your-code-reaches-the-workers-through-rays-runtime-env.

Divergences from Ray, deliberate: more default excludes (``DEFAULT_EXCLUDES``: sweep outputs
and MLflow stores, which grow with every sweep) and they apply to ``py_modules`` too; the
sweep's own directory is never shipped.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps._ray.shipping import path_spec, submitted_job_env, upload_limit
from sweeps.errors import ConfigError
from sweeps.storage.location import is_uri, store_env

if TYPE_CHECKING:
    from sweeps.config.schema import SweepConfig

__all__ = ["DEFAULT_EXCLUDES", "OFF", "PackageSize", "check_shipping", "package_size",
           "runtime_env", "upload_limit"]

log = logging.getLogger(__name__)

OFF = "none"
"""``ray.working_dir: none``: ship no working directory (``null`` means: decide by address)."""

DEFAULT_EXCLUDES: tuple[str, ...] = (
    ".git", ".venv", "venv", "__pycache__",  # Ray's own defaults (working_dir only, in Ray)
    "outputs/", "multirun/",  # sweeps' and Hydra's run directories: checkpoints live there
    "mlruns/", "mlartifacts/", "mlflow.db",  # MLflow's local stores
    ".pytest_cache/", ".ruff_cache/", ".mypy_cache/", ".ipynb_checkpoints/", "*.egg-info/",
)
"""Never shipped unless re-included with ``!pattern`` in ``ray.excludes``. Checkpoints and
weights (``*.pt``) are not excluded by name: a loop may load pretrained weights from its
project; those under ``outputs/`` are excluded with it."""

_ZIP_ENTRY_OVERHEAD = 76  # bytes per zip entry: local header (30) + central directory (46)


@dataclass
class PackageSize:
    """What Ray would zip from one package: its estimated zip size and each file's size."""

    total: int = 0
    files: dict[str, int] = field(default_factory=dict)  # path relative to the root -> bytes

    def offenders(self, n: int = 3) -> list[tuple[str, int]]:
        """The ``n`` biggest top-level entries, each narrowed to its biggest child while
        that child holds 80 % of it (so a deep weights file is named, not ``src/``)."""
        sizes: dict[str, int] = {}
        for rel, size in self.files.items():
            parts = rel.split("/")
            for i in range(1, len(parts) + 1):
                key = "/".join(parts[:i]) + ("/" if i < len(parts) else "")
                sizes[key] = sizes.get(key, 0) + size
        top = sorted((k for k in sizes if "/" not in k.rstrip("/")), key=lambda k: -sizes[k])
        picked = []
        for key in top[:n]:
            while key.endswith("/"):
                kids = [k for k in sizes if k.startswith(key) and k != key
                        and "/" not in k[len(key):].rstrip("/")]
                best = max(kids, key=lambda k: sizes[k], default=None)
                if best is None or sizes[best] < 0.8 * sizes[key]:
                    break
                key = best
            picked.append((key, sizes[key]))
        return picked


def _matcher(base: Path, patterns: list[str]) -> Callable[[Path], bool]:
    """Ray's matcher: gitwildmatch patterns against the path relative to ``base``."""
    spec = path_spec(patterns)  # the one Ray packages with
    return lambda p: spec.match_file(str(p.relative_to(base)))


def package_size(root: Path, excludes: list[str], gitignore: bool = True,
                 skip: Callable[[Path], bool] | None = None) -> PackageSize:
    """Walk ``root`` as Ray's ``_dir_travel`` does when it zips it: ``excludes`` relative to
    ``root``, every ``.rayignore`` (and ``.gitignore`` unless ``gitignore`` is false) relative
    to its own directory; an excluded directory is not entered, nor one ``skip`` names.

    Example:
        >>> project = Path(tempfile.mkdtemp())
        >>> _ = (project / "train.py").write_text("x" * 1000)
        >>> (project / "outputs").mkdir()
        >>> _ = (project / "outputs" / "big.bin").write_bytes(b"0" * 10**6)
        >>> size = package_size(project, ["outputs/"])
        >>> sorted(size.files), size.total > 1000
        (['train.py'], True)
    """
    root = root.absolute()
    size = PackageSize()
    if root.is_file():
        size.files[root.name] = root.stat().st_size
        size.total = root.stat().st_size + _ZIP_ENTRY_OVERHEAD + 2 * len(root.name)
        return size
    seen: set[tuple[int, int]] = set()

    def walk(path: Path, matchers: list[Callable[[Path], bool]]) -> None:
        if path.is_dir():
            ignore_files = [".gitignore", ".rayignore"] if gitignore else [".rayignore"]
            matchers = matchers + [_matcher(path, (path / f).read_text().splitlines())
                                   for f in ignore_files if (path / f).is_file()]
        if path != root and (any(m(path) for m in matchers) or (skip and skip(path))):
            return
        rel = path.relative_to(root).as_posix()
        if path.is_dir():
            st = path.stat()
            if (st.st_dev, st.st_ino) in seen:  # a symlink cycle: Ray would loop forever
                return
            seen.add((st.st_dev, st.st_ino))
            try:
                entries = sorted(path.iterdir())
            except OSError as exc:
                raise ConfigError("ray.excludes", rel, f"is a directory sweeps cannot read "
                                  f"({exc.strerror or exc})",
                                  f"add ray.excludes=[{rel}/] or make it readable") from exc
            if not entries and path != root:
                size.total += _ZIP_ENTRY_OVERHEAD + 2 * len(rel)
            for entry in entries:
                walk(entry, matchers)
        elif path.is_file():
            nbytes = path.stat().st_size
            size.files[rel] = nbytes
            size.total += nbytes + _ZIP_ENTRY_OVERHEAD + 2 * len(rel.encode())

    walk(root, [_matcher(root, list(excludes))])
    return size


def runtime_env(cfg: SweepConfig) -> dict[str, Any] | None:
    """The runtime env ``ray.init`` gets to ship the user's code, or ``None`` for none.

    Paths are made absolute; ``excludes`` is ``DEFAULT_EXCLUDES`` + ``ray.excludes`` + the
    sweep directory. Inside a ``ray job submit`` that already ships a working_dir or
    py_modules, those are left to the job.

    Example:
        >>> env = runtime_env(compose("digits", ["ray.address=auto",
        ...                                      "ray.working_dir=/home/me/proj"]))
        >>> env["working_dir"], env["excludes"][:1]
        ('/home/me/proj', ['.git'])
    """
    env: dict[str, Any] = {}
    wd = cfg.ray.working_dir  # unset: the cwd on a cluster, nothing on a local instance
    wd = ("." if cfg.ray.address else None) if wd is None else \
        (None if wd.strip().lower() == OFF else wd)
    if wd is not None:
        env["working_dir"] = wd if is_uri(wd) else str(Path(wd).expanduser().absolute())
    if cfg.ray.py_modules:
        env["py_modules"] = [m if is_uri(m) else str(Path(m).expanduser().absolute())
                             for m in cfg.ray.py_modules]
    # Ray refuses to merge ray.init's runtime env with a ray job submit's when a key repeats
    for key in sorted(set(submitted_job_env()) & {"working_dir", "py_modules"}):
        if env.pop(key, None) is not None:
            log.info("ray.%s: left to the submitted job's runtime env", key)
    local_wd = env.get("working_dir")
    if env:  # and the sweep's own directory, anchored, when it lies inside the working_dir
        sweep_dir, root = Path(cfg.sweep.dir).expanduser().absolute(), Path(local_wd or "/")
        inside = local_wd and not is_uri(local_wd) and sweep_dir.is_relative_to(root) \
            and sweep_dir != root
        env["excludes"] = [*DEFAULT_EXCLUDES, *cfg.ray.excludes,
                           *([f"/{sweep_dir.relative_to(root).as_posix()}/"] if inside else [])]
    store = store_env(cfg.sweep.dir) if cfg.ray.address else {}  # for a joined cluster
    if store:
        env["env_vars"] = store
    return env or None


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024:
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"


def _packages(cfg: SweepConfig, env: dict[str, Any]) -> list[tuple[str, str, Path]]:
    """(config key, value as configured, local path) of each local package in ``env``."""
    out = []
    wd = env.get("working_dir")
    if wd and not is_uri(wd):
        out.append(("ray.working_dir", cfg.ray.working_dir or wd, Path(wd)))
    modules = env.get("py_modules", [])  # empty when a submitted job ships its own
    for i, (path, value) in enumerate(zip(modules, cfg.ray.py_modules, strict=False)):
        if not is_uri(path):
            out.append((f"ray.py_modules[{i}]", value, Path(path)))
    return out


def check_shipping(cfg: SweepConfig) -> dict[str, Any] | None:
    """Before Ray starts: every local path to ship exists and each package stays under
    Ray's upload limit; ``ConfigError`` otherwise. Returns ``runtime_env(cfg)``.

    Nothing is checked when this process is already connected to Ray (its runtime env was
    fixed by whoever called ``ray.init``).

    Example:
        >>> project = tempfile.mkdtemp()
        >>> check_shipping(compose("digits", ["ray.address=auto", f"ray.working_dir={project}"]))
        {'working_dir': '...', 'excludes': [...]}
        >>> check_shipping(compose("digits", ["ray.address=auto", "ray.working_dir=/no/such/dir"]))
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: ray.working_dir: '/no/such/dir' ...
    """
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        return None
    env = runtime_env(cfg)
    if env is None:
        return None
    limit = upload_limit()
    gitignore = os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1"
    for key, value, path in _packages(cfg, env):
        if key == "ray.working_dir" and not path.is_dir():
            raise ConfigError(key, value, "is not a directory" if path.exists() else
                              f"does not exist (from {os.getcwd()})",
                              "point ray.working_dir at the directory that holds your code, "
                              "or set ray.working_dir=none if the cluster has it installed")
        if not path.exists():
            raise ConfigError(key, value, f"does not exist (from {os.getcwd()})",
                              "list package directories or .py files that exist in "
                              "ray.py_modules, relative to where you run sweeps")
        size = package_size(path, env["excludes"], gitignore)
        if size.total >= limit:
            offenders = size.offenders()
            biggest = ", ".join(f"{p} ({_human(b)})" for p, b in offenders) or "many files"
            raise ConfigError(
                key, value, f"holds {_human(size.total)} to ship after excludes, over Ray's "
                f"limit of {_human(limit)} per package; biggest: {biggest}",
                f"exclude them, e.g. ray.excludes=[{(offenders or [('data/', 0)])[0][0]}] "
                "(or a .rayignore file), or set ray.working_dir to a directory with just "
                "your code")
        log.info("%s: shipping %s (%s)", key, value, _human(size.total))
    _warn_unshipped_trainable(cfg, env)
    return env


def _warn_unshipped_trainable(cfg: SweepConfig, env: dict[str, Any]) -> None:
    """Warn when the trainable's module is imported from a directory the env does not ship
    (and not from site-packages or next to sweeps itself): the cluster may lack it."""
    name = cfg.experiment.trainable.partition(":")[0]
    file = getattr(sys.modules.get(name), "__file__", None)
    if not file or is_uri(env.get("working_dir", "")):  # what a remote zip holds is unknown
        return
    parts = name.split(".")
    root = Path(file).absolute().parents[len(parts) - (0 if file.endswith("__init__.py") else 1)]
    sweeps_root = Path(__file__).absolute().parents[2]  # next to the sweeps package
    if root == sweeps_root or {"site-packages", "dist-packages"} & set(root.parts):
        return
    shipped = {Path(env["working_dir"])} if "working_dir" in env else set()
    shipped |= {Path(m).parent for m in env.get("py_modules", [])
                if not is_uri(m) and Path(m).stem == parts[0]}
    if root not in shipped:
        log.warning("experiment.trainable: %s is imported from %s, which is not shipped to "
                    "the cluster (ray.working_dir=%s); unless it is installed there, set "
                    "ray.working_dir=%s or add %s to ray.py_modules", name, root,
                    env.get("working_dir"), root, root / parts[0])
