"""``optuna.log``: the sweep's trials as an Optuna journal, read back with Optuna's own
``JournalStorage`` (what ``optuna-dashboard FILE`` opens), live as the driver appends and as
``python -m sweeps optuna-log`` writes it from a sweep's files."""

from __future__ import annotations

import pickle
import uuid

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState

from sweeps.lease import claim_store, hold
from sweeps.protocol import CLOCK_KEY, STEP_KEY
from sweeps.search.outcome import Objective
from sweeps.search.space import parse_space
from sweeps.storage import stand_in
from sweeps.tracking.optuna_log import TRIAL_ATTR, OptunaLog, export, main
from tests.unit.report.test_status import _me, _sweep, _trials
from tests.unit.report.test_tables import _with_params

SPACE = {"lr": "tag(log, interval(1e-4, 1e-1))", "width": "choice(32, 64)"}


class Trial:
    """What a Tune callback reads from a trial."""

    def __init__(self, trial_id: str, config: dict) -> None:
        self.trial_id, self.config, self.last_result = trial_id, config, {}


def _study(path) -> optuna.Study:
    return optuna.load_study(study_name=None, storage=JournalStorage(JournalFileBackend(str(path))))


def _by_id(study: optuna.Study) -> dict[str, optuna.trial.FrozenTrial]:
    return {t.user_attrs[TRIAL_ATTR]: t for t in study.trials}


def _result(trial: Trial, epoch: int, **metrics) -> dict:
    trial.last_result = {**metrics, CLOCK_KEY: float(epoch), STEP_KEY: epoch}
    return trial.last_result


def _journal(tmp_path, objectives=None) -> OptunaLog:
    return OptunaLog(str(tmp_path / "optuna.log"), "toy", objectives or {"acc": "max"},
                     parse_space(SPACE)[0], Objective("acc", "max", 3), str(tmp_path))


def test_a_live_journal_grows_as_trials_run_and_a_reader_keeps_up(tmp_path) -> None:
    journal = _journal(tmp_path)
    done, stopped, failed, empty = (Trial(i, {"lr": 0.01, "width": 64}) for i in "abcd")
    for t in (done, stopped, failed, empty):
        journal.on_trial_start(0, [], t)
    reader = JournalStorage(JournalFileBackend(str(tmp_path / "optuna.log")))  # a dashboard
    for epoch in (1, 2, 3):
        journal.on_trial_result(0, [], done, _result(done, epoch, acc=0.1 * epoch))
        assert reader.get_all_trials(0)[0].intermediate_values == {
            e: pytest.approx(0.1 * e) for e in range(1, epoch + 1)}
    journal.on_trial_complete(0, [], done)
    journal.on_trial_result(0, [], stopped, _result(stopped, 1, acc=0.05))
    (tmp_path / "state").mkdir()  # ASHA's verdict: stopped at epoch 1 of 3
    (tmp_path / "state" / "scheduler.jsonl").write_text(
        '{"trial": "b", "action": "STOP", "epoch": 1}\n')
    journal.on_trial_complete(0, [], stopped)
    journal.on_trial_error(0, [], failed)
    journal.on_trial_result(0, [], empty, _result(empty, 1, loss=1.0))
    journal.on_trial_complete(0, [], empty)
    journal.on_trial_complete(0, [], Trial("e", {"lr": 0.1, "width": 32}))  # never started
    trials = _by_id(_study(tmp_path / "optuna.log"))
    assert {k: t.state for k, t in trials.items()} == {
        "a": TrialState.COMPLETE, "b": TrialState.PRUNED, "c": TrialState.FAIL,
        "d": TrialState.FAIL}
    assert trials["a"].value == pytest.approx(0.3) and trials["b"].value == 0.05
    assert trials["a"].params == {"lr": 0.01, "width": 64}
    assert trials["a"].distributions["lr"] == optuna.distributions.FloatDistribution(
        1e-4, 1e-1, log=True)
    assert [t.user_attrs[TRIAL_ATTR] for t in reader.get_all_trials(0)] == list("abcd")


