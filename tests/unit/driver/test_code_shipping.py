"""Shipping the user's code to a cluster: the runtime env built from ``ray.*``, the size walk
(against Ray's own zip), and the errors raised before Ray starts. No Ray instance is started."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from sweeps import ConfigError, compose, prepare
from sweeps.driver.code_shipping import (
    DEFAULT_EXCLUDES,
    check_shipping,
    package_size,
    runtime_env,
    upload_limit,
)

SWEEP_DIR = ["/outputs/digits/"]  # sweep.dir's default, inside the shipped current directory


def _tree(root: Path, files: dict[str, int | str]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, int):
            path.write_bytes(b"x" * content)
        else:
            path.write_text(content)
    return root


def _env(cwd: Path, *overrides: str) -> dict | None:
    return runtime_env(compose("digits", list(overrides)))


RUNTIME_ENVS = [
    # (overrides, expected runtime env; "{cwd}" is the test's current directory)
    ([], None),  # local instance: its workers import from the current directory already
    (["ray.working_dir=none"], None),
    (["ray.address=auto", "ray.working_dir=none"], None),
    (["ray.address=auto"],
     {"working_dir": "{cwd}", "excludes": [*DEFAULT_EXCLUDES, *SWEEP_DIR]}),
    (["ray.address=ray://head:10001", "ray.working_dir=src", "ray.excludes=[data/,'*.ckpt']"],
     {"working_dir": "{cwd}/src", "excludes": [*DEFAULT_EXCLUDES, "data/", "*.ckpt"]}),
    (["ray.working_dir=."],  # asked for on a local instance: shipped there too
     {"working_dir": "{cwd}", "excludes": [*DEFAULT_EXCLUDES, *SWEEP_DIR]}),
    (["ray.address=auto", "ray.working_dir=none", "ray.py_modules=[lib,../shared/util.py]"],
     {"py_modules": ["{cwd}/lib", "{cwd}/../shared/util.py"], "excludes": [*DEFAULT_EXCLUDES]}),
    (["ray.address=auto", "ray.working_dir=s3://bucket/code.zip"],
     {"working_dir": "s3://bucket/code.zip", "excludes": [*DEFAULT_EXCLUDES]}),
    (["ray.address=auto", "sweep.dir=runs/a"],
     {"working_dir": "{cwd}", "excludes": [*DEFAULT_EXCLUDES, "/runs/a/"]}),
    (["ray.address=auto", "sweep.dir=/elsewhere/a"],
     {"working_dir": "{cwd}", "excludes": [*DEFAULT_EXCLUDES]}),
]


@pytest.mark.parametrize(("overrides", "expected"), RUNTIME_ENVS)
def test_runtime_env_from_config(overrides: list[str], expected: dict | None) -> None:
    cwd = Path.cwd()
    if expected is not None:
        expected = json.loads(json.dumps(expected).replace("{cwd}", str(cwd)))
    assert _env(cwd, *overrides) == expected


def test_a_submitted_job_keeps_its_own_working_dir(monkeypatch) -> None:
    """Ray refuses to merge ray.init's runtime env with the job's when a key repeats."""
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR",
                       json.dumps({"runtime_env": {"working_dir": "gcs://_ray_pkg_1.zip"}}))
    assert _env(Path.cwd(), "ray.address=auto") is None
    env = _env(Path.cwd(), "ray.address=auto", "ray.py_modules=[lib]")
    assert env is not None and "working_dir" not in env and env["py_modules"]


def test_size_walk_honours_excludes_and_ignore_files(tmp_path: Path) -> None:
    root = _tree(tmp_path / "proj", {
        "train_mnist.py": 10, "pkg/__init__.py": 0, "pkg/model.py": 20,
        "data/big.bin": 1000, "outputs/digits/train/ckpt.pt": 500, "mlflow.db": 300,
        ".git/objects/ab": 400, "pkg/__pycache__/model.cpython-311.pyc": 50,
        "notes/.gitignore": "*.log\n", "notes/run.log": 70, "notes/keep.md": 5,
        ".rayignore": "scratch/\n", "scratch/tmp.npy": 90,
    })
    size = package_size(root, [*DEFAULT_EXCLUDES, "data/"])
    assert sorted(size.files) == [".rayignore", "notes/.gitignore", "notes/keep.md",
                                  "pkg/__init__.py", "pkg/model.py", "train_mnist.py"]
    assert "notes/run.log" in package_size(root, ["data/"], gitignore=False).files
    back = package_size(root, [*DEFAULT_EXCLUDES, "!outputs/"]).files
    assert "outputs/digits/train/ckpt.pt" in back and "data/big.bin" in back


def test_size_walk_matches_what_ray_zips(tmp_path: Path) -> None:
    """The same files, and about the same bytes, as Ray's own packaging of the directory."""
    from ray._private.runtime_env.packaging import _zip_files

    root = _tree(tmp_path / "proj", {
        "a.py": 1234, "pkg/b.py": 20_000, "pkg/sub/c.txt": 7, "outputs/x.pt": 999,
        "docs/.gitignore": "*.html\n", "docs/i.html": 50, "docs/i.md": 60, ".git/HEAD": 10,
    })
    (root / "empty").mkdir()
    excludes = [*DEFAULT_EXCLUDES, "*.txt"]
    out = tmp_path / "pkg.zip"
    _zip_files(str(root), excludes, str(out), include_gitignore=True)
    size = package_size(root, excludes)
    with zipfile.ZipFile(out) as z:
        zipped = {n.rstrip("/") for n in z.namelist() if not n.endswith("/")}
    assert set(size.files) == zipped
    assert abs(size.total - out.stat().st_size) <= 64, (size.total, out.stat().st_size)


