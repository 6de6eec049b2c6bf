"""Ray-free: the hypervolume ``python -m bench.moasha`` reports, and its summary's arithmetic."""

from __future__ import annotations

import pytest

from bench.moasha import format_markdown, hypervolume, normalised, summarize


@pytest.mark.parametrize(("points", "area"), [
    ([], 0.0),
    ([(0.5, 0.5)], 0.25),
    ([(0.0, 0.0)], 1.0),                      # the ideal point dominates the whole square
    ([(1.0, 0.0)], 0.0),                      # on the reference's edge: adds nothing
    ([(0.2, 0.6), (0.6, 0.2)], 0.48),         # 0.8 * 0.4 + 0.4 * 0.4
    ([(0.2, 0.6), (0.6, 0.2), (0.5, 0.5)], 0.49),  # a third point adds its corner
    ([(0.2, 0.6), (0.3, 0.7)], 0.32),         # a dominated point adds nothing
    ([(0.5, 0.5), (0.5, 0.5)], 0.25),         # duplicates count once
])
def test_hypervolume(points, area) -> None:
    assert hypervolume(points) == pytest.approx(area)


@pytest.mark.parametrize(("val_acc", "n_params", "point"), [
    (1.0, 10 ** 2.5, (0.0, 0.0)),
    (0.0, 10 ** 6, (1.0, 1.0)),
    (0.9, 10 ** 4.25, (0.1, 0.5)),
    (0.5, 100, (0.5, 0.0)),                   # below the box: clipped
    (0.5, 10 ** 7, (0.5, 1.0)),               # above it: clipped
])
def test_normalised(val_acc, n_params, point) -> None:
    assert normalised(val_acc, n_params) == pytest.approx(point)


def test_summary_means_and_ratios() -> None:
    runs = [{"contender": s, "scheduler": s, "seed": seed, "hypervolume": hv, "epochs": ep,
             "seconds": 10.0, "front_size": 2, "stopped": st}
            for s, seed, hv, ep, st in [("none", 0, 0.6, 72, 0), ("none", 1, 0.8, 72, 0),
                                        ("asha", 0, 0.7, 30, 8), ("asha", 1, 0.7, 34, 7)]]
    result = summarize(runs, trials=12, epochs=6, workers=1, seeds=[0, 1])
    assert result["rows"]["none"]["hypervolume"] == pytest.approx(0.7)
    assert result["rows"]["asha"]["epochs"] == 32
    assert result["over_none"] == {"asha": {"hypervolume": 1.0, "epochs": 0.444, "seconds": 1.0}}
    assert "| asha | 0.700 | 32.0 |" in format_markdown(result)
