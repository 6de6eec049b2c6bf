"""sweeps.report.importance against Optuna itself: the same trials, studied by plain Optuna,
rank the same; too few trials, no searched param, trials that do not count, several
objectives, a nested param's name, and the console, JSON and plot forms."""

from __future__ import annotations

import json
import math

import optuna
import pandas as pd
import pytest

from sweeps.report.importance import (
    MIN_TRIALS,
    Importance,
    importance_lines,
    importance_plot,
    param_importance,
)
from sweeps.search.space import parse_space

SPACE = {"x": "interval(0, 1)", "opt": "choice(sgd, adam)", "model": {"width": "range(8, 64, 8)"}}


def _optuna_study(n: int, directions: list[str]) -> optuna.Study:
    """Plain Optuna, as its docs write a study: random search over the same space."""

    def objective(trial: optuna.Trial) -> float | tuple[float, float]:
        x = trial.suggest_float("x", 0, 1)
        opt = trial.suggest_categorical("opt", ["sgd", "adam"])
        width = trial.suggest_int("model/width", 8, 64, step=8)
        loss = (x - 0.3) ** 2 + (0.01 if opt == "sgd" else 0.0)
        return (loss, width) if len(directions) > 1 else loss

    study = optuna.create_study(directions=directions, sampler=optuna.samplers.RandomSampler(0))
    study.optimize(objective, n_trials=n)
    return study


def _table(study: optuna.Study, metrics: list[str]) -> pd.DataFrame:
    """The study's trials as a sweep's summary table (dotted param names, a status column)."""
    return pd.DataFrame([{"trial_id": f"t{t.number}", "x": t.params["x"], "opt": t.params["opt"],
                          "model.width": t.params["model/width"],
                          **dict(zip(metrics, t.values, strict=True)), "status": "completed"}
                         for t in study.trials])


@pytest.mark.parametrize("objectives", [{"loss": "min"}, {"loss": "min", "width": "max"}])
def test_the_ranking_is_optunas_own_on_the_same_trials(objectives: dict[str, str]) -> None:
    directions = ["minimize" if m == "min" else "maximize" for m in objectives.values()]
    study = _optuna_study(24, directions)
    params, _ = parse_space(SPACE)
    found = param_importance(_table(study, list(objectives)), params, objectives)
    reference = optuna.importance.get_param_importances(study)  # Optuna's default evaluator
    assert found.values == pytest.approx({k.replace("/", "."): v for k, v in reference.items()})
    assert list(found.values) == sorted(found.values, key=lambda p: -found.values[p])
    assert found.trials == 24 and found.note is None
    assert math.isclose(sum(found.values.values()), 1.0)
    if len(objectives) == 1:
        assert list(found.values)[0] == "x"  # the score depends on x above all


def test_too_few_scored_trials_are_not_ranked_and_say_how_many_it_takes() -> None:
    study = _optuna_study(MIN_TRIALS + 3, ["minimize"])
    table = _table(study, ["loss"])
    table.loc[:3, "status"] = ["error", "empty", "not started", "stopped"]
    table.loc[4, "loss"] = math.nan  # every value NaN: no score
    params, _ = parse_space(SPACE)
    found = param_importance(table, params, {"loss": "min"})
    assert (found.values, found.trials) == ({}, MIN_TRIALS - 1)  # "stopped" counts
    assert found.note == (f"not ranked: {MIN_TRIALS - 1} trial(s) scored, PED-ANOVA needs "
                          f"{MIN_TRIALS}")
    assert importance_lines(found) == [f"parameter importance: {found.note}"]
    none = param_importance(table, [], {"loss": "min"})
    assert none.note == "nothing to rank: the search space has no searched parameter"


def test_a_trial_whose_values_left_the_space_is_left_out() -> None:
    study = _optuna_study(MIN_TRIALS + 1, ["minimize"])
    table = _table(study, ["loss"])
    table.loc[0, "x"] = 5.0  # outside interval(0, 1): a grown sweep's narrowed range
    found = param_importance(table, parse_space(SPACE)[0], {"loss": "min"})
    assert found.trials == MIN_TRIALS and set(found.values) == {"x", "opt", "model.width"}


def test_console_json_and_plot(tmp_path) -> None:
    found = Importance({"x": 0.7, "model.width": 0.2, "opt": 0.1}, 20, ["loss"])
    assert importance_lines(found) == [
        "parameter importance for loss (Optuna PED-ANOVA over 20 trials, sums to 1):",
        "  x            0.700  ##############", "  model.width  0.200  ####",
        "  opt          0.100  ##"]
    assert json.loads(json.dumps(found.to_json())) == {
        "evaluator": "PedAnovaImportanceEvaluator", "values": found.values, "trials": 20,
        "objectives": ["loss"], "note": None}
    path = importance_plot(found, tmp_path / "importance.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_failing_ranking_is_a_note_not_a_failed_sweep(monkeypatch) -> None:
    study = _optuna_study(MIN_TRIALS, ["minimize"])

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the evaluator")

    monkeypatch.setattr(optuna.importance, "get_param_importances", broken)
    found = param_importance(_table(study, ["loss"]), parse_space(SPACE)[0], {"loss": "min"})
    assert found.values == {} and found.note == (
        "not ranked: it failed (RuntimeError: a bug in the evaluator)")


def test_no_signal_and_pbt_are_notes_not_even_shares() -> None:
    """Equal scores: Optuna's normalization would print 1/3 each; a PBT sweep's values
    changed under its scores."""
    study = _optuna_study(MIN_TRIALS + 1, ["minimize"])
    table = _table(study, ["loss"]).assign(loss=0.5)
    params = parse_space(SPACE)[0]
    flat = param_importance(table, params, {"loss": "min"})
    assert (flat.values, flat.note) == (
        {}, "not ranked: no parameter sets the best trials apart from the rest")
    pbt = param_importance(_table(study, ["loss"]), params, {"loss": "min"}, pbt=True)
    assert (pbt.values, pbt.note) == ({}, "not ranked: PBT changes a trial's values as it trains")


def test_missing_and_conditional_values_and_ints_stored_as_floats() -> None:
    """A trial without a param (a condition that did not hold: None or NaN in the table) and
    an int column pandas made float (NaN elsewhere in it) still count."""
    study = _optuna_study(MIN_TRIALS + 3, ["minimize"])
    table = _table(study, ["loss"])
    table["model.width"] = table["model.width"].astype(float)
    table.loc[0, "model.width"], table.loc[1, "opt"] = math.nan, None
    found = param_importance(table, parse_space(SPACE)[0], {"loss": "min"})
    assert found.trials == MIN_TRIALS + 3 and set(found.values) == {"x", "opt", "model.width"}
