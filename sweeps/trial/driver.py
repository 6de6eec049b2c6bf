"""The trial driver: one Tune trial, run on its backend (a Ray Train run, or the loop inline).

    tune.with_parameters(run_trial, plan=TrialPlan(...))   # built by sweeps.driver.tuner

Runs inside the Tune trial process. It merges the trial's sampled values into the experiment's
fixed params (that flat dict is the loop's ``config``, as ``train_loop_config`` is in Ray's
docs), restores the trial's records (a pending PBT exploit, its run directory, its clock, the
reports Tune never saw), then hands one attempt to the backend ``plan.executor`` names
(``sweeps.trial.backends.base``). A loop that ran out of GPU memory ends its trial without
raising, so Tune does not retry it (``sweeps.loop.gpu_memory``).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sweeps._ray.tune import THREAD_TIMEOUT_ENV
from sweeps.loop import gpu_memory
from sweeps.protocol import ERROR_KEY
from sweeps.resume.train_runs import claim_run, repair_run
from sweeps.trial import report_log
from sweeps.trial.backends import TrialAttempt, backend_for
from sweeps.trial.clock import TrialClock
from sweeps.trial.exploit import judged_clock, take_exploit
from sweeps.trial.plan import TrialPlan

__all__ = ["run_trial", "unseen_reports", "end_out_of_memory"]

log = logging.getLogger(__name__)


def run_trial(sampled: dict[str, Any], plan: TrialPlan) -> None:
    """Tune function trainable: run this trial on its backend to completion (or until stopped)."""
    from ray import tune

    trial_id = tune.get_context().get_trial_id()
    if trial_id in plan.ended:
        # Ended before the sweep was interrupted (Tune's saved state lagged behind): report the
        # final result again so Tune and the scheduler close it; train nothing.
        tune.report(dict(plan.ended[trial_id]))
        return
    run_dir = Path(plan.train_storage) / trial_id
    # PBT: a pending exploit reseeds the run from its donor's checkpoint, with explored values.
    sampled = take_exploit(run_dir, trial_id, sampled, plan.sweep_id)
    config = plan.worker_config(sampled)
    for note in claim_run(run_dir, config) + repair_run(run_dir):
        log.warning(note)
    clock = TrialClock.load(run_dir, plan.time_attr, report_log.reports_before(run_dir))
    backend = backend_for(plan.executor)()
    unseen = unseen_reports(run_dir, Path(plan.train_storage).parent, trial_id)
    for metrics in unseen:
        tune.report(metrics)  # trained and checkpointed before an interruption; Tune never saw
    # Tune reuses this process for the next trial only if this thread ends within its wait
    # (2 s by default), else it fails that trial; a loop's cleanup may take longer.
    os.environ.setdefault(THREAD_TIMEOUT_ENV, "60")
    gpu_memory.clear(run_dir)  # this attempt runs the loop, whatever an earlier one ran into
    backend.run(TrialAttempt(plan, trial_id, run_dir, config, clock, len(unseen)))
    if gpu_memory.noted(run_dir) is not None:  # outside any except: its tensors are released
        end_out_of_memory(plan, run_dir)


def end_out_of_memory(plan: TrialPlan, run_dir: Path) -> None:
    """End a trial whose loop ran out of GPU memory, without raising: its reason goes to Tune
    as ``ERROR_KEY`` and the scheduler fails the trial, so Tune does not retry it
    (``sweeps.loop.gpu_memory`` says why)."""
    from ray import tune

    found = gpu_memory.noted(run_dir) or {}
    gpu_memory.release_cached_memory()
    text = gpu_memory.reason(found, plan.worker_resources.get("GPU"))
    log.warning("trial %s: %s", run_dir.name, text)
    tune.report({ERROR_KEY: text})


def unseen_reports(run_dir: Path, sweep_dir: Path, trial_id: str) -> list[dict[str, Any]]:
    """Reports the trial made before an interruption that never reached Tune (its scheduler
    log has no judgement of them) and that its restored checkpoint covers, oldest first.

    Re-reporting them before training resumes lets ASHA judge them (and stop the trial at a
    rung it would otherwise skip) and MLflow log them (``sweeps.trial.report_log``).
    """
    from sweeps.search.schedulers import decision_log

    return report_log.unseen(run_dir, judged_clock(decision_log(sweep_dir).records(), trial_id))
