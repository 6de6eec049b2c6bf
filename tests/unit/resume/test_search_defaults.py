"""Resuming keeps the search defaults a sweep started with (``sweeps.search.defaults``): real
record and Tune state files, ``prepare`` as ``python -m sweeps`` runs it, no Ray."""

from __future__ import annotations

import json

import pytest

from sweeps import compose
from sweeps.driver.prepare import prepare
from sweeps.errors import ConfigError
from sweeps.resume.state import identity_of, load_record, new_record, save_record
from sweeps.search.defaults import settle_defaults, startup_trials
from sweeps.search.space import parse_space

LOCAL = ["tracking.enabled=false", "ray.num_cpus=2", "ray.num_gpus=0"]


def _compose(tmp_path, *overrides: str):
    return compose("digits", [f"sweep.dir={tmp_path / 'sw'}", *LOCAL, *overrides])


def _started(tmp_path, *overrides: str) -> dict[str, str]:
    """A sweep's record (from its settled config, as a start writes it) and a Tune state file:
    its identity."""
    cfg = settle_defaults(_compose(tmp_path, *overrides))
    params, _ = parse_space(cfg.experiment.search_space)
    save_record(tmp_path / "sw", new_record(cfg, params, None))
    (tmp_path / "sw" / "experiment_state-2026-01-01_00-00-00.json").write_text(
        json.dumps({"trial_data": [], "runner_data": {}}))
    return load_record(tmp_path / "sw").identity


def test_a_sweep_started_under_the_old_default_resumes_with_its_count(tmp_path) -> None:
    identity = _started(tmp_path, "search.n_startup_trials=4")  # the old conf/search/tpe.yaml
    assert identity["search.n_startup_trials"] == "4"
    prepared = prepare(_compose(tmp_path))
    assert prepared.resuming and prepared.resume.growth is None
    assert prepared.cfg.search.n_startup_trials == 4  # not startup_trials(8) = 3
    assert prepared.cfg.search.params_first is True  # not in the identity: today's default
    params, _ = parse_space(prepared.cfg.experiment.search_space)
    assert identity_of(prepared.cfg, params) == identity


def test_another_count_set_by_the_user_is_refused(tmp_path) -> None:
    _started(tmp_path, "search.n_startup_trials=4")
    with pytest.raises(ConfigError, match=r"^search.n_startup_trials: '5' differs from the sweep "
                                          r"being resumed in .* \(it has 4\)"):
        prepare(_compose(tmp_path, "search.n_startup_trials=5"))
    assert prepare(_compose(tmp_path, "search.n_startup_trials=4")).cfg.search.n_startup_trials == 4


def test_a_grown_sweep_keeps_the_count_it_started_with(tmp_path) -> None:
    identity = _started(tmp_path)  # a new sweep of 8: 3 start-up trials
    assert identity["search.n_startup_trials"] == str(startup_trials(8)) == "3"
    prepared = prepare(_compose(tmp_path, "search.num_samples=16"))
    assert prepared.resume.growth.changes == {"search.num_samples": (8, 16)}
    assert prepared.cfg.search.n_startup_trials == 3 != startup_trials(16)


def test_a_new_sweep_gets_the_default_of_its_size(tmp_path) -> None:
    prepared = prepare(_compose(tmp_path, "search.num_samples=24"))
    assert prepared.resume is None
    assert (prepared.cfg.search.n_startup_trials, prepared.cfg.search.params_first) == (4, True)
