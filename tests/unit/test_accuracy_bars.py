"""``bench.accuracy_bars`` runs and reads each test's bar: its one Ray-free row, one seed (the
sweeps rows are the benchmark's, not the suite's)."""

from __future__ import annotations

import os

import pytest


def test_the_local_vit_row_measures_a_seed_against_the_unit_tests_bar(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.accuracy_bars import ROWS, measure
    from tests.unit.test_hf_vit import ACCURACY_BAR

    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # measure() extends it
    assert sorted(ROWS) == ["digits", "digits_data", "hf_text", "hf_vit", "hf_vit_local"]
    row = measure(["hf_vit_local"], [0])["hf_vit_local"]
    assert row["bar"] == ACCURACY_BAR and row["test"] == "tests.unit.test_hf_vit"
    assert row["lowest"] == row["values"][0] > ACCURACY_BAR
    assert row["margin_below_lowest"] == pytest.approx(row["lowest"] - ACCURACY_BAR, abs=1e-4)
