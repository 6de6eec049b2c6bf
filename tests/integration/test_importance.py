"""Parameter importance at a real sweep's end (issue 46): a Tune function whose loss depends
on x and not on z ranks z last (x first in 98.5 % of 200 seeds of 24 random trials under
PED-ANOVA; this seed is one of them), and the ranking is the same in the
console, ``importance.json``, the parent MLflow run's ``importance.<param>`` metrics,
``plots/importance.png`` and ``sweeps status``; ``sweeps.load`` has the summary's trials.

    python -m pytest tests/integration/test_importance.py
"""

from __future__ import annotations

import json
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
    from sweeps.report.status import status_lines

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = compose("conformance", [
        "experiment.trainable=tests.integration.importance_loop:objective",
        "experiment.metric=loss", "experiment.mode=min", "search=random",
        "search.num_samples=24", "scheduler.max_t=1", "sweep.seed=0",
        "experiment.search_space.lr=0.05",  # the conformance default: a choice of one
        *(f"+experiment.params.{p}=0.5" for p in "xz"),
        *(f"+experiment.search_space.{p}='interval(0, 1)'" for p in "xz"),
        f"sweep.dir={tmp_path / 'sweep'}", f"tracking.uri={uri}"], config_dir=CONF)
    result = run_sweep(cfg)
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
