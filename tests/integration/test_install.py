"""A built wheel runs from any directory: configs inside the package, `sweeps` console command.

    pytest tests/integration/test_install.py

Builds the wheel from a copy of the checkout (no build/ left behind), installs it with
``--no-deps`` into a fresh venv, and makes this environment's dependencies visible through a
``.pth`` file naming this interpreter's site-packages. Not ``--system-site-packages``: that
exposes the BASE interpreter, not this venv. The new venv's own site-packages comes first, and
``.pth`` files inside the added directory are not executed, so the checkout's editable finder
stays off and ``import sweeps`` is the installed copy. Dry runs only: Ray is not started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
MINE = """# @package _global_
# sweeps --config-dir myconf +experiment=mine
experiment:
  name: mine
  trainable: mytrain:train_func
  metric: loss
  mode: min
  params: {lr: 0.05}
  search_space:
    lr: interval(0.01, 0.1)
"""


def _run(args: list[str | Path], cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["RAY_ADDRESS"] = ""
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel of this checkout installed; deps from this environment."""
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    for name in ("sweeps", "trainables", "conf"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip"]
    built = _run([*pip, "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                  "-w", tmp / "dist", src], cwd=tmp)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("sweeps-*.whl")
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    assert made.returncode == 0, made.stderr
    # Installed BEFORE the .pth exists, so pip never sees (or touches) this environment.
    installed = _run([*pip, "--python", venv / "bin" / "python", "install", "-q", "--no-deps",
                      "--no-index", wheel], cwd=tmp)
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = _run([venv / "bin" / "python", "-c",
                 "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp)
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site.stdout.strip()) / "_deps_of_the_test_env.pth").write_text("\n".join(paths) + "\n")
    return venv


def test_installed_copy_is_imported_and_has_its_configs(venv: Path, tmp_path: Path) -> None:
    proc = _run([venv / "bin" / "python", "-c",
                 "import sweeps, trainables, sweeps.config.paths as p; "
                 "print(sweeps.__file__, trainables.__file__, p.CONF_DIR, sep='\\n')"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    sweeps_file, trainables_file, conf_dir = map(Path, proc.stdout.split())
    for path in (sweeps_file, trainables_file, conf_dir):
        assert path.is_relative_to(venv), (path, venv)
    assert (conf_dir / "sweep.yaml").is_file()
    assert sorted(p.name for p in (conf_dir / "experiment").glob("*.yaml")) == sorted(
        p.name for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
    for name, shipped in [("slurm", "sweep.sbatch"), ("rayjob", "rayjob.yaml")]:  # package data
        printed = _run([venv / "bin" / "sweeps", "template", name], tmp_path)
        assert printed.returncode == 0, printed.stderr
        assert printed.stdout == (ROOT / "sweeps" / "templates" / shipped).read_text()


@pytest.mark.parametrize("command", [["sweeps"], ["python", "-m", "sweeps"]])
def test_builtin_experiment_dry_run_from_anywhere(venv: Path, tmp_path: Path,
                                                  command: list[str]) -> None:
    exe = [venv / "bin" / command[0], *command[1:]]
    proc = _run([*exe, "+experiment=digits", "sweep.dry_run=true", "ray.num_cpus=2"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "plan for sweep digits (dry run: Ray not started" in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("  experiment digits"))
    path = Path(line.split(" from ", 1)[1].split(" (", 1)[0])
    assert path.is_relative_to(venv) and path.parts[-3:] == ("conf", "experiment",
                                                             "digits.yaml"), line
    assert line.endswith("(built-in)")
    assert "RuntimeWarning" not in proc.stderr


def test_user_config_dir_and_trainable_from_the_working_directory(venv: Path,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "myconf" / "experiment").mkdir(parents=True)
    (tmp_path / "myconf" / "experiment" / "mine.yaml").write_text(MINE)
    (tmp_path / "mytrain.py").write_text("def train_func(config):\n    return None\n")
    proc = _run([venv / "bin" / "sweeps", "--config-dir", "myconf", "+experiment=mine",
                 "sweep.dry_run=true", "ray.num_cpus=2"], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "trainable mytrain:train_func, minimize loss" in proc.stdout
    assert (f"  experiment mine from {tmp_path}/myconf/experiment/mine.yaml (--config-dir)"
            in proc.stdout.splitlines())
    refused = _run([venv / "bin" / "sweeps", "--config-dir", "nope", "+experiment=mine"],
                   tmp_path)
    assert refused.returncode == 2
    assert refused.stderr == (f"sweeps: error: --config-dir: '{tmp_path}/nope' is not a "
                              "directory; pass the directory that holds your experiment/ "
                              "folder, e.g. --config-dir ./conf for ./conf/experiment/NAME.yaml\n")
