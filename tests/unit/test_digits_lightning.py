"""``trainables.digits_lightning`` without Ray: its split, its checkpoint and the model logged to
MLflow from it, and the one line a sweep stops with when Lightning is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sweeps import ConfigError
from sweeps.config.usercode import import_trainable
from tests.conftest import ROOT

LOOP = "trainables.digits_lightning:train_func"


def test_the_split_is_the_digits_experiments_split() -> None:
    from trainables.digits import load_split as digits_split
    from trainables.digits_lightning import load_split

    for ours, theirs in zip(load_split(), digits_split(), strict=True):
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One epoch of a plain Lightning Trainer (no Ray), saved as RayTrainReportCallback
    saves it: ``<dir>/checkpoint.ckpt``."""
    import lightning.pytorch as pl

    from trainables.digits_lightning import DigitsClassifier, dataloaders

    torch.manual_seed(0)
    directory = tmp_path_factory.mktemp("ckpt")
    trainer = pl.Trainer(max_epochs=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         accelerator="cpu", devices=1)
    trainer.fit(DigitsClassifier(hidden=32, depth=1, lr=0.1), *dataloaders(64))
    trainer.save_checkpoint(directory / "checkpoint.ckpt")
    return directory


def _accuracy(model: torch.nn.Module) -> float:
    from trainables.digits_lightning import load_split

    _, _, x_val, y_val = load_split()
    with torch.no_grad():
        predicted = model(torch.from_numpy(x_val)).argmax(dim=1).numpy()
    return float((predicted == y_val).mean())


def test_load_model_rebuilds_the_trained_model_in_eval_mode(checkpoint_dir: Path) -> None:
    from trainables.digits_lightning import load_model

    model = load_model(str(checkpoint_dir))
    assert not model.training and model.hparams.hidden == 32
    assert _accuracy(model) > 0.5  # one epoch; chance is 0.1


def test_the_best_model_logged_to_mlflow_loads_in_one_call_without_ray(
        checkpoint_dir: Path, tmp_path: Path) -> None:
    """What the sweep's end does with ``experiment.model_loader`` (``MLflowSink``, a real
    SQLite store); then a fresh interpreter, run outside this checkout, loads
    ``models:/digits_lightning/1`` with ``mlflow.pytorch.load_model`` and scores the same, and
    the model's requirements name lightning."""
    import mlflow

    from sweeps.tracking.mlflow_sink import MLflowSink
    from trainables.digits_lightning import load_model, load_split

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink = MLflowSink(uri, "digits_lightning", tmp_path, model_name="digits_lightning",
                      model_loader="trainables.digits_lightning:load_model")
    sink.apply({"op": "sweep_start", "sweep_name": "sw", "sweep_uid": "u1", "params": {},
                "config_yaml": "", "search_space": {}, "tags": {}, "ts": 1})
    sink.apply({"op": "trial_start", "trial": "t1", "params": {}, "ts": 2})
    sink.apply({"op": "sweep_end", "summary_csv": None, "status": "FINISHED", "tags": {},
                "ts": 4, "best": {"trial_id": "t1", "metric": "val_acc", "value": 0.9,
                                  "epoch": 0, "checkpoint": str(checkpoint_dir),
                                  "model_form": "loader"}})
    assert "model_error" not in str(sink.client.get_run(sink.parent_run_id).data.tags)
    mlflow.set_tracking_uri(uri)
    local = Path(mlflow.artifacts.download_artifacts("models:/digits_lightning/1",
                                                     dst_path=str(tmp_path / "dl")))
    requirements = (local / "requirements.txt").read_text().split()
    assert f"lightning=={_version('lightning')}" in requirements, requirements
    script = ("import sys, mlflow.pytorch, torch; "
              f"mlflow.set_tracking_uri({uri!r}); "
              "m = mlflow.pytorch.load_model('models:/digits_lightning/1').eval(); "
              "from trainables.digits_lightning import load_split; "
              "x = torch.from_numpy(load_split()[2]); "
              "print(type(m).__name__, 'ray' in sys.modules, "
              "*m(x).argmax(1).tolist())")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr[-2000:]
    name, ray_imported, *predicted = out.stdout.split()
    assert (name, ray_imported) == ("DigitsClassifier", "False")
    x_val = torch.from_numpy(load_split()[2])
    with torch.no_grad():
        expected = load_model(str(checkpoint_dir))(x_val).argmax(1).tolist()
    assert [int(p) for p in predicted] == expected


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name).split("+", 1)[0]


@pytest.mark.parametrize("ray_first", [False, True], ids=["built-in loop", "ray first"])
def test_without_lightning_the_loop_names_the_extra(ray_first: bool,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    """The built-in loop (``import lightning.pytorch``), and a user's loop that imports Ray's
    Lightning utilities first: they try ``lightning``, then ``pytorch_lightning``, then raise
    their own ``ModuleNotFoundError`` with no module name."""
    for name in ("lightning", "pytorch_lightning"):
        monkeypatch.setitem(sys.modules, name, None)  # as if neither were installed
    for name in [m for m in sys.modules
                 if m.startswith(("trainables.digits_lightning", "ray.train.lightning"))]:
        monkeypatch.delitem(sys.modules, name)
    ref = LOOP
    if ray_first:
        (tmp_path / "user_loop.py").write_text(
            "from ray.train.lightning import RayDDPStrategy\n\ndef train(config): pass\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        ref = "user_loop:train"
    with pytest.raises(ConfigError) as err:
        import_trainable(ref)
    assert str(err.value) == (
        f"experiment.trainable: {ref!r} needs lightning, which is not installed; install "
        "sweeps[lightning]: pip install 'sweeps[lightning]' (`make install` in a checkout)")


def test_the_cli_stops_before_ray_with_one_line(tmp_path: Path) -> None:
    """``python -m sweeps +experiment=digits_lightning`` where importing lightning fails as
    it does when it is not installed: exit 2, one line, nothing written, Ray never started."""
    script = ("import sys; sys.modules['lightning'] = sys.modules['pytorch_lightning'] = None; "
              "sys.argv = ['sweeps', '+experiment=digits_lightning', 'ray.num_cpus=2']; "
              "from sweeps.__main__ import cli\n"
              "try:\n    cli()\nfinally:\n"
              "    import ray; print('ray started:', ray.is_initialized())")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "RAY_ADDRESS": ""})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "sweeps: error: experiment.trainable: 'trainables.digits_lightning:train_func' needs "
        "lightning, which is not installed; install sweeps[lightning]: pip install "
        "'sweeps[lightning]' (`make install` in a checkout)")
    assert proc.stdout.strip() == "ray started: False"
    assert list(tmp_path.iterdir()) == []
