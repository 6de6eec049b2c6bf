"""What a sweep has spent of its compute budget, and whether the next epoch may be spent.

    python -m sweeps +experiment=digits sweep.budget.epochs=30
    ledger = BudgetLedger.load(sweep_dir, limits={"epochs": 30}, workers=2, start=3)
    ledger.observe("ab12", clock=4, seconds=1.5)   # every result the scheduler sees
    ledger.over("ab12")                            # "epochs" once its next epoch would exceed

Three amounts, each with a limit under ``sweep.budget`` (``sweeps.config.budget``; what each
counts, the rule ``over`` applies and its overshoot: docs/running.md#a-compute-budget):

* ``epochs``: each trial's furthest epoch (its clock, ``sweeps.trial.clock``); under PBT each
  exploit starts a new run of the trial's clock at the donor's epoch, and the epochs it trains
  again from there count too (``EpochCount``). Derived from the decision log and each trial's
  ``reports.jsonl`` (written before Tune sees a report).
* ``worker_hours`` (from Tune's ``time_this_iter_s``) and ``wall``: no other log holds them, so
  they have their own, ``state/budget.jsonl``: one line per ``TICK_S`` seconds at most (and at
  each trial's end) per start, ``{"start", "wall", "ws"}`` (seconds and worker-seconds of this
  start), fsync'ed.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sweeps import files
from sweeps.layout import SweepLayout
from sweeps.protocol import CLOCK_KEY, REPORTS_FILE, run_file
from sweeps.search.decisions import decision_log
from sweeps.storage.journal import Journal
from sweeps.trial.clock import finite_float
from sweeps.trial.exploit import applied_generation

__all__ = ["BudgetLedger", "EpochCount", "BUDGET_LOG", "TICK_S", "UNITS", "efficiency_line",
           "logged_epochs", "logged_count", "donor_epoch_of"]

BUDGET_LOG = "budget"  # <sweep dir>/state/budget.jsonl
TICK_S = 10.0
UNITS = {"epochs": "epochs", "worker_hours": "worker-hours", "wall": "s wall"}


def donor_epoch_of(record: dict[str, Any]) -> float | None:
    """The donor's epoch a PBT exploit (a decision-log record) continues its trial from;
    None for any other record.

    Example:
        >>> donor_epoch_of({"trial": "a", "epoch": 4, "exploit": {"donor_epoch": 2}})
        2.0
    """
    exploit = record.get("exploit")
    return finite_float(exploit.get("donor_epoch")) if isinstance(exploit, dict) else None


class EpochCount:
    """Epochs each trial trained: per run of its clock (from 0, or from the donor's epoch after
    a PBT exploit), the furthest epoch it reached past the run's start.

    Example:
        >>> count = EpochCount()
        >>> for e in (1, 2, 3, 4, 2, 3, 4):  # restarted from its epoch-1 checkpoint: once
        ...     count.observe("a", e)
        >>> count.exploit("a", 2); count.observe("a", 3); count.per_trial()  # 4 + (3 - 2)
        {'a': 5.0}
    """

    def __init__(self) -> None:
        self.runs: dict[str, list[float]] = {}  # trial id -> [done, run start, furthest]

    def observe(self, trial_id: str, clock: Any) -> None:
        value = finite_float(clock)
        if value is not None:
            run = self.runs.setdefault(trial_id, [0.0, 0.0, 0.0])
            run[2] = max(run[2], value)

    def exploit(self, trial_id: str, donor_epoch: float) -> None:
        """``trial_id`` goes on from ``donor_epoch`` (it trains the epochs after it again)."""
        run = self.runs.setdefault(trial_id, [0.0, 0.0, 0.0])
        run[:] = [self._of(run), donor_epoch, donor_epoch]

    def furthest(self, trial_id: str) -> float | None:
        """The clock ``trial_id``'s current run has reached (after an exploit not yet run
        on: the donor's epoch); None for a trial never seen."""
        run = self.runs.get(trial_id)
        return None if run is None else run[2]

    @staticmethod
    def _of(run: list[float]) -> float:
        return run[0] + max(run[2] - run[1], 0.0)

    def per_trial(self) -> dict[str, float]:
        return {trial: self._of(run) for trial, run in self.runs.items()}

    def total(self) -> float:
        return sum(self.per_trial().values())


