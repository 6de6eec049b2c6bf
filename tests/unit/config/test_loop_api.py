"""Which API a loop is written against, read from its module before Ray starts
(``sweeps.config.loop_api``): Tune functions one process per trial, and the loops sweeps
cannot run refused in one line, before their module is imported."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from sweeps import compose
from sweeps.config.loop_api import TRAIN, TUNE, loop_api, settle_workers
from sweeps.config.usercode import import_trainable
from sweeps.errors import ConfigError
from sweeps.trial.backends import BackendRequest, choose_backend

TUNE_DOCS = """
from ray import tune

def objective(config):  # Ray Tune's docs
    for step in range(10):
        tune.report({"iterations": step, "mean_loss": config["x"] ** 2})
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a module ``loop_<n>`` on sys.path; return its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source: str) -> str:
        # a name never used before in this process: an id() comes back once its object is
        # gone, and a module of that name found earlier (another test's) would be read
        name = f"loop_{uuid.uuid4().hex}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        return name
    return write


@pytest.mark.parametrize(("source", "api"), [
    (TUNE_DOCS, TUNE),
    ("import ray.tune\ndef f(c):\n    ray.tune.report({'a': 1})\n", TUNE),
    ("from ray.tune import report, Checkpoint\ndef f(c):\n    report({'a': 1})\n", TUNE),
    ("from ray import tune\ndef f(c):\n    ck = tune.get_checkpoint()\n", TUNE),
    ("import ray.train\ndef f(c):\n    ray.train.report({'a': 1})\n", TRAIN),
    ("from ray import train, tune\ndef f(c):\n    tune.get_context()\n    train.report({})\n",
     TRAIN),  # Tune's context alone does not make a Tune function
    ("def f(c):\n    '''unlike tune.report'''\n    # tune.report\n    print(c)\n", TRAIN),
    ("def f(c):\n    return {'mean_loss': c['x']}\n", TUNE),  # Tune's older styles
    ("def f(c):\n    for i in range(3):\n        yield {'a': i}\n", TUNE),
    ("def f(c):\n    def g():\n        return 1\n    g()\n    return None\n", TRAIN),
    ("import ray.train\ndef f(c):\n    ray.train.report({})\n    return c\n", TRAIN),
    ("from ray import tune as rt\ndef f(c):\n    rt.report({'a': 1})\n", TUNE),
    ("import ray.tune as rt\ndef f(c):\n    rt.get_checkpoint()\n", TUNE),
    ("from ray.tune.integration.pytorch_lightning import TuneReportCheckpointCallback\n"
     "def f(c):\n    cb = TuneReportCheckpointCallback()\n", TUNE),
    ("from ray import tune\nS = {'lr': tune.loguniform(1e-4, 1e-1)}\ndef f(c):\n    pass\n",
     TRAIN),  # a search space in the loop's module: no report, still a Train loop
])
def test_the_api_a_module_reports_with_decides(module, source: str, api: str) -> None:
    assert loop_api(f"{module(source)}:f") == api


def test_a_module_that_calls_both_reports_is_refused_naming_both(module) -> None:
    name = module("from ray import tune, train\ndef f(c):\n    tune.report({})\n"
                  "    train.report({})\n")
    with pytest.raises(ConfigError, match=r"uses both Ray Tune's function API \(tune.report\) "
                                          r"and Ray Train's \(train.report\)"):
        loop_api(f"{name}:f")


@pytest.mark.parametrize("top", ["tuner = tune.Tuner(objective)\nresults = tuner.fit()",
                                 "tune.run(objective)", "import ray\nray.init()",
                                 "tune.Tuner(objective).fit()"])
def test_a_module_that_trains_when_imported_is_refused_before_it_is_imported(
        module, top: str) -> None:
    name = module(TUNE_DOCS + top + "\nraise SystemExit('imported')\n")
    with pytest.raises(ConfigError, match=r"runs `.*` when it is imported .*:\d+\), which "
                                          r"would train inside the sweep's driver; put that "
                                          r"code under `if __name__ == \"__main__\":`"):
        compose("digits", [f"experiment.trainable={name}:objective"])
    assert name not in sys.modules


def test_the_same_code_under_a_main_guard_or_a_fit_of_a_model_is_not_refused(module) -> None:
    name = module(TUNE_DOCS + "from sklearn.linear_model import LinearRegression\n"
                  "BASE = LinearRegression().fit([[0], [1]], [0, 1])\n"
                  "if __name__ == '__main__':\n    tune.Tuner(objective).fit()\n")
    assert loop_api(f"{name}:objective") == TUNE


def test_a_tune_trainable_class_is_refused_saying_how_to_write_it(module) -> None:
    name = module("from ray import tune\nclass Job(tune.Trainable):\n"
                  "    def step(self):\n        return {'a': 1}\n")
    with pytest.raises(ConfigError, match=r"is a ray.tune.Trainable class .*; write it as "
                                          r"`def objective\(config\):`"):
        import_trainable(f"{name}:Job")


def test_a_tune_function_runs_as_one_process_unless_told_otherwise_then_refused(
        module) -> None:
    name = module(TUNE_DOCS)
    cfg = compose("digits", [f"experiment.trainable={name}:objective", "scaling.num_workers=null"])
    assert cfg.scaling.num_workers == 1
    with pytest.raises(ConfigError, match=r"scaling.num_workers: 2 asks for DDP workers, but "
                                          r".* is a Ray Tune function"):
        compose("digits", [f"experiment.trainable={name}:objective"])  # digits sets 2
    assert settle_workers(None, "trainables.digits:train_mlp") == 2


def test_the_train_backend_refuses_a_tune_function_and_auto_runs_it_inline(module) -> None:
    name = module(TUNE_DOCS)
    request = BackendRequest(num_workers=1, use_gpu=True, cluster=True,
                             trainable=f"{name}:objective")
    assert choose_backend("auto", request) == ("inline", [])
    with pytest.raises(ConfigError, match=r"trial.executor: 'train' runs Ray Train loops in "
                                          r"Train workers, but .* is a Ray Tune function"):
        choose_backend("train", request)
