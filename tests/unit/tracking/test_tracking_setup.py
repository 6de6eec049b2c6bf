"""Tracking targets are checked before Ray starts."""

from __future__ import annotations

import pytest

from sweeps import compose
from sweeps.tracking.target import tracking_target


def test_default_uri_is_an_absolute_sqlite_file_in_the_current_directory(tmp_path,
                                                                          monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert tracking_target(compose("digits")).uri == f"sqlite:///{tmp_path / 'mlflow.db'}"
    relative = compose("digits", ["tracking.uri=sqlite:///sub/m.db"])
    assert tracking_target(relative).uri == f"sqlite:///{tmp_path / 'sub' / 'm.db'}"


@pytest.mark.parametrize("where", ["config", "env"])
def test_unreachable_server_fails_before_ray_starts_unless_not_required(
        tmp_path, monkeypatch, where) -> None:
    import socket

    import ray

    from sweeps import ConfigError, prepare

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    uri = f"http://127.0.0.1:{port}"
    base = ["ray.num_cpus=2", f"sweep.dir={tmp_path / 's'}"]
    if where == "env":
        monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    else:
        base.append(f"tracking.uri={uri}")
    key = "MLFLOW_TRACKING_URI" if where == "env" else "tracking.uri"
    with pytest.raises(ConfigError, match=rf"^{key}: .* does not answer .*fix {key}.*"
                                          r"tracking.required=false"):
        prepare(compose("digits", base))
    assert not ray.is_initialized()
    prepared = prepare(compose("digits", [*base, "tracking.required=false"]))
    assert (prepared.tracking_uri, prepared.tracking.uri_from) == (uri, key)


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
