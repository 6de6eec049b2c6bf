"""The Optuna sampler of a sweep, built from config and tried out before Ray starts.

    python -m sweeps +experiment=digits search=optuna \\
        search.sampler._target_=optuna.samplers.CmaEsSampler ++search.sampler.sigma0=0.5

``search=tpe`` is ``TPESampler(**sweeps.search.defaults.tpe_arguments(cfg, conditional))``.
``search=optuna`` instantiates ``search.sampler``: ``_target_`` must name a sampler class in
``optuna.samplers`` (nothing else is imported, so a config cannot run arbitrary code), the other
keys are its arguments, checked against its signature, and a nested ``{_target_: ...}`` (e.g.
CMA-ES's ``independent_sampler``) is built by the same rule; ``seed`` defaults to ``sweep.seed``.
``check_sampler`` runs the sampler on a throwaway in-memory study over the sweep's own space and
objectives (what it catches: docs/experiments.md#search-algorithms-schedulers-and-objectives).
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import logging
import re
import warnings
from typing import TYPE_CHECKING, Any

from sweeps.errors import ConfigError
from sweeps.search.defaults import tpe_arguments
from sweeps.search.optuna_space import DefineByRun
from sweeps.search.space import Param

if TYPE_CHECKING:
    import optuna

    from sweeps.config.schema import SweepConfig

__all__ = ["build_sampler", "check_sampler", "sampler_name", "MODULE"]

MODULE = "optuna.samplers"
KEY = "search.sampler"
UNBUILDABLE = ("GridSampler", "PartialFixedSampler")  # need Python objects, not config values
MULTI_OBJECTIVE = ("TPESampler", "NSGAIISampler", "NSGAIIISampler", "GPSampler", "QMCSampler",
                   "RandomSampler")


def sampler_name(cfg: SweepConfig) -> str:
    """The sampler's class name, e.g. ``TPESampler`` (``-`` for random and grid search)."""
    if cfg.search.algorithm == "tpe":
        return "TPESampler"
    if cfg.search.algorithm == "optuna":
        return str(cfg.search.sampler.get("_target_", "")).rpartition(".")[2]
    return "-"


