"""Where a sweep's runs go: tracking.uri, then MLflow's own variables, then the default."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps import compose
from sweeps.errors import ConfigError
from sweeps.tracking.target import tracking_target

CWD = Path("/w")
RESUMED = "the sweep being resumed"


@pytest.mark.parametrize(("overrides", "env", "resumed", "uri", "uri_from"), [
    ([], {}, None, "sqlite:////w/mlflow.db", "default"),
    ([], {"MLFLOW_TRACKING_URI": "http://team:5000"}, None, "http://team:5000",
     "MLFLOW_TRACKING_URI"),
    (["tracking.uri=http://mine:5000"], {"MLFLOW_TRACKING_URI": "http://team:5000"}, None,
     "http://mine:5000", "tracking.uri"),
    ([], {"MLFLOW_TRACKING_URI": "sqlite:///rel.db"}, None, "sqlite:////w/rel.db",
     "MLFLOW_TRACKING_URI"),
    ([], {"MLFLOW_TRACKING_URI": "  "}, None, "sqlite:////w/mlflow.db", "default"),
    ([], {}, "sqlite:////old/mlflow.db", "sqlite:////old/mlflow.db", RESUMED),
    ([], {"MLFLOW_TRACKING_URI": "http://team:5000"}, "sqlite:////old/mlflow.db",
     "http://team:5000", "MLFLOW_TRACKING_URI"),
    ([], {"MLFLOW_TRACKING_URI": "/abs/mlruns"}, None, "/abs/mlruns", "MLFLOW_TRACKING_URI"),
    ([], {"MLFLOW_TRACKING_URI": "postgresql+psycopg2://u@db/mlflow"}, None,
     "postgresql+psycopg2://u@db/mlflow", "MLFLOW_TRACKING_URI"),
])
def test_uri_precedence(monkeypatch, overrides, env, resumed, uri, uri_from) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    target = tracking_target(compose("digits", overrides), resumed, cwd=CWD)
    assert (target.uri, target.uri_from) == (uri, uri_from)


@pytest.mark.parametrize(("overrides", "env", "resumed", "name", "name_from"), [
    ([], None, None, "digits", "experiment.name"),
    ([], "team-exp", None, "team-exp", "MLFLOW_EXPERIMENT_NAME"),
    (["tracking.experiment_name=mine"], "team-exp", None, "mine", "tracking.experiment_name"),
    ([], None, "old-exp", "old-exp", RESUMED),
    ([], "team-exp", "old-exp", "team-exp", "MLFLOW_EXPERIMENT_NAME"),
])
def test_experiment_precedence(monkeypatch, overrides, env, resumed, name, name_from) -> None:
    if env:
        monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", env)
    target = tracking_target(compose("digits", overrides), resumed_experiment=resumed, cwd=CWD)
    assert (target.experiment, target.experiment_from) == (name, name_from)


@pytest.mark.parametrize(("value", "rule"), [
    ("localhost:5000", "scheme 'localhost'"),
    ("mlflow.example.com", "has no scheme"),
    ("htp://host:5000", "scheme 'htp'"),
    ("http://", "names no host"),
    ("http://host:port", "bad port"),
])
@pytest.mark.parametrize("where", ["env", "config"])
def test_malformed_uri_is_one_line_naming_where_it_came_from(monkeypatch, value, rule,
                                                            where) -> None:
    if where == "env":
        monkeypatch.setenv("MLFLOW_TRACKING_URI", value)
    cfg = compose("digits", [f"tracking.uri={value}"] if where == "config" else [])
    key = "MLFLOW_TRACKING_URI" if where == "env" else "tracking.uri"
    with pytest.raises(ConfigError, match=rf"^{key}: .*{rule}") as info:
        tracking_target(cfg, cwd=CWD)
    assert info.value.key == key
    assert "\n" not in str(info.value)


def test_credentials_are_masked_where_the_target_is_printed(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://me:s3cret@mlflow.team:443")
    target = tracking_target(compose("digits"), cwd=CWD)
    assert target.uri == "https://me:s3cret@mlflow.team:443"  # MLflow gets the real one
    assert "s3cret" not in target.describe() and "me:***@mlflow.team" in target.describe()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "htp://me:s3cret@host")
    with pytest.raises(ConfigError) as info:
        tracking_target(compose("digits"), cwd=CWD)
    assert "s3cret" not in str(info.value)
