"""The best model's code in MLflow: the package as it is imported, never its venvs or caches."""

from __future__ import annotations

import importlib.util
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sweeps.tracking import mlflow_model
from sweeps.tracking.mlflow_model import model_code

LOADER = textwrap.dedent("""
    import torch

    from {pkg}.nets.tiny import Tiny


    def load(checkpoint_dir):
        model = Tiny()
        model.load_state_dict(torch.load(checkpoint_dir + "/weights.pt"))
        return model
""")
NET = textwrap.dedent("""
    import json
    from pathlib import Path

    import torch

    CLASSES = json.loads((Path(__file__).parent / "classes.json").read_text())  # at import


    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)
""")


def _project(root: Path, pkg: str, init: bool = True) -> Path:
    """A user's project package beside a venv, data, checkpoints and caches."""
    package = root / pkg
    (package / "nets").mkdir(parents=True)
    if init:
        (package / "__init__.py").write_text("")
    (package / "loaders.py").write_text(LOADER.format(pkg=pkg))
    (package / "nets" / "tiny.py").write_text(NET)
    (package / "nets" / "classes.json").write_text('["no", "yes"]')
    (package / "data").mkdir()
    (package / "data" / "train.csv").write_text("x,y\n" * 1000)
    (package / "data" / "prep.py").write_text("X = 1\n")
    for venv in (package / ".venv", package / "env"):  # a hidden one and a plain one
        (venv / "lib" / "site-packages" / "dep").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
        (venv / "lib" / "site-packages" / "dep" / "__init__.py").write_text("")
    (package / ".git").mkdir()
    (package / ".git" / "hook.py").write_text("")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "loaders.cpython-311.pyc").write_bytes(b"\0")
    (package / "runs" / "ckpt").mkdir(parents=True)
    (package / "runs" / "ckpt" / "model.pt").write_bytes(b"\0" * 4096)
    # What code shipping never sends a cluster: its default excludes and a .rayignore.
    for left_out in ("outputs/sweep/state.json", "mlruns/0/meta.yaml", "scratch/notes.py"):
        (package / left_out).parent.mkdir(parents=True, exist_ok=True)
        (package / left_out).write_text("")
    (package / ".rayignore").write_text("scratch/\n")
    return package


def _tree(path: Path) -> list[str]:
    return sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.split(".")[0] in ("userproj", "nsproj", "lib_folder")]:
        del sys.modules[name]


def test_a_package_ships_without_its_venvs_hidden_folders_and_caches(project) -> None:
    package = _project(project, "userproj")
    with model_code("userproj.loaders:load") as code:
        assert Path(code).name == "userproj" and Path(code) != package
        assert _tree(Path(code)) == PACKAGE_FILES
    assert not Path(code).exists()  # a temporary copy, gone after the log
    assert (package / ".venv" / "pyvenv.cfg").exists()  # the project itself is untouched


PACKAGE_FILES = ["__init__.py", "data/prep.py", "data/train.csv", "loaders.py",
                 "nets/classes.json", "nets/tiny.py", "runs/ckpt/model.pt"]


def test_a_namespace_package_ships_the_portion_that_holds_the_factory(project) -> None:
    """Not the working directory (a namespace package has no ``__file__``), and not another
    portion of the same namespace."""
    other = project / "elsewhere"
    (other / "nsproj").mkdir(parents=True)
    (other / "nsproj" / "unrelated.py").write_text("")
    sys.path.insert(0, str(other))  # the other portion comes first on the path
    try:
        _project(project, "nsproj", init=False)
        with model_code("nsproj.loaders:load") as code:
            assert _tree(Path(code)) == [f for f in PACKAGE_FILES if f != "__init__.py"]
    finally:
        sys.path.remove(str(other))


def test_a_package_folder_under_another_name_ships_as_it_is_imported(project) -> None:
    """A symlinked (or differently named) folder: the copy is named as the code imports it."""
    real = _project(project / "src", "lib_folder")
    (real / "loaders.py").write_text(LOADER.format(pkg="userproj"))
    (project / "userproj").symlink_to(real, target_is_directory=True)
    with model_code("userproj.loaders:load") as code:
        assert Path(code).name == "userproj"
        assert _tree(Path(code)) == PACKAGE_FILES


