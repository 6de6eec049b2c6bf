"""The sweep's MLflow parent run, opened and closed by the driver around Tune's run.

    tracking = start_tracking(prep, sweep_id, record.starts)   # sweeps.driver.fit
    unsent, why, fix = finish_tracking(tracking, prep, summary)   # the sweep's end

The callback (``sweeps.tracking.callback``) logs each trial as a nested run; the target was
checked before Ray started (``sweeps.tracking.setup.check_tracking``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
from typing import TYPE_CHECKING

from sweeps.files import make_dirs, write_atomic
from sweeps.storage.location import uri_of
from sweeps.tracking.masking import mask_text

if TYPE_CHECKING:  # Ray (via the callback), pandas (via the summary) stay off the --help path
    from sweeps.driver.prepare import Prepared
    from sweeps.report.summary import Summary
    from sweeps.tracking.callback import MLflowTracking

__all__ = ["abort_tracking", "finish_tracking", "start_tracking"]

log = logging.getLogger(__name__)


def start_tracking(prep: Prepared, sweep_id: str, start: int = 1) -> MLflowTracking:
    """The MLflow callback, with the sweep's parent run journaled (``start`` > 1: a resumed
    sweep, which continues the same parent run)."""
    from omegaconf import OmegaConf

    from sweeps.tracking.callback import MLflowTracking, TrackingSettings

    cfg, t, layout = prep.cfg, prep.cfg.tracking, prep.layout
    state_dir = layout.tracking
    make_dirs(state_dir)
    settings = TrackingSettings(
        uri=prep.tracking_uri or "", experiment_name=prep.tracking.experiment,
        model_name=(t.model_name or cfg.experiment.name) if t.register_model else None,
        state_dir=str(state_dir), max_epochs=cfg.scheduler.max_t, scheduler=cfg.scheduler.name,
        flush_timeout_s=t.flush_timeout_s, metric=cfg.experiment.metric,
        mode=cfg.experiment.mode, model_loader=cfg.experiment.model_loader,
        system_metrics=t.system_metrics)
    # No credentials on disk: sweeps.sync takes them from MLFLOW_TRACKING_URI or MLflow's
    # credential variables, as the sweep does.
    write_atomic(layout.tracking_meta, json.dumps(settings.stored().__dict__, indent=2))
    tracking = MLflowTracking(settings)
    config = OmegaConf.to_container(OmegaConf.structured(cfg))
    tags = {"sweeps.sweep_name": cfg.sweep.name, "sweeps.sweep_dir": uri_of(prep.sweep_dir)}
    if prep.warm_start is not None:  # where the searcher's earlier trials came from
        tags["sweeps.warm_start.source"] = prep.warm_start.source
        tags["sweeps.warm_start.trials"] = str(len(prep.warm_start.trials))
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5)
        if out.returncode == 0 and out.stdout.strip():
            tags["mlflow.source.git.commit"] = out.stdout.strip()
    tracking.start_sweep(cfg.sweep.name, sweep_id, config,
                         {p.path: p.describe() for p in prep.params}, tags, start)
    return tracking


def finish_tracking(tracking: MLflowTracking, prep: Prepared,
                    summary: Summary) -> tuple[int, str, str]:
    """Sweep end in MLflow; never lets a tracking failure hide the finished sweep. Returns the
    records still waiting in the journal (-1: the end itself), why, and what sends them."""
    try:
        outcomes = ({str(k): int(v) for k, v in summary.table["status"].value_counts().items()}
                    if "status" in summary.table else {})
        ranked = summary.importance.values if summary.importance else {}
        unsent = tracking.finish(prep.layout.summary_csv, summary.best, pareto=summary.pareto,
                                 outcomes=outcomes, importance=ranked)
    except Exception as exc:
        return -1, mask_text(f"recording the sweep's end failed ({exc})"), "it is fixed"
    return (unsent, *tracking.held) if unsent else (0, "", "")


def abort_tracking(tracking: MLflowTracking, exc: BaseException) -> None:
    """The sweep died: close the parent and every open trial run (KILLED on Ctrl-C/SIGTERM,
    FAILED otherwise) so no run is left RUNNING; wait briefly for delivery."""
    killed = isinstance(exc, KeyboardInterrupt | SystemExit) or getattr(exc, "interrupted", False)
    status = "KILLED" if killed else "FAILED"
    try:
        left = tracking.abort(status, f"{type(exc).__name__}: {exc}"[:500], timeout_s=15)
    except Exception as err:  # never mask the original error
        log.error("MLflow: could not record the sweep's abort (%s)", err)
        return
    if left:
        log.warning("MLflow: %d record(s) of the aborted sweep wait in the journal", left)
