"""An inline trial's run directory, written by the trial process the way Ray Train writes it.

    run = InlineRun(run_dir, "val_acc", "max", keep=2, clock=clock, budget=9)
    run.report(metrics, checkpoint)          # ray.train.report, served inline (rank 0)

Each reported checkpoint is copied into the trial's run directory (``<sweep dir>/train/<trial
id>/<name>``, atomically), registered in Train's run snapshot (``checkpoint_manager_snapshot.json``,
the best ``checkpoint.keep`` by the sweep metric plus the latest, as Train keeps them), stamped with
the trial's clock, appended to the report log and handed to Tune with its ``checkpoint_path``,
before ``report`` returns; the report that reaches the budget (``scheduler.max_t``) is handed over
when the loop returns or reports again, so the loop's code after its last report runs, as it does in
a Train run. So resume, the best checkpoint, MLflow and a later ``trial.executor=train`` run of the
same trial all read it unchanged (``sweeps.trial.backends.inline`` runs the loop).
"""

from __future__ import annotations

import math
import numbers
import shutil
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeps import files
from sweeps._ray import train_snapshot
from sweeps.protocol import CHECKPOINT_PATH_KEY, CLOCK_KEY
from sweeps.storage import trees
from sweeps.storage.location import ray_name

if TYPE_CHECKING:
    from sweeps.trial.backends.rendezvous import Rendezvous
    from sweeps.trial.clock import TrialClock

__all__ = ["InlineRun", "RankZeroReports", "checkpoint_at", "ended_by", "reported_checkpoints",
           "score_key"]


def score_key(metrics: dict[str, Any], metric: str, mode: str) -> tuple[bool, float]:
    """Train's checkpoint order (``_CheckpointManager._get_checkpoint_score``): NaN first, then
    worst to best; nested metrics by ``a/b`` path; a missing metric counts as -inf before the
    mode's sign; any number type (numpy's too); a value that is not a number is refused.

    Example:
        >>> sorted([{"acc": 0.5}, {"acc": float("nan")}, {"acc": 0.9}],
        ...        key=lambda m: score_key(m, "acc", "max"))
        [{'acc': nan}, {'acc': 0.5}, {'acc': 0.9}]
    """
    from ray.tune.utils import flatten_dict

    value = flatten_dict(metrics).get(metric, -math.inf)
    if not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise ValueError(f"checkpoint score {metric}={value!r} is not a number; the sweep "
                         f"ranks checkpoints by experiment.metric, so report it as one")
    value = float(value)
    return (False, -math.inf) if math.isnan(value) else (True, value if mode == "max" else -value)


def reported_checkpoints(run_dir: Path) -> list[tuple[Any, dict[str, Any]]]:
    """``ray.train.get_all_reported_checkpoints()`` of an inline trial: (checkpoint, metrics)
    of every checkpoint the run keeps, in the order Train's checkpoint manager keeps them
    (worst to best by the sweep metric, ties by report), read from its run snapshot."""
    snap = train_snapshot.load(Path(run_dir))
    if snap is None:
        return []
    return [(checkpoint_at(run_dir, r["checkpoint_dir_name"]), dict(r.get("metrics") or {}))
            for r in snap["checkpoint_results"]]


def checkpoint_at(run_dir: Path, name: str | None) -> Any:
    """The ``ray.train.Checkpoint`` of the run's checkpoint directory ``name`` (None: None)."""
    if name is None:
        return None
    from ray.train import Checkpoint

    where, fs = ray_name(Path(run_dir) / name)  # on an object store Ray downloads it when read
    return Checkpoint(where, filesystem=fs)


