"""The search space as Optuna sees it: a define-by-run function and its distributions.

    OptunaSearch(space=DefineByRun(params), metric=..., mode=..., sampler=...)

Every Optuna-backed search (``search=tpe``, ``search=optuna``) asks Optuna for values through
``DefineByRun``: conditional params (``sweeps.search.conditions``) are asked only when their
condition holds, so a trial where it does not has no such key at all. Names are the dotted
paths with ``/`` for ``.``, the separator Ray's ``OptunaSearch`` nests its results by
(``model.hidden`` is asked as ``model/hidden`` and reaches the loop as ``{"model": {"hidden":
...}}``), the same names Ray gave a static space; a sweep started before this module resumes
with its pickled searcher (``sweeps.search.searchers.tune_param_space``).

Each expression's distribution: the table in ``sweeps.search.space`` (bounds inclusive; a
stepped float's suggestions put back on the exact points). ``hi`` is always a point of the range
(``sweeps.search.ranges`` checks it as Optuna does, on the decimals), so Optuna never lowers
``high`` (what it does, with a warning, for a range its step does not divide).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sweeps.search.space import Param

if TYPE_CHECKING:
    import optuna

__all__ = ["DefineByRun", "distribution", "optuna_name", "optuna_params"]


def optuna_name(path: str) -> str:
    """The name Optuna knows a dotted param by.

    Example:
        >>> optuna_name("model.hidden")
        'model/hidden'
    """
    return path.replace(".", "/")


def distribution(p: Param) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of one param (what ``DefineByRun`` asks it for).

    Example:
        >>> distribution(Param("d", "int", low=1, high=3, step=1))
        IntDistribution(high=3, log=False, low=1, step=1)
    """
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if p.kind == "choice":
        return CategoricalDistribution(list(p.choices))
    if p.kind == "int":
        return IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
    return FloatDistribution(float(p.low), float(p.high), log=p.log,
                             step=float(p.step) if p.step else None)


def optuna_params(values: dict[str, Any], params: list[Param]) -> tuple[dict, dict]:
    """(params, distributions) of one finished trial in Optuna's names, for
    ``optuna.trial.create_trial``: ``values`` (flat dotted keys) must hold every param that
    applies to it (``Param.applies``) and may hold others, which are left out.

    Example:
        >>> optuna_params({"lr": 0.1, "x": 1}, [Param("lr", "float", low=0.01, high=1.0)])[0]
        {'lr': 0.1}
    """
    used = [p for p in params if p.applies(values) and p.path in values]
    return ({optuna_name(p.path): values[p.path] for p in used},
            {optuna_name(p.path): distribution(p) for p in used})


class DefineByRun:
    """Ray ``OptunaSearch``'s ``space``: asks the trial for each param that applies, parents
    first (``parse_space`` orders them so). Picklable: Tune saves the searcher with it.

    Returns the stepped float values put back on their exact points (``Param.snap``), which
    Ray's ``OptunaSearch`` gives the trial in place of what Optuna suggested: Optuna computes
    ``low + k * step`` in floats (0.30000000000000004 for ``range(0.1, 0.9, 0.2)``) and keeps
    that in its study, a distance it tolerates (``FloatDistribution`` allows 1e-8 of a step).
    """

    def __init__(self, params: list[Param]) -> None:
        self.params = list(params)

    def __call__(self, trial: optuna.Trial) -> dict[str, Any]:
        values: dict[str, Any] = {}
        exact: dict[str, Any] = {}
        for p in self.params:
            if p.applies(values):
                values[p.path] = _suggest(trial, p)
                if p.kind == "float" and p.step:
                    values[p.path] = exact[optuna_name(p.path)] = p.snap(values[p.path])
        return exact

    def __repr__(self) -> str:
        return f"DefineByRun({[p.path for p in self.params]})"


def _suggest(trial: optuna.Trial, p: Param) -> Any:
    name = optuna_name(p.path)
    if p.kind == "choice":
        return trial.suggest_categorical(name, list(p.choices))
    if p.kind == "int":
        return trial.suggest_int(name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
    return trial.suggest_float(name, float(p.low), float(p.high),
                               step=float(p.step) if p.step else None, log=p.log)