def test_a_large_package_is_logged_with_a_warning_naming_it(project, monkeypatch,
                                                            caplog) -> None:
    _project(project, "userproj")
    monkeypatch.setattr(mlflow_model, "LARGE_CODE_MB", 0.001)
    with caplog.at_level(logging.WARNING, logger="sweeps.tracking.mlflow_model"), \
            model_code("userproj.loaders:load") as code:
        assert _tree(Path(code)) == PACKAGE_FILES  # still whole: a warning, not a cut
    assert "package userproj" in caplog.text and "outside the package" in caplog.text


def test_a_top_level_module_ships_as_itself(project) -> None:
    (project / "solo_loader.py").write_text("def load(path):\n    return None\n")
    with model_code("solo_loader:load") as code:
        assert code == str((project / "solo_loader.py").resolve())
    del sys.modules["solo_loader"]


def test_the_logged_model_holds_the_sources_and_loads_in_a_new_process(project) -> None:
    """End to end against a real SQLite store: the registered model's ``code/`` is the
    package without its venvs, and a fresh interpreter without the project on its path loads
    it (its module reads a data file beside it at import)."""
    import subprocess

    import mlflow
    import torch

    from sweeps.tracking.mlflow_sink import MLflowSink

    _project(project, "userproj")
    store = project / "store"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    sink = MLflowSink(uri, "unit", store, model_name="tiny",
                      model_loader="userproj.loaders:load")
    sink.apply({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "u1", "params": {},
                "config_yaml": "", "search_space": {}, "tags": {}, "ts": 1})
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    checkpoint = project / "ckpt"
    checkpoint.mkdir()
    from userproj.nets.tiny import Tiny

    torch.save(Tiny().state_dict(), checkpoint / "weights.pt")
    sink.apply({"op": "sweep_end", "summary_csv": None, "status": "FINISHED", "tags": {},
                "ts": 4, "best": {"trial_id": "t1", "metric": "acc", "value": 0.9,
                                  "epoch": 3, "checkpoint": str(checkpoint),
                                  "model_form": "loader"}})
    assert "model_error" not in str(sink.client.get_run(sink.parent_run_id).data.tags)
    mlflow.set_tracking_uri(uri)
    local = Path(mlflow.artifacts.download_artifacts("models:/tiny/1", dst_path=str(project
                                                                                   / "dl")))
    assert _tree(local / "code") == [f"userproj/{f}" for f in PACKAGE_FILES]
    script = (f"import mlflow.pytorch, torch; mlflow.set_tracking_uri({uri!r}); "
              "m = mlflow.pytorch.load_model('models:/tiny/1'); "
              "print(type(m).__module__, tuple(m(torch.zeros(1, 3)).shape))")
    out = subprocess.run([sys.executable, "-c", script], cwd=store, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == ["userproj.nets.tiny", "(1,", "2)"]


def test_the_pytorch_flavor_comes_whole_to_every_thread_without_lightning() -> None:
    """Two threads ask at once (the warm-up thread and the sweep's end): each gets the whole
    module, Lightning is not imported, and MLflow's Lightning autologging imports afterwards."""
    script = textwrap.dedent("""
        import sys, threading
        from sweeps.tracking.mlflow_model import pytorch_flavor
        got = []
        thread = threading.Thread(target=lambda: got.append(pytorch_flavor()))
        thread.start()
        while "mlflow.pytorch" not in sys.modules:  # the thread's import has begun
            pass
        # read before the thread's import ends (CPython marks a module being imported so)
        whole = not getattr(pytorch_flavor().__spec__, "_initializing", False)
        thread.join()
        print(whole, hasattr(got[0], "log_model"),
              "pytorch_lightning" in sys.modules)
        try:
            import mlflow.pytorch._lightning_autolog
            print("autolog imports")
        except ImportError as exc:
            print(type(exc).__name__, exc)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "True True False", lines
    if importlib.util.find_spec("pytorch_lightning") is not None:
        assert lines[1] == "autolog imports", lines
