"""Trial backends: the registry, and the one place ``trial.executor`` is read.

    name, notes = choose_backend(cfg.trial.executor, request)   # sweeps.driver.resources
    backend_for(plan.executor)().run(attempt)                   # sweeps.trial.driver

``train`` runs each trial as a Ray Train ``TorchTrainer`` run (the reference every other
backend is measured against); ``inline`` runs the loop in the Tune trial process, with ranks
1.. in peer processes it keeps. A new backend is a module implementing
``sweeps.trial.backends.base.TrialBackend`` and one line in ``BACKENDS``; the conformance suite
(``tests/conformance``) then runs the corpus on it too. Importing this package imports no Ray.
"""

from __future__ import annotations

from sweeps.errors import ConfigError
from sweeps.trial.backends.base import BackendRequest, Refusal, TrialAttempt, TrialBackend
from sweeps.trial.backends.inline import InlineBackend
from sweeps.trial.backends.train import TrainBackend

__all__ = ["AUTO", "BACKENDS", "DEFAULT", "BackendRequest", "Refusal", "TrialAttempt",
           "TrialBackend", "backend_for", "check_executor", "choose_backend"]

BACKENDS: dict[str, type[TrialBackend]] = {"train": TrainBackend, "inline": InlineBackend}
DEFAULT = "train"  # what auto falls back to: Ray Train itself
AUTO = "auto"


def backend_for(name: str) -> type[TrialBackend]:
    """The backend class ``trial.executor`` (resolved) names.

    Example:
        >>> backend_for("inline").name
        'inline'
        >>> backend_for("auto")
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: trial.executor: 'auto' must be resolved to one of train, ...
    """
    check_executor(name)
    if name == AUTO:  # choose_backend resolves it before any plan is made
        raise ConfigError("trial.executor", name,
                          f"must be resolved to one of {', '.join(BACKENDS)} (choose_backend)",
                          "pass the plan's resolved executor")
    return BACKENDS[name]


def check_executor(executor: str) -> None:
    """Refuse a ``trial.executor`` that names no backend (before Ray starts).

    Example:
        >>> check_executor("local")
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: trial.executor: 'local' must be one of auto, train, inline; ...
    """
    if executor != AUTO and executor not in BACKENDS:
        raise ConfigError("trial.executor", executor,
                          f"must be one of {', '.join([AUTO, *BACKENDS])}",
                          "set trial.executor=auto")


def choose_backend(executor: str, request: BackendRequest) -> tuple[str, list[str]]:
    """``trial.executor`` resolved to a backend name, and what the plan should say about the
    choice. ``auto`` asks every backend but the default, in ``BACKENDS`` order, whether it
    takes these trials (and does not refuse them); else the default. A named backend, or
    under ``auto`` the default, that refuses the trials raises ``ConfigError`` with its reason.

    Example:
        >>> choose_backend("auto", BackendRequest(num_workers=2, use_gpu=False))
        ('inline', [])
        >>> choose_backend("auto", BackendRequest(num_workers=2, use_gpu=True))
        ('train', [])
    """
    check_executor(executor)
    if executor != AUTO:
        refused = BACKENDS[executor].refusal(request)
        if refused is not None:
            raise ConfigError("trial.executor", executor, refused.rule, refused.fix)
        return executor, []
    notes = []
    for name, backend in BACKENDS.items():
        if name == DEFAULT or not backend.chosen_by_auto(request):
            continue
        refused = backend.refusal(request)
        if refused is None:
            return name, []
        if refused.note:
            notes.append(refused.note)
    refused = BACKENDS[DEFAULT].refusal(request)
    if refused is not None:  # no backend takes these trials
        raise ConfigError("trial.executor", executor, refused.rule, refused.fix)
    return DEFAULT, notes
