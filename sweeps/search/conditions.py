"""Conditional search-space entries: a parameter that exists only under a choice of another.

    experiment:
      search_space:
        optimizer: choice(sgd, adam)
        momentum:
          when: {optimizer: sgd}              # sampled only when optimizer=sgd
          sample: interval(0.5, 0.99)
        beta1:
          when: {optimizer: [adam, adamw]}    # any of several values
          sample: interval(0.8, 0.99)

``parse_space`` (``sweeps.search.space``) calls ``resolve_conditions`` with the ``when`` of every
such entry (the rules: docs/experiments.md#conditional-parameters). The params come back parents
first, the order a define-by-run sampler asks them in (``sweeps.search.optuna_space``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sweeps.errors import SearchSpaceError
from sweeps.search.nested import same_value

__all__ = ["is_conditional", "resolve_conditions"]


def is_conditional(node: Any) -> bool:
    """Whether a search-space node is a conditional entry (a mapping with a ``when`` or a
    ``sample`` key; ``parse_space`` then requires exactly both).

    Example:
        >>> is_conditional({"when": {"opt": "sgd"}, "sample": "interval(0, 1)"}), is_conditional(1)
        (True, False)
    """
    return isinstance(node, dict) and ("when" in node or "sample" in node)


def resolve_conditions(params: list[Any], conditions: dict[str, Any]) -> list[Any]:
    """``params`` with each conditional one's ``when`` filled in from ``conditions`` (path ->
    the entry's ``when`` mapping), ordered parents first; raises ``SearchSpaceError``.

    Example:
        >>> from sweeps.search.space import Param
        >>> ps = [Param("m", "float", 0.1, 0.9), Param("opt", "choice", choices=("sgd", "adam"))]
        >>> [p.path for p in resolve_conditions(ps, {"m": {"opt": "sgd"}})]
        ['opt', 'm']
    """
    by_path = {p.path: p for p in params}
    resolved = {p.path: p for p in params}
    for path, when in conditions.items():
        resolved[path] = replace(by_path[path], when=_parse_when(path, when, by_path))
    return _parents_first(resolved)


def _parse_when(path: str, when: Any, by_path: dict[str, Any]) -> tuple[tuple[str, tuple], ...]:
    key = f"experiment.search_space.{path}.when"
    if not isinstance(when, dict) or not when:
        raise SearchSpaceError(key, when, "must map a parent parameter to its value(s)",
                               "write when: {optimizer: sgd} or when: {optimizer: [sgd, rmsprop]}")
    out = []
    for parent, values in when.items():
        where = f"{key}.{parent}"
        if parent == path:
            raise SearchSpaceError(where, values, "makes the parameter depend on itself",
                                   "name another parameter of the search space")
        if parent not in by_path:
            choices = [p for p, q in by_path.items() if q.kind == "choice"]
            other = f", or branch on one of its choices: {', '.join(choices)}" if choices else ""
            raise SearchSpaceError(where, values, f"names {parent}, which is not a searched "
                                   "parameter of experiment.search_space",
                                   f"add {parent}: choice(...) to the search space{other}")
        parent_param = by_path[parent]
        if parent_param.kind != "choice":
            article = "an" if parent_param.kind == "int" else "a"
            raise SearchSpaceError(where, values, f"names {parent}, {article} "
                                   f"{parent_param.kind} range; "
                                   "a condition needs a choice parent",
                                   f"write {parent}: choice(...) with the values to branch on")
        wanted = tuple(values) if isinstance(values, list | tuple) else (values,)
        unknown = [v for v in wanted if not any(same_value(v, c) for c in parent_param.choices)]
        if not wanted or unknown:
            raise SearchSpaceError(where, values, f"is not among {parent}'s choices "
                                   f"{list(parent_param.choices)}",
                                   f"branch on one of {list(parent_param.choices)}")
        out.append((parent, wanted))
    return tuple(out)


def _parents_first(params: dict[str, Any]) -> list[Any]:
    """Topological order (stable: the space's own order where nothing constrains it)."""
    done: list[Any] = []
    placed: set[str] = set()
    visiting: list[str] = []

    def place(path: str) -> None:
        if path in placed:
            return
        if path in visiting:
            cycle = " -> ".join([*visiting[visiting.index(path):], path])
            raise SearchSpaceError(f"experiment.search_space.{path}.when", cycle,
                                   "is a cycle of conditions",
                                   "make at least one parameter of the cycle unconditional")
        visiting.append(path)
        for parent, _ in params[path].when:
            place(parent)
        visiting.pop()
        placed.add(path)
        done.append(params[path])

    for path in params:
        place(path)
    return done
