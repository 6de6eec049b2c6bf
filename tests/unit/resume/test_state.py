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
    check_same_tracking,
    check_tune_state,
    decide_resume,
    load_record,
    new_record,
    save_record,
)
from sweeps.search.space import parse_space
from sweeps.tracking.target import TrackingTarget, tracking_target

STORE = TrackingTarget("sqlite:////a/mlflow.db", "default", "digits", "experiment.name")


def _cfg(tmp_path, *overrides):
    args = quote_search_space([f"sweep.dir={tmp_path / 'sw'}", *overrides])
    return to_config(compose("digits", args))


def _existing(tmp_path, *overrides):
    cfg = _cfg(tmp_path, *overrides)
    params, _ = parse_space(cfg.experiment.search_space)
    record = new_record(cfg, params, STORE)
    save_record(tmp_path / "sw", record)
    (tmp_path / "sw" / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": [], "runner_data": {}}))
    return record


def _decide(tmp_path, *overrides):
    """What prepare() decides: resume or not, then where the resumed sweep's runs go."""
    cfg = _cfg(tmp_path, *overrides)
    params, _ = parse_space(cfg.experiment.search_space)
    found = decide_resume(cfg, params, tmp_path / "sw")
    if found is not None:
        record = found.record
        check_same_tracking(record, tracking_target(cfg, record.tracking_uri,
                                                    record.tracking_experiment))
    return found


def test_no_sweep_starts_anew_unless_must(tmp_path) -> None:
    assert _decide(tmp_path) is None
    assert _decide(tmp_path, "sweep.resume=never") is None
    with pytest.raises(ConfigError, match="sweep.resume: 'must' but there is no sweep to resume"):
        _decide(tmp_path, "sweep.resume=must")


def test_existing_sweep_resumes_with_the_same_record(tmp_path) -> None:
    record = _existing(tmp_path)
    found = _decide(tmp_path, "sweep.resume=must", "scaling.num_workers=1",
                    "trial.max_retries=3")  # how trials run may change; what they are may not
    assert _decide(tmp_path, "sweep.budget.epochs=40", "sweep.budget.wall=2h") is not None
    assert found is not None and found.has_tune_state
    assert found.record.sweep_uid == record.sweep_uid
    assert _decide(tmp_path).record.sweep_uid == record.sweep_uid
    with pytest.raises(ConfigError, match="sweep.resume: 'never' but .* already holds sweep"):
        _decide(tmp_path, "sweep.resume=never")


@pytest.mark.parametrize(("override", "key"), [
    ("experiment.search_space.lr=tag(log, interval(1e-3, 0.9))", "experiment.search_space.lr"),
    ("experiment.metric=val_loss", "experiment.metric"),
    ("experiment.trainable=trainables.digits:train_cnn", "experiment.trainable"),
    ("sweep.seed=1", "sweep.seed"),
    ("search=random", "search.algorithm"),
    ("scheduler.grace_period=2", "scheduler.grace_period"),
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
        _decide(tmp_path, "tracking.uri=http://other:5000")


def test_resume_from_another_directory_keeps_the_sweeps_store(tmp_path, monkeypatch) -> None:
    """The same command from elsewhere (no tracking.uri, no MLFLOW_TRACKING_URI) continues the
    same runs instead of being refused for a cwd-relative default."""
    _existing(tmp_path)
    monkeypatch.chdir(tmp_path / "sw")
    cfg = _cfg(tmp_path)
    record = load_record(tmp_path / "sw")
    target = tracking_target(cfg, record.tracking_uri, record.tracking_experiment)
    assert (target.uri, target.uri_from) == (STORE.uri, "the sweep being resumed")
    assert (target.experiment, target.experiment_from) == ("digits", "the sweep being resumed")
    assert _decide(tmp_path) is not None


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("MLFLOW_TRACKING_URI", "http://u:pw@other:5000",
     r"MLFLOW_TRACKING_URI: 'http://u:\*\*\*@other:5000' differs .* unset MLFLOW_TRACKING_URI"),
    ("MLFLOW_EXPERIMENT_NAME", "team-exp",
     r"MLFLOW_EXPERIMENT_NAME: 'team-exp' differs .* experiment 'digits'"),
])
def test_mlflow_variable_pointing_elsewhere_is_refused_naming_it(
        tmp_path, monkeypatch, variable, value, message) -> None:
    _existing(tmp_path)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=message) as info:
        _decide(tmp_path)
    assert info.value.key == variable
    assert "pw" not in str(info.value)


