"""Resume decisions: which sweep directory is resumed, which is refused, and why."""

from __future__ import annotations

import json

import pytest

from sweeps import compose
from sweeps.config.overrides import quote_search_space
from sweeps.config.schema import to_config
from sweeps.errors import ConfigError
from sweeps.resume.state import (
    StateError,
    check_tune_state,
    decide_resume,
    load_record,
    new_record,
    save_record,
)
from sweeps.search.space import parse_space


def _cfg(tmp_path, *overrides):
    args = quote_search_space([f"sweep.dir={tmp_path / 'sw'}", *overrides])
    return to_config(compose("digits", args))


def _existing(tmp_path, *overrides):
    cfg = _cfg(tmp_path, *overrides)
    params, _ = parse_space(cfg.experiment.search_space)
    record = new_record(cfg, params, "sqlite:///a.db")
    save_record(tmp_path / "sw", record)
    (tmp_path / "sw" / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": [], "runner_data": {}}))
    return record


def _decide(tmp_path, *overrides, uri="sqlite:///a.db"):
    cfg = _cfg(tmp_path, *overrides)
    params, _ = parse_space(cfg.experiment.search_space)
    return decide_resume(cfg, params, tmp_path / "sw", uri)


def test_no_sweep_starts_anew_unless_must(tmp_path) -> None:
    assert _decide(tmp_path) is None
    assert _decide(tmp_path, "sweep.resume=never") is None
    with pytest.raises(ConfigError, match="sweep.resume: 'must' but there is no sweep to resume"):
        _decide(tmp_path, "sweep.resume=must")


def test_existing_sweep_resumes_with_the_same_record(tmp_path) -> None:
    record = _existing(tmp_path)
    found = _decide(tmp_path, "sweep.resume=must", "scaling.num_workers=1",
                    "trial.max_retries=3")  # how trials run may change; what they are may not
    assert found is not None and found.has_tune_state
    assert found.record.sweep_uid == record.sweep_uid
    assert _decide(tmp_path).record.sweep_uid == record.sweep_uid
    with pytest.raises(ConfigError, match="sweep.resume: 'never' but .* already holds sweep"):
        _decide(tmp_path, "sweep.resume=never")


@pytest.mark.parametrize(("override", "key"), [
    ("experiment.search_space.lr=tag(log, interval(1e-3, 0.9))", "experiment.search_space.lr"),
    ("experiment.metric=val_loss", "experiment.metric"),
    ("experiment.trainable=trainables.digits:train_cnn", "experiment.trainable"),
    ("search.num_samples=9", "search.num_samples"),
    ("scheduler.max_t=5", "scheduler.max_t"),
    ("sweep.seed=1", "sweep.seed"),
])
def test_changed_identity_is_refused_naming_the_key(tmp_path, override, key) -> None:
    _existing(tmp_path)
    with pytest.raises(ConfigError) as info:
        _decide(tmp_path, override)
    assert info.value.key == key
    assert "differs from the sweep being resumed" in str(info.value)
    assert "sweep.name=NEW" in str(info.value)


def test_search_space_is_compared_parsed_not_as_text(tmp_path) -> None:
    _existing(tmp_path)
    lr = _cfg(tmp_path).experiment.search_space["lr"]
    assert _decide(tmp_path, f"experiment.search_space.lr={lr.replace(' ', '')}") is not None


def test_other_tracking_server_is_refused(tmp_path) -> None:
    _existing(tmp_path)
    with pytest.raises(ConfigError, match="tracking.uri: 'http://other:5000' differs"):
        _decide(tmp_path, uri="http://other:5000")


def test_unusable_directories_get_a_clear_error(tmp_path) -> None:
    sweep = tmp_path / "sw"
    sweep.mkdir()
    (sweep / "experiment_state-x.json").write_text("{}")
    with pytest.raises(StateError, match="older sweeps version"):
        load_record(sweep)
    _existing(tmp_path)
    record = json.loads((sweep / "state" / "sweep.json").read_text())
    (sweep / "state" / "sweep.json").write_text(json.dumps({**record, "format_version": 99}))
    with pytest.raises(StateError, match="state format 99, this sweeps reads format 1"):
        load_record(sweep)
    (sweep / "state" / "sweep.json").write_text('{"format_vers')
    with pytest.raises(StateError, match="unreadable"):
        load_record(sweep)


def test_torn_tune_state_is_refused_and_left_alone(tmp_path) -> None:
    _existing(tmp_path)
    newest = tmp_path / "sw" / "experiment_state-2026-02-01_00-00-00.json"
    newest.write_text('{"trial_data": [["{\\"trial_id')
    with pytest.raises(StateError, match="is corrupted .* nothing was changed"):
        check_tune_state(tmp_path / "sw")
    assert newest.read_text().startswith('{"trial_data"')