class InlineRun:
    """One trial's Train run directory, written by the trial process the way Train writes it."""

    def __init__(self, run_dir: Path, metric: str, mode: str, keep: int,
                 clock: TrialClock, budget: float = math.inf) -> None:
        self.run_dir, self.metric, self.mode, self.keep = Path(run_dir), metric, mode, keep
        self.clock, self.budget = clock, budget
        self.ranks: RankZeroReports | None = None  # the peers' side of each report, if any
        # The report that reached the budget, handed to Tune when the loop returns (or reports
        # again): Tune stops the trial at it, and the loop's code after it should still run.
        self.pending: dict[str, Any] | None = None
        snap = train_snapshot.load(self.run_dir)
        latest = train_snapshot.latest(snap)
        self.kept: list[tuple[str, dict[str, Any], int]] = []
        if snap is not None and latest is not None:
            metrics = {r["checkpoint_dir_name"]: dict(r.get("metrics") or {})
                       for r in snap["checkpoint_results"]}
            self.kept = [(name, metrics[name], index)
                         for name, index in train_snapshot.entries(snap)]
        self.latest = latest[0] if latest else None
        # What get_checkpoint() answers rank 0: the latest checkpoint when the attempt
        # started, then the latest one rank 0 itself passed to report (a Train worker's own
        # latest: a checkpoint made of other ranks' files only does not change it).
        self.own = self.latest
        self.next_index = int(snap.get("current_report_index") or 0) if snap and latest else 0

    def checkpoint(self) -> Any:
        """What ``ray.train.get_checkpoint()`` returns on rank 0, or None."""
        return checkpoint_at(self.run_dir, self.own)

    def reported(self) -> list[tuple[Any, dict[str, Any]]]:
        """``ray.train.get_all_reported_checkpoints()``."""
        return reported_checkpoints(self.run_dir)

    def restart(self) -> None:
        """Before the loop runs again from the latest checkpoint: the report count goes back
        to the reports that checkpoint covers (as a retried trial's does, from the report
        log; Train's report index also counts reports lost before earlier restarts)."""
        from sweeps.trial import report_log

        self.clock.count = report_log.reports_before(self.run_dir)
        self.own = self.latest

    def report(self, metrics: dict[str, Any], checkpoint: Any = None,
               checkpoint_dir_name: str | None = None, delete_source: bool = False,
               upload: Any = None) -> None:
        """``ray.train.report``: persist and register the checkpoint, stamp the clock, log the
        report, hand it to Tune (which blocks until Tune has taken it, or raises to stop)."""
        try:
            self._report(metrics, checkpoint, checkpoint_dir_name, delete_source, upload)
        except BaseException as exc:  # Tune stopped the trial (SystemExit), or it failed
            if self.ranks is not None:  # the other ranks end their reports now, before any
                self.ranks.meet.abort(ended_by(exc))  # collective in the loop's unwind
            raise

    def _report(self, metrics: dict[str, Any], checkpoint: Any, checkpoint_dir_name: str | None,
                delete_source: bool, upload: Any) -> None:
        from sweeps._ray.tune_fn import report_to_tune
        from sweeps.trial import report_log

        self.flush()  # a report past the budget: Tune ends the trial here
        path = None
        # With peers, every rank reports here together, and any rank's checkpoint makes one.
        some = self.ranks.arrive(checkpoint is not None) if self.ranks else checkpoint is not None
        name = None
        if some:
            name = checkpoint_dir_name or f"checkpoint_{datetime.now():%Y-%m-%d_%H-%M-%S.%f}"
            if checkpoint is not None:
                path = str(self._persist(checkpoint, name, delete_source, upload))
                self.own = name
            else:  # the other ranks' parts only: none of an earlier attempt's files
                trees.remove_tree(self.run_dir / name)
                path = str(self.run_dir / name)
        if self.ranks:
            self.ranks.stored(name)
        if name is not None:
            self._register(name, dict(metrics))
        self.next_index += 1
        stamped = report_log.record(self.clock, dict(metrics), path)
        handover = {**stamped, CHECKPOINT_PATH_KEY: path} if path else stamped
        if float(stamped[CLOCK_KEY]) >= self.budget:
            self.pending = handover  # Tune would stop the loop inside this call
        else:
            report_to_tune(handover)
        if self.ranks:
            self.ranks.go()

    def flush(self) -> None:
        """Hand Tune the budget's last report, if one waits (Tune then ends the trial: in this
        thread that is a ``SystemExit`` raised here, as at any report of a stopped trial)."""
        from sweeps._ray.tune_fn import report_to_tune

        pending, self.pending = self.pending, None
        if pending is not None:
            report_to_tune(pending)

    def _persist(self, checkpoint: Any, name: str, delete_source: bool, upload: Any) -> Path:
        target = self.run_dir / name
        files.make_dirs(self.run_dir)
        if upload is not None:  # the loop's checkpoint_upload_fn, called as Train calls it
            uploaded = upload(checkpoint, name)
            path = str(getattr(uploaded, "path", ""))
            if path != ray_name(target)[0] and Path(path).resolve() != target.resolve():
                raise ValueError(f"ray.train.report(checkpoint_upload_fn=...) returned "
                                 f"{getattr(uploaded, 'path', uploaded)!r}; an inline trial "
                                 f"keeps its checkpoints in {target}: return "
                                 "ray.train.Checkpoint(<that path>), or run the sweep with "
                                 "trial.executor=train")
            return target
        source = Path(checkpoint.path)
        if source.resolve() == target.resolve():
            return target
        trees.put_tree(source, target)  # replaces the same name reported again after a restart
        if delete_source:
            shutil.rmtree(source, ignore_errors=True)
        return target

    def _register(self, name: str, metrics: dict[str, Any]) -> None:
        """Add a checkpoint as Train's checkpoint manager does: ordered by score (ties by
        report), the worst beyond ``keep`` deleted unless latest; the snapshot rewritten."""
        kept = [k for k in self.kept if k[0] != name] + [(name, metrics, self.next_index)]
        kept.sort(key=lambda k: (score_key(k[1], self.metric, self.mode), k[2]))
        self.latest = name
        dropped = [k for k in kept[:-self.keep] if k[0] != name]  # checkpoint.keep >= 1
        self.kept = [k for k in kept if k not in dropped]
        train_snapshot.write(self.run_dir, train_snapshot.rebuilt(
            self.kept, latest_name=name, next_index=self.next_index + 1))
        for old, _, _ in dropped:
            trees.remove_tree(self.run_dir / old)


def ended_by(exc: BaseException) -> str:
    """Why rank 0 ended an attempt, as the peers read it: stopped by Tune (the ``SystemExit``
    of a report), or raised."""
    from sweeps.trial.backends.rendezvous import STOPPED

    if not isinstance(exc, Exception):
        return STOPPED
    return f"rank 0 raised {type(exc).__name__}: {exc}"


class RankZeroReports:
    """Rank 0's half of an inline trial's report collective with its peers (``InlineRun``)."""

    def __init__(self, meet: Rendezvous) -> None:
        self.meet, self.count = meet, 0

    def arrive(self, has_checkpoint: bool) -> bool:
        """Wait for every rank's report; whether any rank passed a checkpoint."""
        self.count += 1
        key = f"r{self.count}"
        self.meet.store.add(f"{key}/checkpoints", int(has_checkpoint))
        self.meet.barrier(f"{key}/arrived")
        return int(self.meet.store.add(f"{key}/checkpoints", 0)) > 0

    def stored(self, name: str | None) -> None:
        """Name the checkpoint directory (None: no checkpoint) and wait until every rank put
        its part there."""
        key = f"r{self.count}"
        self.meet.set(f"{key}/name", name or "")
        self.meet.barrier(f"{key}/stored")

    def go(self) -> None:
        """Let every rank return from this report (Tune took it)."""
        self.meet.set(f"r{self.count}/go", b"1")