def test_the_same_mlflow_variable_from_another_directory_continues(tmp_path,
                                                                   monkeypatch) -> None:
    cfg = _cfg(tmp_path)
    params, _ = parse_space(cfg.experiment.search_space)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team-server:5000")
    save_record(tmp_path / "sw", new_record(cfg, params, tracking_target(cfg)))
    monkeypatch.chdir(tmp_path / "sw")
    assert _decide(tmp_path) is not None


@pytest.mark.parametrize(("recorded", "algorithm", "allow", "refused"), [
    ("4.5.0", "tpe", False, True),
    ("4.5.0", "optuna", False, True),
    ("4.5.0", "tpe", True, False),      # search.allow_optuna_change=true goes on
    ("4.5.0", "random", False, False),  # no Optuna sampler suggested its trials
    ("", "tpe", False, False),          # recorded before sweeps wrote the version
    ("same-major", "tpe", False, False),
])
def test_resume_across_an_optuna_major_version(tmp_path, recorded, algorithm, allow,
                                              refused) -> None:
    import importlib.metadata

    running = importlib.metadata.version("optuna")
    major = int(running.split(".")[0])
    recorded = f"{major}.0.0" if recorded == "same-major" else recorded.replace(
        "4", str(major - 1), 1)
    search = [f"search={algorithm}"] + (["search.sampler._target_=optuna.samplers.TPESampler"]
                                        if algorithm == "optuna" else [])
    _existing(tmp_path, *search)
    path = tmp_path / "sw" / "state" / "sweep.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "optuna_version": recorded}))
    args = [*search, f"search.allow_optuna_change={str(allow).lower()}"]
    if refused:
        with pytest.raises(StateError, match=rf"sampled by optuna {recorded}; this is optuna "
                                             rf"{running}.*this sweeps needs optuna {major} .*"
                                             "allow_optuna_change=true"):
            _decide(tmp_path, *args)
    else:
        found = _decide(tmp_path, *args)
        assert found is not None
        assert found.record.optuna_version == (running if allow else recorded)


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


def test_rotated_credentials_resume_and_none_are_written_to_disk(tmp_path, monkeypatch) -> None:
    cfg = _cfg(tmp_path)
    params, _ = parse_space(cfg.experiment.search_space)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://me:old-secret@mlflow.team:443")
    save_record(tmp_path / "sw", new_record(cfg, params, tracking_target(cfg)))
    on_disk = (tmp_path / "sw" / "state" / "sweep.json").read_text()
    assert "old-secret" not in on_disk and "https://mlflow.team:443" in on_disk
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "https://me:new-secret@mlflow.team:443")
    assert _decide(tmp_path) is not None  # the same store, the password rotated


def test_an_older_record_keeps_the_experiment_its_tracking_state_is_in(tmp_path,
                                                                     monkeypatch) -> None:
    """Records written before sweeps kept the experiment: tracking/meta.json names it."""
    _existing(tmp_path)
    path = tmp_path / "sw" / "state" / "sweep.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "tracking_experiment": None}))
    (tmp_path / "sw" / "tracking").mkdir()
    (tmp_path / "sw" / "tracking" / "meta.json").write_text(json.dumps(
        {"uri": STORE.uri, "experiment_name": "old-exp"}))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team-exp")
    with pytest.raises(ConfigError, match="experiment 'old-exp'"):
        _decide(tmp_path)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME")
    assert _decide(tmp_path).record.tracking_experiment == "old-exp"


def test_a_sweep_that_sampled_nothing_yet_resumes_under_any_optuna(tmp_path) -> None:
    import importlib.metadata

    _existing(tmp_path)
    (tmp_path / "sw" / "experiment_state-2026-01-01_00-00-00.json").unlink()  # no Tune state
    path = tmp_path / "sw" / "state" / "sweep.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "optuna_version": "1.0.0"}))
    found = _decide(tmp_path)
    assert found.record.optuna_version == importlib.metadata.version("optuna")
    assert new_record(_cfg(tmp_path, "search=random"), [], STORE).optuna_version == ""