def test_upload_limit_is_rays() -> None:
    from ray._private.runtime_env.packaging import GCS_STORAGE_MAX_SIZE

    assert upload_limit() == GCS_STORAGE_MAX_SIZE == 512 * 1024 * 1024


def test_too_big_names_size_biggest_paths_and_fix(monkeypatch) -> None:
    monkeypatch.setenv("RAY_max_grpc_message_size", "10000")  # Ray reads the same variable
    _tree(Path.cwd(), {"train_mnist.py": 100, "data/train.bin": 6000,
                       "src/models/weights.bin": 3000, "src/models/cfg.json": 10,
                       "notebook.ipynb": 2000, "outputs/digits/big.pt": 50_000})
    with pytest.raises(ConfigError) as info:
        check_shipping(compose("digits", ["ray.address=auto"]))
    err = info.value
    assert err.key == "ray.working_dir" and err.value == str(Path.cwd())
    message = str(err)
    assert "holds 11.4 KiB to ship after excludes, over Ray's limit of 9.8 KiB" in message
    assert ("biggest: data/train.bin (5.9 KiB), src/models/weights.bin (2.9 KiB), "
            "notebook.ipynb (2.0 KiB)") in message
    assert "ray.excludes=[data/train.bin]" in message and "ray.working_dir to a" in message


def test_a_small_project_passes(monkeypatch) -> None:
    monkeypatch.setenv("RAY_max_grpc_message_size", "10000")
    _tree(Path.cwd(), {"train_mnist.py": 100, "outputs/digits/big.pt": 50_000})
    env = check_shipping(compose("digits", ["ray.address=auto"]))
    assert env is not None and env["working_dir"] == str(Path.cwd())


MISSING = [
    # (overrides, key, fragment of the message)
    (["ray.address=auto", "ray.working_dir=nope"], "ray.working_dir", "'nope' does not exist"),
    (["ray.address=auto", "ray.working_dir=file.py"], "ray.working_dir",
     "'file.py' is not a directory"),
    (["ray.py_modules=[lib,gone]"], "ray.py_modules[1]", "does not exist"),
]


@pytest.mark.parametrize(("overrides", "key", "fragment"), MISSING)
def test_missing_paths_are_config_errors(overrides: list[str], key: str, fragment: str) -> None:
    _tree(Path.cwd(), {"file.py": 1, "lib/__init__.py": 1})
    with pytest.raises(ConfigError) as info:
        check_shipping(compose("digits", overrides))
    assert info.value.key == key
    assert fragment in str(info.value).replace(str(Path.cwd()) + os.sep, "")


def test_prepare_fails_before_ray_starts() -> None:
    import sys

    with pytest.raises(ConfigError, match="ray.working_dir: 'missing_dir' does not exist"):
        prepare(compose("digits", ["ray.working_dir=missing_dir", "ray.num_cpus=2"]))
    assert "ray" not in sys.modules or not sys.modules["ray"].is_initialized()


UNSHIPPED = [
    # (ray overrides, module of the trainable, warned?)
    (["ray.working_dir=src"], "toploop", True),  # ./toploop.py, only ./src is shipped
    ([], "toploop", False),  # the current directory is shipped
    (["ray.working_dir=none", "ray.py_modules=[mypkg]"], "mypkg.loop", False),
    (["ray.working_dir=src", "ray.py_modules=[lib]"], "mypkg.loop", True),
    (["ray.working_dir=src"], "trainables.digits", False),  # installed with sweeps itself
]


@pytest.mark.parametrize(("overrides", "module", "warned"), UNSHIPPED)
def test_a_trainable_outside_what_is_shipped_is_warned_about(
        overrides: list[str], module: str, warned: bool, monkeypatch, caplog) -> None:
    import importlib
    import sys

    _tree(Path.cwd(), {"toploop.py": "def train(config): pass\n", "mypkg/__init__.py": "",
                       "mypkg/loop.py": "def train(config): pass\n", "src/x.py": 1,
                       "lib/__init__.py": 1})
    monkeypatch.syspath_prepend(str(Path.cwd()))
    for name in ("toploop", "mypkg", "mypkg.loop"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.import_module(module)
    cfg = compose("digits", ["ray.address=auto", f"experiment.trainable={module}:train",
                             *overrides])
    with caplog.at_level("WARNING", logger="sweeps.driver.code_shipping"):
        check_shipping(cfg)
    assert ("which is not shipped to the cluster" in caplog.text) is warned, caplog.text


@pytest.mark.parametrize(("overrides", "expected"), [
    # A joined cluster's workers are told where the bucket is; never the keys.
    (["ray.address=auto", "ray.working_dir=none", "sweep.dir=s3://b/sweeps/d"],
     {"env_vars": {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_DEFAULT_REGION": "eu-1"}}),
    # A local Ray inherits this process's environment; a filesystem sweep.dir needs nothing.
    (["ray.working_dir=none", "sweep.dir=s3://b/sweeps/d"], None),
    (["ray.address=auto", "ray.working_dir=none", "sweep.dir=/mnt/shared/d"], None),
])
def test_object_store_endpoint_reaches_a_joined_cluster(monkeypatch, overrides, expected) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIASECRET")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-value")
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert runtime_env(compose("digits", overrides)) == expected
