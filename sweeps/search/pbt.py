"""Population Based Training on the trial clock, with a replayable decision log.

    python -m sweeps +experiment=digits scheduler=pbt search=random scheduler.max_t=8
    scheduler = ResumablePBT(sweep_dir, objective, params, cfg.scheduler, seed=cfg.sweep.seed)

Every ``perturbation_interval`` epochs of a trial's clock (``sweeps_epoch``), a bottom trial
exploits a top one and explores (docs/experiments.md#search-algorithms-schedulers-and-objectives):
the scheduler freezes the donor's checkpoint, appends the decision (a ``PAUSE`` record with an
``exploit``) to ``state/scheduler.jsonl`` and returns ``PAUSE``; ``sweeps.trial.exploit`` seeds
the restarted trial from the frozen checkpoint. Every draw comes from ``decision_rng``.
Like ``ResumableFIFO``, it stops a trial at ``max_t`` and screens results
(``sweeps.search.scheduler_log``). A PAUSE record is neither an end nor a stop for
``ended_trials`` and ``verdicts``.

The hand-over step by step, the record's fields, and where and why this departs from Ray's
``PopulationBasedTraining``: docs/development.md#pbts-hand-over-and-where-it-departs-from-rays.
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from sweeps._ray.tune import set_trial_config
from sweeps.config.schema import SchedulerSection
from sweeps.errors import ConfigError
from sweeps.layout import SweepLayout
from sweeps.protocol import CHECKPOINT_PATH_KEY, CLOCK_KEY
from sweeps.search.checks import mutated
from sweeps.search.outcome import Objective
from sweeps.search.ranges import grid_point, point_count
from sweeps.search.scheduler_log import _Logged
from sweeps.search.space import Param, deep_merge, flatten, unflatten

# Up a layer on purpose: the exploit is a hand-over between this scheduler and the
# trial it restarts; one module owns its file format.
from sweeps.trial.exploit import freeze_donor

__all__ = ["ResumablePBT", "explore", "quantiles", "decision_rng", "FACTORS"]

log = logging.getLogger(__name__)
FACTORS = (1.2, 0.8)  # Ray's default perturbation_factors, in Ray's order


def decision_rng(seed: int, trial_id: str, clock: float, generation: int) -> random.Random:
    """The generator of one exploit decision (donor draw, then explore).

    Example:
        >>> decision_rng(0, "a", 2, 1).random() == decision_rng(0, "a", 2.0, 1).random()
        True
    """
    return random.Random(f"{seed}/{trial_id}/{clock:g}/{generation}")


def _draw(p: Param, rng: random.Random) -> Any:
    """A fresh value from ``p``'s distribution (bounds inclusive, grid points equally likely)."""
    if p.kind == "choice":
        return rng.choice(p.choices)
    lo, hi = float(p.low), float(p.high)  # type: ignore[arg-type]
    if p.log:
        return p.snap(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    if p.step or p.kind == "int":
        last = point_count(p.low, p.high, p.step or 1) - 1  # type: ignore[arg-type]
        return grid_point(p.low, p.step or 1, rng.randint(0, last),  # type: ignore[arg-type]
                          p.kind == "int")
    return p.snap(rng.uniform(lo, hi))


def explore(config: dict[str, Any], params: list[Param], rng: random.Random,
            resample_probability: float) -> tuple[dict[str, Any], dict[str, str]]:
    """(explored flat config, {param path: what was done}) from a donor's flat ``config``.

    Example:
        >>> p = [Param("lr", "float", low=0.01, high=0.1), Param("opt", "choice",
        ...      choices=("sgd", "adam"))]
        >>> explore({"lr": 0.05, "opt": "sgd"}, p, random.Random(1), 0.0)
        ({'lr': 0.06, 'opt': 'adam'}, {'lr': '* 1.2', 'opt': 'shift right'})
    """
    out, ops = dict(config), {}
    for p in params:
        value = config.get(p.path)
        if p.kind == "choice":
            if rng.random() < resample_probability or value not in p.choices:
                out[p.path], ops[p.path] = rng.choice(p.choices), "resample"
                continue
            shift = rng.choice((-1, 1))
            old = p.choices.index(value)
            new = min(max(old + shift, 0), len(p.choices) - 1)
            out[p.path] = p.choices[new]
            ops[p.path] = f"shift {'left' if shift == -1 else 'right'}" + (
                " (noop)" if new == old else "")
        elif rng.random() < resample_probability or not isinstance(value, int | float):
            out[p.path], ops[p.path] = _draw(p, rng), "resample"
        else:
            factor = rng.choice(FACTORS)
            out[p.path], ops[p.path] = p.snap(value * factor), f"* {factor}"
    return out, ops


def quantiles(scores: dict[str, float], fraction: float) -> tuple[list[str], list[str]]:
    """(bottom, top) trial ids by ``scores`` (signed: higher is better), as Ray's PBT cuts
    them: ``ceil(n * fraction)`` each, at most ``n // 2``; nothing below two trials.

    Example:
        >>> quantiles({"a": 0.1, "b": 0.9, "c": 0.5, "d": 0.5}, 0.25)
        (['a'], ['b'])
    """
    ranked = sorted(scores, key=lambda t: (scores[t], t))
    if len(ranked) <= 1:
        return [], []
    n = min(math.ceil(len(ranked) * fraction), len(ranked) // 2)
    return ranked[:n], ranked[len(ranked) - n:]


@dataclass
class _Member:
    """What the scheduler knows of one trial: its latest judged result."""

    clock: float = 0.0
    score: float | None = None  # signed: higher is better
    value: float | None = None
    checkpoint: str | None = None
    last_perturb: float = 0.0
    generation: int = 0  # exploits applied to it so far


class ResumablePBT(_Logged, FIFOScheduler):
    """Population Based Training with a replayable decision log (see the module docstring)."""

    def __init__(self, sweep_dir: str | Path, objective: Objective, params: list[Param],
                 scheduler: SchedulerSection, seed: int) -> None:
        FIFOScheduler.__init__(self)
        s = scheduler
        if not s.perturbation_interval >= 1:
            raise ConfigError("scheduler.perturbation_interval", s.perturbation_interval,
                              "must be >= 1 (epochs)", "set scheduler.perturbation_interval=2")
        if not 0 < s.quantile_fraction <= 0.5:
            raise ConfigError("scheduler.quantile_fraction", s.quantile_fraction,
                              "must be in (0, 0.5]", "set scheduler.quantile_fraction=0.25")
        if not 0 <= s.resample_probability <= 1:
            raise ConfigError("scheduler.resample_probability", s.resample_probability,
                              "must be in [0, 1]", "set scheduler.resample_probability=0.25")
        self._params, self._seed = list(params), int(seed)
        self._mutated = mutated(params, s.mutate)  # the rest are copied from the donor
        self._interval, self._fraction = float(s.perturbation_interval), s.quantile_fraction
        self._resample = s.resample_probability
        self._sign = 1.0 if objective.mode == "max" else -1.0
        self._members: dict[str, _Member] = {}
        self._configs: dict[str, dict[str, Any]] = {}  # trial -> flat searched values
        self._exploits = 0
        self._init_log(sweep_dir, objective, 1)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled empty: the log, replayed on first use, is what fills the population."""
        return {**super().__getstate__(), "_members": {}, "_configs": {}, "_exploits": 0}

    # Tune's hooks

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        self._ensure_replayed()
        tid, flat = trial.trial_id, self._searched(trial.config or {})
        logged = self._configs.get(tid)
        if logged is not None and self._members.get(tid, _Member()).generation and logged != flat:
            # Exploited before an interruption that Tune's saved state did not see.
            set_trial_config(trial, deep_merge(trial.config or {}, unflatten(logged)))
        else:
            self._configs[tid] = flat
        self.hold_past_cap(tune_controller, trial)  # as FIFO and ASHA: past the trial limit

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict) -> str:
        self._ensure_replayed()
        tid = trial.trial_id
        if tid in self._ended:
            return TrialScheduler.STOP
        result, error = self._screen(tid, result)
        if error:
            return self._fail(tid, result, error)
        clock, value = result.get(CLOCK_KEY), result.get(self._objective.metric)
        if clock is None or value is None:
            return (TrialScheduler.STOP if clock is not None and clock >= self._objective.budget
                    else TrialScheduler.CONTINUE)
        checkpoint = result.get(CHECKPOINT_PATH_KEY)
        fields: dict[str, Any] = {"epoch": clock, "value": value, "checkpoint": checkpoint}
        member = self._observe(tid, fields)
        if clock >= self._objective.budget:
            self._record(tid, result, **fields, action=TrialScheduler.STOP)
            return TrialScheduler.STOP
        if clock - member.last_perturb < self._interval:
            self._record(tid, result, **fields, action=TrialScheduler.CONTINUE)
            return TrialScheduler.CONTINUE
        member.last_perturb = clock
        exploit = self._plan(tid, clock)
        if exploit is None:
            self._record(tid, result, **fields, action=TrialScheduler.CONTINUE, perturb=True)
            return TrialScheduler.CONTINUE
        self._record(tid, result, **fields, action=TrialScheduler.PAUSE, perturb=True,
                     exploit=exploit)  # fsync'ed before Tune hears of it
        self._apply(tid, exploit)
        set_trial_config(trial, deep_merge(trial.config or {}, unflatten(exploit["config"])))
        log.info("pbt: trial %s (epoch %g) continues from %s's epoch %g checkpoint with %s",
                 tid, clock, exploit["donor"], exploit["donor_epoch"], exploit["changed"])
        return TrialScheduler.PAUSE

    def debug_string(self) -> str:
        self._ensure_replayed()
        return f"PopulationBasedTraining: {self._exploits} exploits"

    # State

    def _searched(self, config: dict[str, Any]) -> dict[str, Any]:
        flat = flatten(config)
        return {p.path: flat[p.path] for p in self._params if p.path in flat}

    def _observe(self, tid: str, fields: dict[str, Any]) -> _Member:
        member = self._members.setdefault(tid, _Member())
        member.clock, member.value = float(fields["epoch"]), fields["value"]
        member.score = self._sign * float(fields["value"])
        member.checkpoint = fields.get("checkpoint") or member.checkpoint
        return member

    def _replay(self, record: dict[str, Any]) -> None:
        if record.get("epoch") is None or record.get("value") is None:
            return
        member = self._observe(record["trial"], record)
        if record.get("perturb"):
            member.last_perturb = float(record["epoch"])
        if record.get("exploit"):
            self._apply(record["trial"], record["exploit"])

    def _apply(self, tid: str, exploit: dict[str, Any]) -> None:
        """The exploited trial now stands where its donor stood, with the explored values."""
        member = self._members.setdefault(tid, _Member())
        member.clock = member.last_perturb = float(exploit["donor_epoch"])
        member.checkpoint = None  # its own run directory is replaced at restart
        member.generation = int(exploit["generation"])
        self._configs[tid] = dict(exploit["config"])
        self._exploits += 1

    def _plan(self, tid: str, clock: float) -> dict[str, Any] | None:
        """The exploit of trial ``tid`` at ``clock``, its donor's checkpoint frozen; None when
        it is not in the bottom quantile or no top trial has a checkpoint."""
        scores = {t: m.score for t, m in self._members.items()
                  if m.score is not None and t not in self._ended}
        bottom, top = quantiles(scores, self._fraction)  # type: ignore[arg-type]
        if tid not in bottom:
            return None
        donors = [t for t in top if self._members[t].checkpoint and t in self._configs]
        if not donors:
            log.info("pbt: no trial of the top quantile has a checkpoint; %s goes on", tid)
            return None
        generation = self._members[tid].generation + 1
        rng = decision_rng(self._seed, tid, clock, generation)
        donor = rng.choice(donors)
        config, ops = explore(self._configs[donor], self._mutated, rng, self._resample)
        source = self._members[donor]
        try:
            frozen = freeze_donor(SweepLayout(Path(self._log_dir)).train, tid, generation,
                                  str(source.checkpoint), donor)
        except OSError as exc:  # the donor's checkpoint is gone (deleted by hand?)
            log.warning("pbt: cannot copy %s's checkpoint %s (%s); %s goes on", donor,
                        source.checkpoint, exc, tid)
            return None
        old = self._configs.get(tid, {})
        return {"generation": generation, "donor": donor, "donor_epoch": source.clock,
                "donor_value": source.value, "checkpoint": source.checkpoint, "frozen": frozen,
                "config": config, "ops": ops,
                "changed": {k: [old.get(k), v] for k, v in config.items() if old.get(k) != v}}
