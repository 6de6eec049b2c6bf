"""Tracking targets are checked before Ray starts."""

from __future__ import annotations

import pytest

from sweeps import compose
from sweeps.tracking.setup import tracking_uri


def test_default_uri_is_an_absolute_sqlite_file_in_the_current_directory(tmp_path,
                                                                          monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert tracking_uri(compose("digits")) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    relative = compose("digits", ["tracking.uri=sqlite:///sub/m.db"])
    assert tracking_uri(relative) == f"sqlite:///{tmp_path / 'sub' / 'm.db'}"


def test_unreachable_server_fails_before_ray_starts_unless_not_required(tmp_path) -> None:
    import socket

    import ray

    from sweeps import ConfigError, prepare

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    base = ["ray.num_cpus=2", f"tracking.uri=http://127.0.0.1:{port}",
            f"sweep.dir={tmp_path / 's'}"]
    with pytest.raises(ConfigError, match=r"^tracking.uri: .* does not answer .*"
                                          r"tracking.required=false"):
        prepare(compose("digits", base))
    assert not ray.is_initialized()
    assert prepare(compose("digits", [*base, "tracking.required=false"])).tracking_uri


def test_the_callers_env_uri_survives_a_block_on_another_store(
        monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """MLflow's own _use_tracking_uri unsets an env-var URI on the way out; load_best and the
    sweep's model logging must leave the caller's MLflow as it was."""
    import mlflow
    from mlflow.tracking._tracking_service import utils

    from sweeps.tracking.setup import using_tracking_uri

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://users-own-server:5000")
    monkeypatch.setattr(utils, "_tracking_uri", None)
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with using_tracking_uri(store):
        assert mlflow.get_tracking_uri() == store
    assert mlflow.get_tracking_uri() == "http://users-own-server:5000"
    with using_tracking_uri(None):  # nothing to point at: nothing changes
        assert mlflow.get_tracking_uri() == "http://users-own-server:5000"
