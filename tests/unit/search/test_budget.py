"""The compute budget's arithmetic: durations, limits, spent amounts, the overshoot bound and a
resumed sweep's count (``sweeps.config.budget``, ``sweeps.search.budget``)."""

from __future__ import annotations

import json
import random

import pytest

from sweeps.config.budget import budget_limits, check_budget, parse_duration
from sweeps.config.schema import BudgetSection
from sweeps.errors import ConfigError
from sweeps.protocol import CLOCK_KEY, REPORTS_FILE, run_file
from sweeps.search.budget import (
    BUDGET_LOG,
    BudgetLedger,
    donor_epoch_of,
    efficiency_line,
    logged_epochs,
)
from sweeps.search.budget_reopen import budget_reopens
from sweeps.search.decisions import decision_log
from sweeps.search.outcome import Objective, Verdict, read_verdicts
from sweeps.storage.journal import Journal


@pytest.mark.parametrize(("text", "seconds"), [
    ("2h", 7200.0), ("90m", 5400.0), ("45s", 45.0), ("1h30m", 5400.0), ("1d", 86400.0),
    ("1.5h", 5400.0), ("2h0m5s", 7205.0), (" 2H ", 7200.0), ("600", 600.0), ("90.5", 90.5),
    (600, 600.0), (0.5, 0.5),
])
def test_durations_parse(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["2 hours", "h", "", "1m2h", "2hh", "soon", "1h-5m", "5ms"])
def test_unparseable_durations_name_the_key_and_the_fix(text) -> None:
    with pytest.raises(ConfigError) as info:
        parse_duration(text)
    assert str(info.value).startswith("sweep.budget.wall: ") and "90m" in str(info.value)


@pytest.mark.parametrize(("section", "key"), [
    (BudgetSection(epochs=0), "sweep.budget.epochs"),
    (BudgetSection(epochs=-3), "sweep.budget.epochs"),
    (BudgetSection(worker_hours=0.0), "sweep.budget.worker_hours"),
    (BudgetSection(worker_hours=-0.5), "sweep.budget.worker_hours"),
    (BudgetSection(worker_hours=float("inf")), "sweep.budget.worker_hours"),
    (BudgetSection(wall="0s"), "sweep.budget.wall"),
    (BudgetSection(wall="-10"), "sweep.budget.wall"),
    (BudgetSection(wall="tomorrow"), "sweep.budget.wall"),
    (BudgetSection(epochs=10, wall="0"), "sweep.budget.wall"),
])
def test_bad_budgets_are_refused(section, key) -> None:
    with pytest.raises(ConfigError) as info:
        check_budget(section)
    assert str(info.value).startswith(f"{key}: ") and f"set {key}=" in str(info.value)


@pytest.mark.parametrize(("section", "limits"), [
    (BudgetSection(), {}),
    (BudgetSection(epochs=30), {"epochs": 30.0}),
    (BudgetSection(worker_hours=0.5, wall="90m"), {"worker_hours": 0.5, "wall": 5400.0}),
    (BudgetSection(epochs=1, worker_hours=2, wall="45"), {"epochs": 1.0, "worker_hours": 2.0,
                                                           "wall": 45.0}),
])
def test_limits_of_the_budgets_set(section, limits) -> None:
    check_budget(section)
    assert budget_limits(section) == limits


