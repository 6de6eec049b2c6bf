"""MO-ASHA in a real sweep, killed and resumed: ``+experiment=digits_multiobjective
scheduler=asha`` (val_acc max, n_params min), the driver killed with SIGKILL once the first
rung holds results, then the same command again.

Checks: MO-ASHA stopped trials before the budget; the resumed driver's scheduler, rebuilt from
the decision log, decided every later result as one scheduler seeing all the logged results
would (the log re-decided from scratch reproduces each logged action, and some of those
decisions, made after the kill, were at a rung filled before it); the summary has a Pareto
front (``pareto.json``) of trials that no other trial dominates.
"""

from __future__ import annotations

import json
import time

import pandas as pd
import pytest

from sweeps.search.decisions import decision_log, verdicts
from sweeps.search.moasha import MOHalving, dominates
from tests.integration.test_resume import Sweep, _wait_for

pytestmark = pytest.mark.slow

SAMPLES, BUDGET = 6, 3
# rf 4 keeps only the top quarter at rung 1 (epoch 1): almost every trial after the first is
# stopped there unless it leads the rung's non-dominated order.
ARGS = ("+experiment=digits_multiobjective", "scheduler=asha", f"scheduler.max_t={BUDGET}",
        "scheduler.reduction_factor=4", f"search.num_samples={SAMPLES}",
        "scaling.num_workers=1", "sweep.seed=0")
SIGNS = {"val_acc": 1.0, "n_params": -1.0}


def _signed(values: dict[str, float]) -> tuple[float, ...]:
    return tuple(SIGNS[m] * values[m] for m in SIGNS)


def test_moasha_sweep_killed_and_resumed_keeps_its_rungs(tmp_path) -> None:
    sweep_dir = tmp_path / "sweep"
    sweep = Sweep(tmp_path, [*ARGS, f"sweep.dir={sweep_dir}",
                             f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}"])
    log = sweep_dir / "state" / "scheduler.jsonl"

    def judged() -> int:
        return sum('"action"' in line for line in
                   (log.read_text().splitlines() if log.exists() else []))

    sweep.start()
    assert _wait_for(lambda: judged() >= 3, sweep.proc, timeout=150), "ended before the kill"
    sweep.kill9()
    killed_at = time.time()
    sweep.start()
    rc, out = sweep.wait(timeout=150)
    assert rc == 0, out
    assert "resuming:" in out

    records = decision_log(sweep_dir).records()
    halving = MOHalving(1, BUDGET, 4)  # one scheduler that saw every logged result in order
    after_kill_at_a_filled_rung = 0
    for r in records:
        if "values" not in r:
            continue
        point = _signed(r["values"])
        if r.get("end"):
            halving.on_result(r["trial"], r["epoch"], point)
            continue
        rung_1 = halving.rungs()[-1][1]
        filled_before = any(t != r["trial"] for t in rung_1)
        assert halving.judge(r["trial"], r["epoch"], point) == (r["action"] == "STOP"), r
        if r["t"] > killed_at and r["epoch"] == 1 and filled_before:
            after_kill_at_a_filled_rung += 1
    assert after_kill_at_a_filled_rung >= 1

    stopped = {t for t, v in verdicts(sweep_dir).items()
               if v.stopped_at is not None and v.stopped_at < BUDGET and not v.error}
    assert stopped, "MO-ASHA stopped no trial"
    summary = pd.read_csv(sweep_dir / "summary.csv", dtype={"trial_id": str})
    assert len(summary) == SAMPLES
    assert set(summary.loc[summary["status"] == "stopped", "trial_id"]) == stopped

    front = json.loads((sweep_dir / "pareto.json").read_text())
    members = {m["trial_id"]: _signed(m["values"]) for m in front["members"]}
    assert members and set(members) == set(summary.loc[summary["pareto"], "trial_id"])
    points = [(_signed({"val_acc": r.val_acc, "n_params": r.n_params}))
              for r in summary.itertuples()]
    for point in members.values():
        assert not any(dominates(p, point) for p in points)
