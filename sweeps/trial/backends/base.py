"""The trial-backend interface: how one Tune trial runs its loop, and what that costs.

    backend = backend_for(plan.executor)          # sweeps.trial.backends (the registry)
    backend().run(attempt)                        # sweeps.trial.driver.run_trial, per trial

A backend answers, before Ray starts (in the sweep driver, ``sweeps.driver.prepare``), what it
refuses (``refusal``) and whether ``trial.executor=auto`` picks it (``chosen_by_auto``); while
Tune is set up (``sweeps.driver.tuner``), what it builds for its trials (``options``), what
each trial reserves (``trial_resources``) and whether a trial process may run the next trial
(``reuses_process``); and in the Tune trial process (``sweeps.trial.driver``), ``run``: run
the trial's loop until it returns or Tune stops it, restoring from the run directory's latest
checkpoint and restarting up to ``trial.max_failures`` times, and raising the failing rank's
own error. What a backend keeps between trials (an inline trial's peers) it releases itself
when a failed attempt or the trial process ends; a Train run's workers are released by the
sweep's reaper (``sweeps.placement``).

Every backend writes the same run directory (checkpoints, Train's run snapshot, the report
log, the clock), so resume, the best checkpoint and MLflow read any backend's trials, and a
trial may change backend between runs of the sweep (docs/backends.md#the-conformance-suite).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from sweeps.config.schema import SweepConfig
    from sweeps.trial.clock import TrialClock
    from sweeps.trial.plan import TrialPlan

__all__ = ["BackendRequest", "Refusal", "TrialAttempt", "TrialBackend"]


@dataclass(frozen=True)
class BackendRequest:
    """What decides which backend may run a sweep's trials, known before Ray starts.

    Example:
        >>> BackendRequest(num_workers=2, use_gpu=False).cluster
        False
    """

    num_workers: int
    use_gpu: bool
    datasets: bool = False  # experiment.datasets is set
    cluster: bool = False  # the sweep joins a Ray cluster (ray.address)
    trainable: str | None = None  # experiment.trainable: a backend may read the loop's source
    elastic: bool = False  # scaling.num_workers=[min, max]; num_workers is then the min


@dataclass(frozen=True)
class Refusal:
    """Why a backend cannot run a sweep's trials: ``rule`` completes "trial.executor: 'NAME'
    ...", ``fix`` says what to set; ``note`` is what the plan says when ``auto`` passes the
    backend over for this reason (None: nothing, the choice is the expected one)."""

    rule: str
    fix: str
    note: str | None = None


@dataclass
class TrialAttempt:
    """One run of a trial's loop on a backend, as ``run_trial`` hands it over: the restored
    clock, and the reports re-handed to Tune before it (``unseen``)."""

    plan: TrialPlan
    trial_id: str
    run_dir: Path
    config: dict[str, Any]
    clock: TrialClock
    unseen: int = 0


class TrialBackend(ABC):
    """One way to run a trial's loop; see the module docstring for who calls what, where."""

    name: ClassVar[str]  # the trial.executor value that names it

    @classmethod
    @abstractmethod
    def refusal(cls, request: BackendRequest) -> Refusal | None:
        """Why this backend cannot run these trials; None if it can."""

    @classmethod
    @abstractmethod
    def chosen_by_auto(cls, request: BackendRequest) -> bool:
        """Whether ``trial.executor=auto`` runs these trials here (asked in registry order)."""

    @classmethod
    def options(cls, cfg: SweepConfig, resources: Any) -> Any:
        """``backend_for(plan.executor).options(cfg, plan)`` in ``trial_plan``: what only this
        backend's trials read (``TrialPlan.backend_options``), built once per sweep from the
        config and its ``ResourcePlan``; None: nothing."""
        return None

    @classmethod
    @abstractmethod
    def trial_resources(cls, plan: TrialPlan) -> Any:
        """What Tune reserves for one trial: a resource dict or a ``PlacementGroupFactory``."""

    @classmethod
    @abstractmethod
    def describe(cls, num_workers: int, ddp_backend: str, api: str = "train") -> str | None:
        """The dry-run plan's words for how a trial runs (None: just the DDP backend);
        ``api``: the loop's (``sweeps.config.loop_api``)."""

    @classmethod
    def reuses_process(cls, reuse_process: bool, scheduler: str) -> bool:
        """Whether a trial process runs the next trial too (Tune's ``reuse_actors``), given
        ``trial.reuse_process`` and ``scheduler.name``."""
        return reuse_process

    @abstractmethod
    def run(self, attempt: TrialAttempt) -> None:
        """Run the trial's loop until it returns or Tune stops it (see the module docstring)."""
