"""``bench.accuracy_bars`` reads each test's bar and reports every seed against it (its
sweeps are the benchmark's to run, not the suite's: the row's runner is replaced here)."""

from __future__ import annotations

import os

import pytest


def test_a_row_reports_every_seed_against_the_bar_its_test_states(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.accuracy_bars as bars
    from tests.unit.test_hf_vit import ACCURACY_BAR

    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))  # measure() extends it
    _, chance, test = bars.ROWS["hf_vit_local"]
    monkeypatch.setitem(bars.ROWS, "hf_vit_local", (lambda seed, root: 0.7 + seed / 100,
                                                    chance, test))
    assert sorted(bars.ROWS) == ["digits", "digits_data", "hf_text", "hf_vit", "hf_vit_local"]
    row = bars.measure(["hf_vit_local"], [2, 0])["hf_vit_local"]
    assert (row["test"], row["bar"], row["chance"]) == ("tests.unit.test_hf_vit", ACCURACY_BAR,
                                                        0.1)
    assert row["values"] == {2: 0.72, 0: 0.7} and row["lowest"] == 0.7
    assert row["margin_below_lowest"] == pytest.approx(0.7 - ACCURACY_BAR, abs=1e-4)
