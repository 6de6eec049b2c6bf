"""Growing a sweep in place: the same command with a larger ``search.num_samples`` or
``scheduler.max_t`` continues the sweep in ``sweep.dir`` instead of being refused.

    python -m sweeps +experiment=digits search.num_samples=12 scheduler.max_t=15

    changes = identity_changes(record.identity, identity_of(cfg, params), sweep_dir)
    growth = plan_growth(cfg, changes, records, kept=8)   # in decide_resume, before Ray
    growth.describe()    # 'grow: 8 trials kept, 4 new; 3 trials continue from epoch 9 to 15'
    apply_growth(sweep_dir, growth, record, resuming=True)   # at the start, before Tune

What grows and how (ASHA's rungs replayed for the new ``max_t``; a PBT sweep refused), and what
is refused: docs/running.md#growing-a-sweep-in-place. The searcher grows through
``sweeps._ray.tune_grow.grow_search``; each continued trial gets a ``reopen`` record in the
decision log, which the log's readers (``sweeps.search.decisions``) take as "not ended".

Write order (kill -9 safe, as the docs above say): Tune's state, the reopen records, the
sweep's record; trials already reopened for a replanned growth count as continuing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from sweeps import files
from sweeps._ray.tune import experiment_state_files, trials_in_state
from sweeps.config.schema import SweepConfig
from sweeps.errors import ConfigError
from sweeps.layout import SweepLayout
from sweeps.search.asha import AsyncHalving, logged_point, replay_record
from sweeps.search.decisions import decision_log, ended_ids
from sweeps.search.outcome import read_verdicts
from sweeps.storage.location import display

__all__ = ["GROWABLE", "Growth", "identity_changes", "plan_growth", "apply_growth", "grid_note",
           "reopen_trials", "trials_kept", "last_config"]

GROWABLE = ("search.num_samples", "scheduler.max_t")  # identity keys that may grow


@dataclass
class Growth:
    """What a grown sweep adds: new trials, and ended trials that train on."""

    changes: dict[str, tuple[int, int]]  # identity key -> (old, new)
    kept: int = 0  # trials the sweep already has
    reopened: list[str] = field(default_factory=list)  # ended at the old max_t, continue
    stay_stopped: list[str] = field(default_factory=list)  # ended there, the new rungs stop

    @property
    def new(self) -> int:
        old, new = self.changes.get("search.num_samples", (0, 0))
        return new - old

    def stopped_tags(self) -> dict[str, dict[str, str]]:
        """MLflow tags for the trials the new rungs stop: their runs had ended as completed.

        Example:
            >>> tags = Growth({"scheduler.max_t": (3, 9)}, stay_stopped=["a"]).stopped_tags()
            >>> tags["a"]["sweeps.stop_reason"]
            'early-stopped by asha after epoch 3 (the sweep grew to max_t 9)'
        """
        old, new = self.changes.get("scheduler.max_t", (0, 0))
        reason = f"early-stopped by asha after epoch {old} (the sweep grew to max_t {new})"
        return {t: {"sweeps.status": "stopped", "sweeps.stop_reason": reason}
                for t in self.stay_stopped}

    def describe(self) -> str:
        """One line for the plan and the sweep's opening lines.

        Example:
            >>> Growth({"search.num_samples": (4, 6), "scheduler.max_t": (3, 5)}, kept=4,
            ...        reopened=["a", "b", "c", "d"]).describe()
            'grow: 4 trials kept, 2 new; 4 trials continue from epoch 3 to 5'
        """
        parts = [f"grow: {self.kept} trial{_s(self.kept)} kept, {self.new} new"]
        if "scheduler.max_t" in self.changes:
            old, new = self.changes["scheduler.max_t"]
            n = len(self.reopened)
            parts.append(f"{n} trial{_s(n)} continue{'' if n != 1 else 's'} from epoch {old} "
                         f"to {new}")
            if self.stay_stopped:
                k = len(self.stay_stopped)
                parts.append(f"{k} that reached epoch {old} stop{'s' if k == 1 else ''} there "
                             f"(ASHA's rung at epoch {old}, recomputed for max_t {new}); "
                             "trials ASHA stopped earlier stay stopped")
        return "; ".join(parts)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def identity_changes(old: dict[str, str], new: dict[str, str],
                     sweep_dir: Path) -> dict[str, tuple[int, int]]:
    """The growable keys that grew (key -> (old, new)); ``ConfigError`` naming the first key
    that shrank or that may not change.

    Example:
        >>> identity_changes({"scheduler.max_t": "9", "sweep.seed": "0"},
        ...                  {"scheduler.max_t": "15", "sweep.seed": "0"}, Path("/s"))
        {'scheduler.max_t': (9, 15)}
    """
    grown: dict[str, tuple[int, int]] = {}
    where = display(sweep_dir)
    for key in sorted(set(old) | set(new)):
        was, now = old.get(key, "<unset>"), new.get(key, "<unset>")
        if was == now:
            continue
        if key in GROWABLE and was.isdigit() and now.isdigit():
            if int(now) < int(was):
                raise ConfigError(key, int(now), f"is smaller than in the sweep being resumed "
                                  f"in {where} ({was}); a sweep only grows",
                                  f"set {key}={was} or more to resume it, or start a new "
                                  "one with sweep.name=NEW")
            grown[key] = (int(was), int(now))
            continue
        also = (" (a sweep grows in place only by a larger search.num_samples or "
                "scheduler.max_t)") if key not in GROWABLE else ""
        raise ConfigError(key, now, f"differs from the sweep being resumed in {where} (it has "
                          f"{was}){also}", f"set it back to {was} to resume that sweep, or "
                          "start a new one with sweep.name=NEW")
    return grown


def plan_growth(cfg: SweepConfig, changes: dict[str, tuple[int, int]],
                records: list[dict[str, Any]], kept: int) -> Growth:
    """Which trials a grown sweep continues, from its decision log ``records``; ``kept``: the
    trials it already has. ``ConfigError`` for a PBT sweep (it does not grow)."""
    growth = Growth(dict(changes), kept=kept)
    if cfg.scheduler.name == "pbt":
        key = next(iter(changes))
        old, new = changes[key]
        raise ConfigError(key, new, f"cannot grow a scheduler=pbt sweep (it has {old}): PBT "
                          "ranks the trials that run together, so ended trials or new ones "
                          "would form a population of their own",
                          f"set {key}={old} to resume it, or start a new sweep with "
                          "sweep.name=NEW")
    if "scheduler.max_t" not in changes:
        return growth
    old, new = changes["scheduler.max_t"]
    ended, failed = ended_ids(records), read_verdicts(records)
    # Trials that ended by training `old` epochs (not stopped early, not failed), in the order the
    # log first judged them there; then those an earlier start reopened for this same growth that
    # have not ended since (its record was not saved: a kill -9 between the log and the record).
    candidates = list(dict.fromkeys(
        r["trial"] for r in records if r.get("trial") in ended and (r.get("epoch") or 0) >= old
        and not (failed.get(r["trial"]) and failed[r["trial"]].error)))
    candidates += dict.fromkeys(r["trial"] for r in records if r.get("reopen") and "trial" in r
                                and (r.get("from_epoch"), r.get("to_epoch")) == (old, new)
                                and r["trial"] not in ended)
    stops = _rung_stops(cfg, records, old, new) if cfg.scheduler.name == "asha" else set()
    growth.reopened = [t for t in candidates if t not in stops]
    growth.stay_stopped = [t for t in candidates if t in stops]
    return growth


def _rung_stops(cfg: SweepConfig, records: list[dict[str, Any]], old: int, new: int) -> set[str]:
    """Trials the new rungs stop at the old ``max_t``: the log replayed through ASHA with
    ``max_t=new`` (``sweeps.search.asha.replay_record``, as the scheduler replays it; MO-ASHA's
    rungs, ``sweeps.search.moasha``, with several objectives)."""
    s, e = cfg.scheduler, cfg.experiment
    modes = {e.metric: e.mode, **{m: d for m, d in dict(e.metrics).items() if m != e.metric}}
    if len(modes) > 1:
        from sweeps.search.moasha import MOHalving

        halving: AsyncHalving = MOHalving(s.grace_period, new, s.reduction_factor)
    else:
        halving = AsyncHalving(s.grace_period, new, s.reduction_factor)
    return {r["trial"] for r in records  # every record replayed, in order, as the scheduler does
            if replay_record(halving, r, logged_point(r, modes)) and (r.get("epoch") or 0) >= old}


def apply_growth(sweep_dir: Path, growth: Growth, record: Any, resuming: bool) -> list[str]:
    """Reopen the continued trials (Tune's state, then the log) and give ``record`` (the
    ``sweeps.resume.state.SweepRecord``) the grown identity and a line of its history; the
    caller saves the record (last: see the module docstring). Returns the trials Tune's
    state set back to paused (``reopen_trials``)."""
    old, new = growth.changes.get("scheduler.max_t", (0, 0))
    reopened = reopen_trials(sweep_dir, growth.reopened, resuming, from_epoch=old, to_epoch=new)
    record.identity.update({key: str(now) for key, (_, now) in growth.changes.items()})
    record.growth.append({"start": record.starts + 1,
                          **{key: [was, now] for key, (was, now) in growth.changes.items()}})
    return reopened


def reopen_trials(sweep_dir: Path, trials: list[str], resuming: bool, **fields: Any) -> list[str]:
    """Ended ``trials`` run again on this start: set back to paused in Tune's saved state
    (when it is restored), then a ``reopen`` record each in the decision log (with
    ``fields``), which its readers take as "not ended" (``sweeps.search.decisions``).
    Returns the ones Tune's state held as ended (a trial it lacks, or already holds as not
    ended, is not one Tune restores from ended to pending)."""
    changed: list[str] = []
    if trials and resuming:
        from sweeps._ray.tune_grow import reopen_in_state

        changed = reopen_in_state(sweep_dir, trials)
    log = decision_log(sweep_dir)
    for trial in trials:
        log.append({"trial": trial, "reopen": True, **fields, "t": round(time.time(), 3)})
    return changed


def grid_note(cfg: SweepConfig, last_config: dict[str, Any] | None) -> str | None:
    """For a grid sweep resumed with another ``search.num_samples``: why nothing is added."""
    if cfg.search.algorithm != "grid" or last_config is None:
        return None
    was = (last_config.get("search") or {}).get("num_samples")
    if was is None or was == cfg.search.num_samples:
        return None
    return (f"search=grid: search.num_samples ({was} -> {cfg.search.num_samples}) does not "
            "apply to a grid, whose every point runs once; growing it adds no trial (extend "
            "the grid's choice(...)/range(...) values in a new sweep instead)")


def trials_kept(sweep_dir: Path) -> int:
    """How many trials Tune's newest saved state holds (0 when none or unreadable)."""
    found = experiment_state_files(sweep_dir)
    try:
        return len(trials_in_state(json.loads(files.read_text(found[-1])))) if found else 0
    except (OSError, ValueError, KeyError, TypeError):
        return 0  # check_tune_state says why, before anything runs


def last_config(sweep_dir: Path, starts: int) -> dict | None:
    """The config the sweep's last start ran with (``SweepLayout.config``), if readable."""
    try:
        return yaml.safe_load(files.read_text(SweepLayout(sweep_dir).config(starts)))
    except (OSError, ValueError, yaml.YAMLError):
        return None
