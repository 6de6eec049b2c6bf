"""Parameter importance at a real sweep's end (issue 46): a Tune function whose loss depends
on x and not on z ranks z last (x first in 98.5 % of 200 seeds of 24 random trials under
PED-ANOVA; this seed is one of them), and the ranking is the same in the
console, ``importance.json``, the parent MLflow run's ``importance.<param>`` metrics,
``plots/importance.png`` and ``sweeps status``; ``sweeps.load`` has the summary's trials, and so
has ``optuna.log``, read with Optuna's journal storage (what optuna-dashboard opens) while the
sweep runs and after, where Optuna's own PED-ANOVA ranks as the sweep did.

    python -m pytest tests/integration/test_importance.py
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import mlflow
import pytest

from tests.conformance.harness import CONF

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_a_sweep_ranks_its_params_and_says_so_everywhere(tmp_path: Path, ray_cluster,
                                                        capsys) -> None:
    from sweeps import compose, load, run_sweep
    from sweeps.report.console import print_result
    from sweeps.report.status import status_json, status_lines

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = compose("conformance", [
        "experiment.trainable=tests.integration.importance_loop:objective",
        "experiment.metric=loss", "experiment.mode=min", "search=random",
        "search.num_samples=24", "scheduler.max_t=1", "sweep.seed=0",
        "experiment.search_space.lr=0.05",  # the conformance default: a choice of one
        *(f"+experiment.params.{p}=0.5" for p in "xz"),
        *(f"+experiment.search_space.{p}='interval(0, 1)'" for p in "xz"),
        f"sweep.dir={tmp_path / 'sweep'}", f"tracking.uri={uri}"], config_dir=CONF)
    seen, stop = [], threading.Event()
    poller = threading.Thread(target=_watch_optuna_log, args=(tmp_path / "sweep", seen, stop))
    poller.start()
    try:
        result = run_sweep(cfg)
    finally:
        stop.set()
        poller.join()
    print_result(result, cfg)
    console = capsys.readouterr().out

    ranked = result.summary.importance.values
    assert list(ranked)[0] == "x" and list(ranked)[-1] == "z", ranked
    assert result.summary.importance.trials == 24
    saved = json.loads((tmp_path / "sweep" / "importance.json").read_text())
    assert saved["values"] == ranked and saved["evaluator"] == "PedAnovaImportanceEvaluator"
    head = "parameter importance for loss (Optuna PED-ANOVA over 24 trials, sums to 1):"
    block = console.split(head, 1)[1].strip().splitlines()[:2]
    assert [line.split()[0] for line in block] == list(ranked), console
    assert (tmp_path / "sweep" / "plots" / "importance.png").is_file()
    assert "importance.png" in console

    client = mlflow.MlflowClient(uri)
    (parent,) = [r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()])
        if r.data.tags.get("sweeps.role") == "parent"]
    assert {k: v for k, v in parent.data.metrics.items() if k.startswith("importance.")} == \
        pytest.approx({f"importance.{p}": v for p, v in ranked.items()})
    artifacts = [a.path for a in client.list_artifacts(parent.info.run_id, "plots")]
    assert "plots/importance.png" in artifacts, artifacts

    # sweeps.load: the same trials as the summary, each with its one report
    tables = load(tmp_path / "sweep")
    summary = result.summary.table.set_index("trial_id")
    trials = tables.trials.set_index("trial_id").loc[summary.index]
    assert (trials["status"] == "completed").all() and len(tables.history) == 24
    assert trials[["x", "z"]].equals(summary[["x", "z"]])
    assert trials["best_loss"].tolist() == summary["loss"].tolist() == trials["final_loss"].tolist()

    status = status_lines(tmp_path / "sweep")
    assert "  importance (at the last end): " + ", ".join(
        f"{p} {v:.2f}" for p, v in ranked.items()) in status, status
    # sweeps status --json: the same trials, each with its params and value, and the best
    state = status_json(tmp_path / "sweep")
    assert (state["state"], state["total"], state["not_started"]) == ("finished", 24, 0)
    by_trial = {t["id"]: t for t in state["trials"]}
    assert {t: (v["status"], v["params"]["x"], v["params"]["z"], v["metric"])
            for t, v in by_trial.items()} == {
        t: ("completed", row["x"], row["z"], row["loss"]) for t, row in summary.iterrows()}
    assert state["best"]["value"] == summary["loss"].min()

    # optuna.log: read while the sweep ran (as a dashboard: one storage, reading on), and after
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    assert [e for e in seen if isinstance(e, Exception)] == []
    assert any(0 < done < 24 for done, _ in seen), seen  # a sweep part way through
    assert seen[-1][0] == 24
    study = optuna.load_study(study_name=None, storage=JournalStorage(
        JournalFileBackend(str(tmp_path / "sweep" / "optuna.log"))))
    by_id = {t.user_attrs["sweeps_trial_id"]: t for t in study.trials}
    assert sorted(by_id) == sorted(summary.index) and seen[-1][1] == by_id.keys()
    assert {t.state for t in study.trials} == {optuna.trial.TrialState.COMPLETE}
    assert [by_id[i].params for i in summary.index] == summary[["x", "z"]].to_dict("records")
    assert [by_id[i].value for i in summary.index] == summary["loss"].tolist()
    assert "optuna-dashboard: optuna-dashboard " + str(tmp_path / "sweep" / "optuna.log") in console
    theirs = optuna.importance.get_param_importances(
        study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    assert list(theirs) == list(ranked)


def _watch_optuna_log(root: Path, seen: list, stop: threading.Event) -> None:
    """Read ``optuna.log`` as optuna-dashboard does (one storage, reading on) until ``stop``:
    (trials complete, their sweep ids) per read, or the error a read raised."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    storage = None
    while True:
        last = stop.wait(0.2)
        try:
            if storage is None and (root / "optuna.log").exists():
                storage = JournalStorage(JournalFileBackend(str(root / "optuna.log")))
            if storage is not None and storage.get_all_studies():
                trials = storage.get_all_trials(storage.get_all_studies()[0]._study_id)
                seen.append((sum(t.state == TrialState.COMPLETE for t in trials),
                             {t.user_attrs["sweeps_trial_id"] for t in trials}))
        except Exception as exc:  # noqa: BLE001 - what the test reports
            seen.append(exc)
        if last:
            return