def test_a_resumed_driver_continues_the_same_trials(tmp_path) -> None:
    journal = _journal(tmp_path)
    running, ended = Trial("a", {"lr": 0.01, "width": 64}), Trial("b", {"lr": 0.02, "width": 32})
    for t in (running, ended):
        journal.on_trial_start(0, [], t)
        journal.on_trial_result(0, [], t, _result(t, 1, acc=0.5))
    journal.on_trial_complete(0, [], ended)
    with open(tmp_path / "optuna.log", "ab") as f:
        f.write(b'{"op_code": 6, "worker_id": "x", "trial_id": 0, "st')  # killed mid-append
    again = pickle.loads(pickle.dumps(journal))  # as Tune restores its callbacks
    again.on_trial_result(0, [], running, _result(running, 2, acc=0.6))  # no start: restored
    again.on_trial_start(0, [], ended)  # a grown max_t continues it: its first end stays
    again.on_trial_result(0, [], ended, _result(ended, 2, acc=0.9))
    again.on_trial_complete(0, [], running)
    trials = _by_id(_study(tmp_path / "optuna.log"))
    assert len(trials) == 2
    assert trials["a"].intermediate_values == {1: 0.5, 2: 0.6} and trials["a"].value == 0.6
    assert trials["b"].intermediate_values == {1: 0.5} and trials["b"].value == 0.5


def test_several_objectives_end_with_every_value(tmp_path) -> None:
    journal = _journal(tmp_path, {"acc": "max", "latency": "min"})
    t = Trial("a", {"lr": 0.01, "width": 64})
    journal.on_trial_start(0, [], t)
    journal.on_trial_result(0, [], t, _result(t, 3, acc=0.9, latency=2.0))
    journal.on_trial_complete(0, [], t)
    study = _study(tmp_path / "optuna.log")
    assert study.directions == [optuna.study.StudyDirection.MAXIMIZE,
                                optuna.study.StudyDirection.MINIMIZE]
    assert study.trials[0].values == [0.9, 2.0] and study.trials[0].intermediate_values == {}
    assert study.metric_names == ["acc", "latency"]  # what optuna-dashboard labels plots with


def test_a_failure_is_logged_once_and_never_reaches_tune(tmp_path, caplog) -> None:
    journal = _journal(tmp_path)
    t = Trial("a", {"lr": 5.0, "width": 64})  # outside the space: Optuna refuses the trial
    journal.on_trial_start(0, [], t)
    journal.on_trial_result(0, [], t, _result(t, 1, acc=0.5))
    journal.on_trial_complete(0, [], t)
    assert [r.message.split(":")[0] for r in caplog.records] == [str(tmp_path / "optuna.log")]
    assert "python -m sweeps optuna-log" in caplog.records[0].message


def test_export_writes_a_sweeps_files_as_the_live_journal_would(tmp_path, capsys) -> None:
    root = _with_params(_trials(_sweep(tmp_path / "s")))  # a: 3 epochs, b: stopped, c: running
    out = tmp_path / "digits.log"
    with hold(claim_store(root), _me()):
        with pytest.raises(FileExistsError, match="running sweep keeps it up to date"):
            export(str(root), str(root / "optuna.log"))
        assert export(str(root), str(out)) == 3  # a live sweep, elsewhere: yes
    trials = _by_id(_study(out))
    assert {k: t.state for k, t in trials.items()} == {
        "a": TrialState.COMPLETE, "b": TrialState.PRUNED, "c": TrialState.RUNNING}
    assert trials["a"].intermediate_values == {1: 0.5, 2: 0.7, 3: 0.9}
    assert trials["a"].value == 0.9 and trials["b"].value == 0.1
    assert trials["c"].params["lr"] == 0.05 and set(trials["c"].params) == {
        "lr", "hidden", "depth", "dropout", "batch_size"}
    assert main([str(root)]) == 0  # released: its own optuna.log, by default
    assert capsys.readouterr().out.endswith(f"3 trials; open it with: optuna-dashboard "
                                            f"{root / 'optuna.log'}\n")
    assert len(_study(root / "optuna.log").trials) == 3
    assert main([str(tmp_path / "none")]) == 1 and main([]) == 2