class Clock:
    """A settable time.time."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


# (results as (trial, clock, seconds), workers, expected epochs, expected worker-hours)
SPENT = [
    ([], 2, 0, 0.0),
    ([("a", 1, 10), ("a", 2, 5), ("b", 1, 20)], 2, 3, (35 * 2) / 3600),
    # a trial restarted from its epoch-1 checkpoint trains epoch 2 again: counted once
    ([("a", 1, 3), ("a", 2, 3), ("a", 1, 3), ("a", 2, 3), ("a", 3, 3)], 1, 3, 15 / 3600),
    # a loop whose report carries no clock (a mid-epoch loss) adds time, not epochs
    ([("a", None, 4), ("a", 1, 2)], 3, 1, 18 / 3600),
    ([("a", 1.5, 1), ("a", 2.5, 1)], 1, 2.5, 2 / 3600),  # a float clock (Transformers)
]


@pytest.mark.parametrize(("results", "workers", "epochs", "hours"), SPENT)
def test_spent_epochs_and_worker_hours(results, workers, epochs, hours) -> None:
    ledger = BudgetLedger(None, {}, workers=workers, start=1)
    for trial, clock, seconds in results:
        ledger.observe(trial, clock, seconds)
    spent = ledger.spent()
    assert spent["epochs"] == epochs
    assert spent["worker_hours"] == pytest.approx(hours)


# (limits, results before, the trial asking (None: a new one), the budget it would exceed)
NEXT = [
    ({"epochs": 5}, [("a", 4, 1)], "a", None),  # 4 + 1 fits in 5
    ({"epochs": 5}, [("a", 5, 1)], "a", "epochs"),
    ({"epochs": 5}, [("a", 3, 1), ("b", 1, 1)], None, None),
    ({"epochs": 5}, [("a", 3, 1), ("b", 2, 1)], None, "epochs"),
    # worker-hours: the next epoch costs what this trial's last one did (2 workers x 900 s)
    ({"worker_hours": 1.0}, [("a", 1, 900)], "a", None),  # 0.5 + 0.5
    ({"worker_hours": 1.0}, [("a", 1, 900), ("a", 2, 100)], "a", None),  # 0.556 + 0.056
    ({"worker_hours": 1.0}, [("a", 1, 900), ("b", 1, 100)], "a", "worker_hours"),
    ({"worker_hours": 1.0}, [("a", 1, 900), ("b", 1, 100)], "b", None),
    # a trial's first report also paid its start-up: a new trial is estimated by first
    # reports (2 x 100 s), a running one by its own later epochs (2 x 10 s)
    ({"worker_hours": 0.1}, [("a", 1, 100), ("a", 2, 10)], "a", None),
    ({"worker_hours": 0.1}, [("a", 1, 100), ("a", 2, 10)], None, "worker_hours"),
    ({"worker_hours": 0.15}, [("a", 1, 100), ("a", 2, 10), ("b", 1, 100)], "b", None),
    # wall: spent so far (the fake clock does not move: 0) plus the trial's last epoch
    ({"wall": 50}, [("a", 1, 60)], "a", "wall"),
    ({"wall": 50}, [("a", 1, 60)], None, "wall"),  # a new trial: the mean epoch so far
    ({"wall": 100}, [("a", 1, 40)], "a", None),
    ({"epochs": 9, "wall": 100}, [("a", 9, 1)], "a", "epochs"),
]


@pytest.mark.parametrize(("limits", "results", "asking", "over"), NEXT)
def test_the_next_epoch_fits_or_names_the_budget(limits, results, asking, over) -> None:
    ledger = BudgetLedger(None, limits, workers=2, start=1, now=Clock())
    for trial, clock, seconds in results:
        ledger.observe(trial, clock, seconds)
    assert ledger.over(asking) == over
    assert ledger.exhausted_by == over


@pytest.mark.parametrize(("budget", "running", "seed"), [
    (5, 1, 0), (5, 3, 1), (12, 4, 2), (30, 2, 3), (7, 7, 4), (1, 3, 5), (50, 5, 6),
])
def test_overshoot_is_at_most_one_epoch_per_trial_running_at_once(budget, running,
                                                                   seed) -> None:
    """Trials of 9 epochs, ``running`` at once, report in a random order; each goes on only
    while ``over`` allows, and a new one starts only while a first epoch fits. The sweep
    spends the budget and overshoots by less than one epoch per running trial."""
    rng = random.Random(seed)
    ledger = BudgetLedger(None, {"epochs": budget}, workers=1, start=1)
    clocks: dict[str, int] = {}
    started = 0

    def start() -> None:
        nonlocal started
        if ledger.over(None) is None and started < 100:
            clocks[f"t{started}"] = 0
            started += 1

    for _ in range(running):
        start()
    while clocks:
        trial = rng.choice(sorted(clocks))
        clocks[trial] += 1
        ledger.observe(trial, clocks[trial], 1.0)
        if clocks[trial] >= 9 or ledger.over(trial):
            del clocks[trial]
            start()
    spent = ledger.spent()["epochs"]
    assert budget <= spent <= budget + running - 1


def test_wall_and_worker_hours_continue_across_starts(tmp_path) -> None:
    """Each start logs its own wall and worker-seconds; the next start adds up the others'
    last lines (a killed start counts up to its last tick) and not its own."""
    clock = Clock(1000.0)
    first = BudgetLedger.load(tmp_path, {"wall": 3600}, workers=2, start=1, now=clock)
    first.tick(force=True)
    clock.t += 30
    first.observe("a", 1, 30)  # a tick (10 s since the last): wall 30, ws 60
    clock.t += 5
    first.observe("a", 2, 5)  # no tick (5 s): lost if the driver is killed now
    second = BudgetLedger.load(tmp_path, {"wall": 3600}, workers=2, start=2, now=clock)
    assert (second.wall_before, second.ws_before) == (30.0, 60.0)
    second.tick(force=True)
    clock.t += 20
    second.observe("b", 1, 20)
    second.tick(force=True)
    third = BudgetLedger.load(tmp_path, {"wall": 3600}, workers=2, start=3, now=clock)
    assert third.wall_before == 50.0 and third.ws_before == 100.0
    assert third.spent()["wall"] == 50.0  # its own start is 0 s old
    assert third.spent()["worker_hours"] == pytest.approx(100 / 3600)
    records = Journal(tmp_path / "state", BUDGET_LOG).records()
    assert {r["start"] for r in records} == {1, 2}


def test_a_resumed_sweep_continues_the_epoch_count_from_its_logs(tmp_path) -> None:
    """Epochs come from the decision log and the report logs, whichever is further (the
    report log is written before Tune sees a report, so after kill -9 it can be ahead)."""
    log = decision_log(tmp_path)
    log.append({"trial": "a", "epoch": 3, "value": 0.5, "action": "CONTINUE"})
    log.append({"trial": "a", "epoch": 3, "end": True})
    log.append({"trial": "b", "epoch": 1, "value": 0.2, "action": "CONTINUE"})
    log.append({"trial": "c", "epoch": 0, "action": "STOP", "budget": "epochs"})
    run_dir = tmp_path / "train" / "b"
    run_dir.mkdir(parents=True)
    lines = [json.dumps({CLOCK_KEY: e, "n": e}) for e in (1, 2)] + ['{"sweeps_epo']  # torn
    run_file(run_dir, REPORTS_FILE).write_text("\n".join(lines))
    assert logged_epochs(tmp_path) == {"a": 3.0, "b": 2.0, "c": 0.0}
    ledger = BudgetLedger.load(tmp_path, {"epochs": 6}, workers=1, start=2)
    assert ledger.spent()["epochs"] == 5.0 and ledger.over("b") is None
    ledger.observe("b", 2, 1.0)  # re-reported after the restore: not counted again
    ledger.observe("b", 3, 1.0)
    assert ledger.spent()["epochs"] == 6.0 and ledger.over("b") == "epochs"


def test_a_pbt_exploit_counts_the_epochs_it_trains_again(tmp_path) -> None:
    """A trial at epoch 4 continues from its donor's epoch 2: epochs 3 and 4 are trained
    again, so it has spent 6 by its second epoch 4; a resume reads the same from the logs and
    does not count a re-reported epoch twice."""
    ledger = BudgetLedger.load(tmp_path, {"epochs": 20}, workers=1, start=1)
    log = decision_log(tmp_path)
    run_dir = tmp_path / "train" / "a"
    run_dir.mkdir(parents=True)
    reports = run_file(run_dir, REPORTS_FILE)
    for epoch in (1, 2, 3, 4):
        ledger.observe("a", epoch, 1.0)
        log.append({"trial": "a", "epoch": epoch, "value": 0.5, "action": "CONTINUE"})
        reports.open("a").write(json.dumps({CLOCK_KEY: epoch}) + "\n")
    record = {"trial": "a", "epoch": 4, "value": 0.5, "action": "PAUSE", "perturb": True,
              "exploit": {"donor": "b", "donor_epoch": 2}}
    log.append(record)
    ledger.epochs.exploit("a", donor_epoch_of(record))
    for epoch in (3, 4):
        ledger.observe("a", epoch, 1.0)
        reports.open("a").write(json.dumps({CLOCK_KEY: epoch}) + "\n")
    log.append({"trial": "a", "epoch": 3, "value": 0.5, "action": "CONTINUE"})  # 4: unseen
    assert ledger.spent()["epochs"] == 6.0
    assert logged_epochs(tmp_path) == {"a": 6.0}
    resumed = BudgetLedger.load(tmp_path, {"epochs": 20}, 1, 2)
    resumed.observe("a", 4, 1.0)  # re-reported after the restore
    assert resumed.spent()["epochs"] == 6.0
    resumed.observe("a", 5, 1.0)
    assert resumed.spent()["epochs"] == 7.0


def test_an_exploited_trial_not_restarted_yet_counts_its_old_run_once(tmp_path) -> None:
    """A trial exploited at epoch 4 (from its donor's epoch 2) whose run directory still holds
    its old run counts 4 epochs, not 4 + the old run's reports read as the new run's; once its
    run directory is reseeded (a new report log), what the new run reports counts."""
    log = decision_log(tmp_path)
    run_dir = tmp_path / "train" / "a"
    run_dir.mkdir(parents=True)
    reports = run_file(run_dir, REPORTS_FILE)
    for epoch in (1, 2, 3, 4):
        log.append({"trial": "a", "epoch": epoch, "value": 0.5, "action": "CONTINUE"})
        reports.open("a").write(json.dumps({CLOCK_KEY: epoch}) + "\n")
    log.append({"trial": "a", "epoch": 4, "value": 0.5, "action": "PAUSE",
                "exploit": {"donor": "b", "donor_epoch": 2, "generation": 1}})
    assert logged_epochs(tmp_path) == {"a": 4.0}
    (run_dir / "pbt.json").write_text(json.dumps({"generation": 1}))  # reseeded, restarted
    reports.write_text(json.dumps({CLOCK_KEY: 3}) + "\n")
    assert logged_epochs(tmp_path) == {"a": 5.0}


def test_a_raised_budget_reopens_the_trials_the_budget_ended(tmp_path) -> None:
    """Only more room than the budget that ended them brings them back (a larger budget, or
    none); the same budget again does not."""
    log = decision_log(tmp_path)
    log.append({"trial": "a", "epoch": 3, "value": 0.5, "action": "CONTINUE"})
    log.append({"trial": "a", "epoch": 3, "action": "STOP", "budget": "epochs", "limit": 4})
    log.append({"trial": "b", "epoch": 0, "action": "STOP", "budget": "epochs", "limit": 4})
    log.append({"trial": "c", "epoch": 1, "value": 0.1, "action": "STOP"})  # ASHA's stop
    assert budget_reopens(tmp_path, {"epochs": 4}, workers=1, start=2) == []  # the same
    assert budget_reopens(tmp_path, {"epochs": 5}, workers=1, start=2) == ["a", "b"]
    assert budget_reopens(tmp_path, {}, workers=1, start=2) == ["a", "b"]  # unset
    log.append({"trial": "a", "reopen": True})
    assert budget_reopens(tmp_path, {"epochs": 5}, workers=1, start=2) == ["b"]


@pytest.mark.parametrize(("record", "donor"), [
    ({"trial": "a", "epoch": 4, "exploit": {"donor_epoch": 2}}, 2.0),
    ({"trial": "a", "epoch": 4, "action": "STOP"}, None),
    ({"trial": "a", "epoch": 4, "exploit": {"donor_epoch": None}}, None),
    ({"trial": "a", "epoch": 4, "exploit": "?"}, None),
])
def test_donor_epoch_of_a_record(record, donor) -> None:
    assert donor_epoch_of(record) == donor


@pytest.mark.parametrize(("records", "expected"), [
    ([{"trial": "a", "epoch": 2, "action": "STOP", "budget": "epochs"}],
     {"a": Verdict(2, budget="epochs")}),
    ([{"trial": "a", "epoch": 1, "action": "STOP"}], {"a": Verdict(1)}),
    ([{"trial": "a", "epoch": 0, "action": "STOP", "budget": "wall"}],
     {"a": Verdict(0, budget="wall")}),
])
def test_budget_verdicts(records, expected) -> None:
    verdicts = read_verdicts(records)
    assert verdicts == expected
    objective = Objective("acc", "max", 9)
    assert all(objective.outcome(v.stopped_at, v, False) == "stopped"
               for v in verdicts.values())


@pytest.mark.parametrize(("epochs", "max_t", "line"), [
    ([9, 3, 1, 1, 9, 3, 1, 7], 9, "epochs: 34 of 72 (8 trials x 9 to max_t), 0.47x"),
    ([9, 9], 9, "epochs: 18 of 18 (2 trials x 9 to max_t), 1.00x"),
    ([3, 2, 0, 0], 3, "epochs: 5 of 6 (2 trials x 3 to max_t), 0.83x"),  # 2 never started
    ([], 9, "epochs: 0 of 0 (0 trials x 9 to max_t), -"),
    ([2.5], 3, "epochs: 2.5 of 3 (1 trials x 3 to max_t), 0.83x"),
])
def test_efficiency_line(epochs, max_t, line) -> None:
    assert efficiency_line(epochs, max_t) == line


def test_describe_shows_each_budget_set() -> None:
    ledger = BudgetLedger(None, {"epochs": 30, "worker_hours": 0.5, "wall": 600}, workers=2,
                          start=1, now=Clock())
    ledger.observe("a", 4, 90)
    assert ledger.describe() == "budget: epochs 4/30, worker-hours 0.05/0.5, wall 0/600 s"
