"""What the sweep tells a trial's training loop, kept out of the loop's ``config``.

    import sweeps

    def train_func(config):                      # config: this trial's hyperparameters only
        ctx = sweeps.trial_context()             # the sweep's side of the trial
        for epoch in range(ctx.max_epochs): ...

A loop written from Ray Train's docs never needs this: its ``config`` holds the experiment's
``params`` merged with the trial's sampled values and nothing else. The epoch budget, seed,
checkpoint cadence and metric live here instead, set in every Train worker by the trial's entry
point (``sweeps.loop.worker``) before the loop is called.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrialContext", "trial_context", "in_trial"]


@dataclass(frozen=True)
class TrialContext:
    """The sweep's context of one trial, as seen by each of its Train workers."""

    trial_id: str
    run_dir: str  # <sweep dir>/train/<trial id>: Train's run directory of this trial
    max_epochs: int  # scheduler.max_t: the trial's epoch budget
    checkpoint_every: int  # checkpoint.every
    seed: int  # sweep.seed
    metric: str  # experiment.metric
    mode: str  # experiment.mode: "min" or "max"
    system_metrics: bool = False  # tracking.system_metrics (sweeps.loop.system_metrics)


_current: TrialContext | None = None


def _set(context: TrialContext | None) -> None:
    global _current
    _current = context


def in_trial() -> bool:
    """Whether this process runs a sweep trial's training loop."""
    return _current is not None


def trial_context() -> TrialContext:
    """The running trial's context; ``RuntimeError`` outside a sweep's Train worker.

    Example:
        >>> trial_context().max_epochs  # in a trial's loop  # doctest: +SKIP
        9
        >>> trial_context()  # anywhere else
        Traceback (most recent call last):
        ...
        RuntimeError: sweeps.trial_context() is only available inside a training loop that ...
    """
    if _current is None:
        raise RuntimeError("sweeps.trial_context() is only available inside a training loop that "
                           "a sweep runs (python -m sweeps +experiment=NAME)")
    return _current
