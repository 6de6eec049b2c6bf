"""A loop calling what the inline backend does not serve: found in its source before Ray
starts, run as Ray Train runs under trial.executor=auto, refused under inline, and refused at
the call in one line where the scan cannot see it."""

from __future__ import annotations

import pytest

from sweeps import compose
from sweeps.errors import ConfigError
from sweeps.trial.backends import BackendRequest, choose_backend
from sweeps.trial.backends.unserved import unserved_calls

UNSERVED = "tests.conformance.loops.unserved:train_func"


def test_the_loops_module_is_scanned_for_unserved_calls() -> None:
    assert unserved_calls(UNSERVED) == ["ray.train.get_context().get_storage()"]
    assert unserved_calls("tests.conformance.loops.context:train_func") == []
    assert unserved_calls("no_such_module_anywhere:f") == []


@pytest.mark.parametrize(("executor", "resolved", "warned"),
                         [("auto", "train", True), ("train", "train", False)])
def test_auto_runs_such_a_loop_as_ray_train_runs_and_says_why(executor, resolved,
                                                              warned) -> None:
    resolved_as, warnings = choose_backend(executor, _request())
    assert resolved_as == resolved
    assert bool(warnings) == warned
    assert not warned or "get_storage(), which the inline backend does not serve" in warnings[0]


def test_inline_is_refused_for_such_a_loop_before_ray_starts() -> None:
    with pytest.raises(ConfigError, match="trial.executor: 'inline' .*get_storage.*"
                                          "set trial.executor=auto or trial.executor=train"):
        choose_backend("inline", _request())


def test_prepare_says_why_auto_picked_train_runs(tmp_path) -> None:
    from sweeps import prepare

    cfg = compose("digits", [f"experiment.trainable={UNSERVED}", "ray.num_cpus=2",
                             "ray.num_gpus=0", f"sweep.dir={tmp_path / 'sweep'}",
                             "tracking.enabled=false"])
    prepared = prepare(cfg)
    assert prepared.resources.executor == "train"
    assert any("get_storage(), which the inline backend does not serve" in w
               for w in prepared.warnings)


def _request() -> BackendRequest:
    return BackendRequest(num_workers=1, use_gpu=False, trainable=UNSERVED)


def test_a_call_the_scan_missed_fails_at_once_naming_the_fix() -> None:
    import ray.train

    from sweeps._ray.train_fn import serving

    with serving(name="t1", report=lambda *a, **k: None, get_checkpoint=lambda: None,
                 reported=list, datasets={}):
        context = ray.train.get_context()
        assert isinstance(context, ray.train.TrainContext)
        with pytest.raises(NotImplementedError, match=r"get_storage\(\) .* is not served by "
                           r"sweeps' inline backend; run the sweep with trial.executor=train"):
            context.get_storage()