def test_export_of_a_sweep_on_s3_writes_here(moto_s3, tmp_path, monkeypatch, capsys) -> None:
    uri = f"s3://{moto_s3.BUCKET}/optuna-log/{uuid.uuid4().hex[:8]}"
    _with_params(_trials(_sweep(stand_in(uri))))
    monkeypatch.chdir(tmp_path)
    assert main([uri]) == 0
    assert capsys.readouterr().out == "optuna.log: 3 trials; open it with: optuna-dashboard " \
                                      "optuna.log\n"
    assert sorted(_by_id(_study(tmp_path / "optuna.log"))) == ["a", "b", "c"]


def test_a_failed_trial_a_resume_runs_again_gets_a_new_optuna_trial(tmp_path) -> None:
    """Optuna never reopens a FAIL; the sweep's resume runs an errored trial again
    (``resume_errored``): the newest Optuna trial of that sweep trial is the one that counts."""
    journal = _journal(tmp_path)
    t = Trial("a", {"lr": 0.01, "width": 64})
    journal.on_trial_start(0, [], t)
    journal.on_trial_result(0, [], t, _result(t, 1, acc=0.4))
    journal.on_trial_error(0, [], t)
    (tmp_path / "optuna.log.lock").symlink_to(tmp_path / "optuna.log")  # a driver killed
    again = pickle.loads(pickle.dumps(journal))  # mid-append: its lock stays behind
    again.on_trial_start(0, [], t)
    for epoch in (2, 3):
        again.on_trial_result(0, [], t, _result(t, epoch, acc=0.1 * epoch + 0.4))
    again.on_trial_complete(0, [], t)
    first, second = _study(tmp_path / "optuna.log").trials
    assert (first.state, first.intermediate_values) == (TrialState.FAIL, {1: 0.4})
    assert (second.state, second.value) == (TrialState.COMPLETE, pytest.approx(0.7))
    assert second.user_attrs[TRIAL_ATTR] == "a" and set(second.intermediate_values) == {2, 3}


def test_a_stopped_trial_keeps_its_last_report_and_a_last_report_without_it_the_one_before(
        tmp_path) -> None:
    journal = _journal(tmp_path)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "scheduler.jsonl").write_text(
        '{"trial": "b", "action": "STOP", "epoch": 2}\n')
    stopped, done = Trial("b", {"lr": 0.01, "width": 64}), Trial("a", {"lr": 0.02, "width": 32})
    journal.on_trial_start(0, [], stopped)
    for epoch, acc in ((1, 0.1), (2, 0.2), (3, 0.9), (2, 0.25)):  # restored at 1, stopped at 2
        journal.on_trial_result(0, [], stopped, _result(stopped, epoch, acc=acc))
    journal.on_trial_complete(0, [], stopped)
    journal.on_trial_start(0, [], done)
    journal.on_trial_result(0, [], done, _result(done, 3, acc=0.8))
    journal.on_trial_result(0, [], done, _result(done, 3, test_acc=0.7))  # a last extra report
    journal.on_trial_complete(0, [], done)
    trials = _by_id(_study(tmp_path / "optuna.log"))
    assert (trials["b"].state, trials["b"].value) == (TrialState.PRUNED, 0.25)
    assert (trials["a"].state, trials["a"].value) == (TrialState.COMPLETE, 0.8)


def test_export_of_a_sweep_with_no_trial_yet_and_to_a_place_it_cannot_write(tmp_path,
                                                                            capsys) -> None:
    root = _sweep(tmp_path / "s")  # prepared and started: no trial has run
    assert main([str(root), str(tmp_path / "empty.log")]) == 0
    assert _study(tmp_path / "empty.log").trials == []
    (tmp_path / "taken").mkdir()
    assert main([str(root), str(tmp_path / "taken")]) == 1
    assert "sweeps optuna-log: " in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.log", "s", "taken"]
