"""A trial's whole history from its report log (sweeps.report.history): what Tune's own
history lacks after a later start, however the loop counts its epochs."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeps.protocol import CLOCK_KEY
from sweeps.report.history import full_history
from sweeps.trial import report_log


def _log(run, clocks: list[float]) -> None:
    for n, clock in enumerate(clocks, 1):
        report_log.append(run, {"acc": clock / 10, CLOCK_KEY: clock}, n, f"/c/{clock:g}")


@pytest.mark.parametrize(("logged", "tune_lists", "whole"), [
    ([0.0, 1.0, 2.0], [2.0], [0.0, 1.0, 2.0]),  # a loop whose first report is at clock 0
    ([0.25, 0.5, 0.75, 1.0], [0.75, 1.0], [0.25, 0.5, 0.75, 1.0]),  # fractional epochs
    ([1.0, 2.0, 2.0, 3.0], [3.0], [1.0, 2.0, 3.0]),  # epoch 2 reported again after a restart
    ([1.0, 2.0], [1.0, 2.0], [1.0, 2.0]),  # nothing missing
])
def test_the_reports_before_tunes_first_come_from_the_log(tmp_path, logged, tune_lists,
                                                          whole) -> None:
    _log(tmp_path, logged)
    listed = pd.DataFrame({"acc": [c / 10 for c in tune_lists], CLOCK_KEY: tune_lists,
                           "trial_id": "t1"})
    got = full_history(listed, tmp_path, "t1")
    assert list(got[CLOCK_KEY]) == whole
    assert list(got["checkpoint_path"]) == [f"/c/{c:g}" for c in whole]
    assert set(got["trial_id"]) == {"t1"}


def test_a_replayed_end_gets_the_checkpoint_logged_at_its_epoch(tmp_path) -> None:
    """A trial Tune holds as ended is replayed from the scheduler's record, numbers only: if
    its last epoch was its best, that epoch's checkpoint is the best one."""
    _log(tmp_path, [1.0, 2.0, 3.0])
    replayed = pd.DataFrame({"acc": [0.3], CLOCK_KEY: [3.0], "checkpoint_path": [None]})
    got = full_history(replayed, tmp_path, "t1")
    assert list(got["checkpoint_path"]) == ["/c/1", "/c/2", "/c/3"]


def test_no_log_or_no_clock_leaves_tunes_history_as_it_is(tmp_path) -> None:
    listed = pd.DataFrame({"acc": [0.5], CLOCK_KEY: [4.0]})
    assert full_history(listed, tmp_path / "none", "t1") is listed
    _log(tmp_path, [1.0, 2.0])
    unclocked = pd.DataFrame({"acc": [0.5]})
    assert full_history(unclocked, tmp_path, "t1") is unclocked
    assert list(full_history(None, tmp_path, "t1")[CLOCK_KEY]) == [1.0, 2.0]