def logged_epochs(sweep_dir: str | Path) -> dict[str, float]:
    """Trial id -> epochs it trained, as the sweep's logs tell (``logged_count``)."""
    return logged_count(sweep_dir).per_trial()


def logged_count(sweep_dir: str | Path) -> EpochCount:
    """Epochs each trial trained, from the sweep's logs: the decision log (clocks judged,
    PBT exploits) and the report logs (written before Tune sees a report, so after kill -9 they
    can be ahead; of a trial PBT exploited, only once its run directory holds the new run,
    which starts a new report log).

    Example:
        >>> logged_count(tmp_path).per_trial()  # a sweep that has not run  # doctest: +SKIP
        {}
    """
    layout, count = SweepLayout(Path(sweep_dir)), EpochCount()
    generations: dict[str, int] = {}  # trial id -> its latest exploit's generation
    for record in decision_log(sweep_dir).records():
        if "trial" not in record:
            continue
        count.observe(record["trial"], record.get("epoch"))  # (an exploit's: its run up to it)
        donor = donor_epoch_of(record)
        if donor is not None:
            count.exploit(record["trial"], donor)
            generations[record["trial"]] = int(record["exploit"].get("generation") or 0)
    if files.is_dir(layout.train):
        for trial in files.listdir(layout.train):
            run_dir = layout.run_dir(trial)
            if applied_generation(Path(run_dir)) < generations.get(trial, 0):
                continue  # the run before its exploit (counted above): not restarted yet
            for line in files.read_lines(run_file(run_dir, REPORTS_FILE)):
                with contextlib.suppress(ValueError, AttributeError):  # a torn last line
                    count.observe(trial, json.loads(line).get(CLOCK_KEY))
    return count