def build_sampler(cfg: SweepConfig, warn: bool = False,
                  conditional: bool = False) -> optuna.samplers.BaseSampler:
    """The sampler ``cfg`` asks for (``search=tpe`` or ``search=optuna``), seeded; ``warn``:
    whether it logs each param it samples independently (per trial; the plan says it once);
    ``conditional``: whether the space has conditional params (TPE then groups them).

    Example:
        >>> cfg = compose("digits", ["search=optuna",
        ...     "search.sampler._target_=optuna.samplers.QMCSampler"])
        >>> type(build_sampler(cfg)).__name__
        'QMCSampler'
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if cfg.search.algorithm == "tpe":
        with warnings.catch_warnings():  # group=True is "experimental" since Optuna 2.8
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(**tpe_arguments(cfg, conditional))
    return _instantiate(dict(cfg.search.sampler), KEY, cfg.sweep.seed, warn)


def _instantiate(spec: dict[str, Any], key: str, seed: int,
                 warn: bool) -> optuna.samplers.BaseSampler:
    import optuna

    target = spec.pop("_target_", None)
    names = sorted(n for n, v in vars(optuna.samplers).items()
                   if isinstance(v, type) and issubclass(v, optuna.samplers.BaseSampler)
                   and not inspect.isabstract(v) and not n.startswith("Base"))
    choices = ", ".join(f"{MODULE}.{n}" for n in names if n not in UNBUILDABLE)
    if not isinstance(target, str) or not target:
        raise ConfigError(f"{key}._target_", target, "is missing",
                          f"name the sampler, e.g. {key}._target_={MODULE}.CmaEsSampler")
    module, _, name = target.rpartition(".")
    if module != MODULE or name not in names:
        close = ([n for n in names if name and n.lower().startswith(name.lower())]
                 or difflib.get_close_matches(name, names, n=1))
        hint = f"did you mean {MODULE}.{close[0]}? " if close else ""
        why = (f"is not a sampler of {MODULE}" if module == MODULE else
               f"is outside {MODULE}, the only module a sampler is taken from")
        raise ConfigError(f"{key}._target_", target, why, f"{hint}use one of: {choices}")
    if name == "GridSampler":
        raise ConfigError(f"{key}._target_", target, "needs the grid spelled out in Python",
                          "use search=grid: the space's choice(...) and range(...) are the grid")
    cls = getattr(optuna.samplers, name)
    signature = inspect.signature(cls)
    kwargs = {k: (_instantiate(dict(v), f"{key}.{k}", seed, warn)
                  if isinstance(v, dict) and "_target_" in v else v) for k, v in spec.items()}
    if "seed" in signature.parameters and "seed" not in kwargs:
        kwargs["seed"] = seed
    if "warn_independent_sampling" in signature.parameters and name != "TPESampler":
        kwargs.setdefault("warn_independent_sampling", warn)  # the plan says it once instead
        # (TPE's is deprecated in Optuna 4.9, and TPE only warns when multivariate)
    accepted = [p for p in signature.parameters if p not in ("self", "args", "kwargs")]
    for arg in kwargs:
        if arg not in signature.parameters:
            close = difflib.get_close_matches(arg, accepted, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(f"{key}.{arg}", kwargs[arg], f"is not an argument of {name}",
                              f"{hint}{name} takes: {', '.join(accepted)}")
    try:
        signature.bind(**kwargs)
        return cls(**kwargs)
    except Exception as exc:  # a missing required argument, or the sampler refused a value
        raise ConfigError(key, {"_target_": target, **spec}, f"cannot build {name} "
                          f"({type(exc).__name__}: {exc})",
                          f"fix the arguments; {name} takes: {', '.join(accepted)}") from exc


def check_sampler(cfg: SweepConfig, params: list[Param], objectives: dict[str, str],
                  rounds: int = 4) -> list[str]:
    """Run the sweep's sampler for ``rounds`` trials of a throwaway study over ``params`` and
    ``objectives``; raise ``ConfigError`` naming the sampler if it fails. Returns warnings
    (params the sampler does not model).

    Example:
        >>> check_sampler(compose("digits"), [Param("x", "float", low=0.0, high=1.0)],
        ...               {"val_acc": "max"})
        []
    """
    import optuna

    conditional = any(p.when for p in params)
    sampler = build_sampler(cfg, warn=True, conditional=conditional)
    name = type(sampler).__name__
    directions = ["minimize" if m == "min" else "maximize" for m in objectives.values()]
    notes = _Notes()
    optuna_log = optuna.logging.get_logger("optuna")
    optuna_log.addHandler(notes)
    optuna.logging.disable_default_handler()  # the throwaway study's chatter stays unseen
    try:
        _probe(sampler, params, directions, rounds)
    except Exception as exc:
        alone_ok = False  # several objectives, and fine with one?
        if len(objectives) > 1:
            with contextlib.suppress(Exception):
                _probe(build_sampler(cfg, conditional=conditional), params, ["maximize"], rounds)
                alone_ok = True
        if alone_ok:
            fix = (f"for {len(objectives)} objectives use one of "
                   f"{', '.join(f'{MODULE}.{n}' for n in MULTI_OBJECTIVE)}")
        else:
            fix = (f"pick another sampler, e.g. {MODULE}.TPESampler, or give the space what "
                   f"{name} needs")
        raise ConfigError(f"{KEY}._target_" if cfg.search.algorithm == "optuna" else
                          "search.algorithm", f"{MODULE}.{name}",
                          f"cannot sample this sweep ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:200]})", fix) from exc
    finally:
        optuna_log.removeHandler(notes)
        optuna.logging.enable_default_handler()
    if notes.independent:
        return [f"{name} models only some of these params; it samples "
                f"{', '.join(sorted(notes.independent))} at random (Optuna's independent "
                "sampler: categorical or conditional params)"]
    return []


def _probe(sampler: Any, params: list[Param], directions: list[str], rounds: int) -> None:
    """``rounds`` trials of a throwaway study (fewer if the sampler stops it: brute force over
    a small space)."""
    import optuna

    space = DefineByRun(params)

    def objective(trial: optuna.Trial) -> list[float]:
        space(trial)
        return [float(trial.number)] * len(directions)

    optuna.create_study(directions=directions, sampler=sampler).optimize(
        objective, n_trials=rounds, catch=())


class _Notes(logging.Handler):
    """Collects the params Optuna says it sampled independently (its per-trial warning)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.independent: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        match = re.search(r"parameter `([^`]+)` in Trial#\d+ is sampled independently",
                          record.getMessage())
        if match:
            self.independent.add(match.group(1).replace("/", "."))