class BudgetLedger:
    """Spent amounts against ``limits`` (``{"epochs"|"worker_hours"|"wall": limit}``, wall in
    seconds) for one start of a sweep; ``workers``: Train workers per trial."""

    def __init__(self, sweep_dir: str | Path | None, limits: dict[str, float], workers: int,
                 start: int, now: Callable[[], float] = time.time) -> None:
        self.limits, self.workers, self.start = dict(limits), workers, start
        self._now = now
        self._t0 = now()
        self.epochs = EpochCount()
        self.ws_before = self.wall_before = 0.0  # earlier starts
        self.ws = 0.0  # this start's worker-seconds
        self.first_ws: dict[str, float] = {}  # trial id -> its first report's (with start-up)
        self.epoch_ws: dict[str, float] = {}  # trial id -> worker-seconds of its last epoch
        self._log = Journal(SweepLayout(Path(sweep_dir)).state, BUDGET_LOG) if sweep_dir else None
        self._ticked = -math.inf
        self.exhausted_by: str | None = None  # the budget that ended the sweep, once one did

    @classmethod
    def load(cls, sweep_dir: str | Path, limits: dict[str, float], workers: int, start: int,
             now: Callable[[], float] = time.time) -> BudgetLedger:
        """A ledger that continues the count of the sweep's earlier starts (its logs)."""
        ledger = cls(sweep_dir, limits, workers, start, now)
        ledger.epochs = logged_count(sweep_dir)
        ledger.ws_before, ledger.wall_before = ledger.earlier_starts()
        return ledger

    def earlier_starts(self) -> tuple[float, float]:
        """(worker-seconds, wall seconds) that the budget log holds for other starts."""
        last: dict[int, dict[str, Any]] = {}
        for record in self._log.records() if self._log else []:
            if isinstance(record.get("start"), int) and record["start"] != self.start:
                last[record["start"]] = record
        return (sum(float(r.get("ws", 0)) for r in last.values()),
                sum(float(r.get("wall", 0)) for r in last.values()))

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with the scheduler into Tune's state; the log is reopened, not copied."""
        return {**self.__dict__, "_log": None, "_now": time.time}

    # What was spent
    def observe(self, trial_id: str, clock: Any, seconds: Any) -> None:
        """One result of ``trial_id``: its clock, and the seconds since its previous report."""
        self.epochs.observe(trial_id, clock)
        if isinstance(seconds, int | float) and math.isfinite(seconds) and seconds >= 0:
            ws = self.workers * float(seconds)
            self.ws += ws
            (self.epoch_ws if trial_id in self.first_ws else self.first_ws)[trial_id] = ws
        self.tick()

    def spent(self) -> dict[str, float]:
        """Every amount, spent so far over all starts (wall in seconds)."""
        return {"epochs": self.epochs.total(), "worker_hours": (self.ws_before + self.ws) / 3600,
                "wall": self.wall_before + (self._now() - self._t0)}

    def tick(self, force: bool = False) -> None:
        """Append this start's wall and worker-seconds to the budget log, at most every
        ``TICK_S`` seconds unless ``force``."""
        now = self._now()
        if self._log is None or (not force and now - self._ticked < TICK_S):
            return
        self._ticked = now
        self._log.append({"start": self.start, "wall": round(now - self._t0, 3),
                          "ws": round(self.ws, 3), "t": round(now, 3)})

    # What may be spent next
    def _costs(self, trial_id: str | None) -> dict[str, float]:
        """What one more epoch costs: of ``trial_id``, its last epoch (its first report also
        paid its start-up, so before a second one: other trials' epochs, else that first);
        of a new trial (None), what first reports cost so far (start-up and one epoch)."""
        def mean(values: dict[str, float]) -> float | None:
            return sum(values.values()) / len(values) if values else None

        if trial_id is None:
            ws = mean(self.first_ws) or mean(self.epoch_ws) or 0.0
        else:
            ws = (self.epoch_ws.get(trial_id) or mean(self.epoch_ws)
                  or self.first_ws.get(trial_id) or 0.0)
        return {"epochs": 1.0, "worker_hours": ws / 3600, "wall": ws / max(self.workers, 1)}

    def over(self, trial_id: str | None = None) -> str | None:
        """The first budget that one more epoch (of ``trial_id``, or of a new trial) would
        exceed, or None when it fits in all.

        Example:
            >>> ledger = BudgetLedger(None, {"epochs": 3}, workers=1, start=1)
            >>> ledger.observe("a", 2, 1.0); ledger.over("a")
            >>> ledger.observe("b", 1, 1.0); ledger.over("a")
            'epochs'
        """
        spent, costs = self.spent(), self._costs(trial_id)
        for name, limit in self.limits.items():
            if spent[name] + costs[name] > limit + 1e-9:
                self.exhausted_by = self.exhausted_by or name
                return name
        return None

    def describe(self) -> str:
        """``budget: epochs 31/30, wall 95/600 s`` (the budgets that are set)."""
        spent = self.spent()
        parts = []
        for name, limit in self.limits.items():
            value = spent[name]
            shown = f"{value:.0f}/{limit:g}" if name != "worker_hours" else f"{value:.3g}/{limit:g}"
            parts.append(f"{UNITS[name].replace('s wall', 'wall')} {shown}"
                         + (" s" if name == "wall" else ""))
        return "budget: " + ", ".join(parts)


def efficiency_line(epochs: list[float], max_t: int) -> str:
    """Epochs spent against the same trials each trained to ``max_t`` (trials that trained
    at least one epoch).

    Example:
        >>> efficiency_line([9, 3, 1, 1, 9, 3, 1, 7], 9)
        'epochs: 34 of 72 (8 trials x 9 to max_t), 0.47x'
    """
    trained = [e for e in epochs if e > 0]
    total, full = sum(trained), len(trained) * max_t
    ratio = f"{total / full:.2f}x" if full else "-"
    return f"epochs: {total:g} of {full} ({len(trained)} trials x {max_t} to max_t), {ratio}"
