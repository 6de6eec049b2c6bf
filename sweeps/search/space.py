"""Search-space grammar: the Hydra Optuna sweeper's expressions -> Ray Tune domains.

    experiment:
      search_space:
        lr: tag(log, interval(1e-4, 1e-1))   # float, log-uniform
        model.hidden: choice(64, 128, 256)   # categorical, dotted key = nested param
        model.depth: range(1, 3)             # int in {1, 2, 3}
        dropout: interval(0.0, 0.5)          # float, uniform
        batch_size: tag(log, int(interval(16, 256)))
        momentum: 0.9                        # a plain value is a constant
        beta1:                               # conditional: sampled only when optimizer=adam
          when: {optimizer: adam}
          sample: interval(0.8, 0.99)

Parsed with Hydra's own ``OverridesParser``. Divergences from Hydra's sweeps and Tune
(docs/experiments.md#search-space-grammar): ``range`` includes ``hi``, as Optuna; ``tag(log,
range(...))``, ``shuffle`` and other tags are rejected; ``choice`` takes scalars; a
``when``/``sample`` entry is conditional (``sweeps.search.conditions``).

What each kind becomes (bounds inclusive; every search gives a trial only these values):

    expression                random (sweeps.search.tune_space)  tpe / optuna (optuna_space)
    choice(a, b)              tune.choice([a, b])                CategoricalDistribution
    range(1, 3), int(inter..) tune.randint(1, 4) (Tune: hi excl.) IntDistribution(1, 3)
    range(1, 9, 2)            OnGrid: 1, 3, 5, 7, 9              IntDistribution(1, 9, step=2)
    range(0.1, 0.9, 0.2)      OnGrid: 0.1, 0.3, ..., 0.9         FloatDistribution(step=0.2) *
    interval(0, 1)            tune.uniform(0, 1)                 FloatDistribution(0, 1)
    tag(log, interval(a, b))  tune.loguniform(a, b)              FloatDistribution(log=True)
    tag(log, int(interval))   tune.lograndint(a, b + 1)          IntDistribution(log=True)

Not ``tune.qrandint`` / ``tune.quniform`` (why: ``sweeps.search.tune_space``). * Optuna suggests
a stepped float as ``low + k * step`` in floats (0.30000000000000004): ``DefineByRun`` hands the
trial the exact point instead. PBT's explore and warm start snap values back with ``Param.snap``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweeps.errors import SearchSpaceError
from sweeps.search.nested import deep_merge, flatten, same_value, unflatten
from sweeps.search.ranges import check_interval, check_range, nearest_point

__all__ = ["Param", "parse_space", "flatten", "flatten_space", "unflatten", "deep_merge"]

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Param:
    """One searched parameter. ``kind`` is ``choice``, ``int`` or ``float``."""

    path: str
    kind: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Scalar, ...] = ()
    # Conditional: ((parent path, values it must take), ...); all must hold. () = always.
    when: tuple[tuple[str, tuple[Scalar, ...]], ...] = ()

    def describe(self) -> str:
        """Human-readable distribution, e.g. ``float log-uniform [0.0001, 0.1]``."""
        if self.kind == "choice":
            text = f"choice of {list(self.choices)}"
        else:
            dist = "log-uniform" if self.log else "uniform"
            step = f" step {self.step:g}" if self.step else ""
            text = f"{self.kind} {dist} [{self.low:g}, {self.high:g}]{step}"
        return text + self.condition()

    def condition(self) -> str:
        """``" only when optimizer=sgd"`` for a conditional param, else ``""``."""
        if not self.when:
            return ""
        parts = [f"{parent}={values[0]}" if len(values) == 1 else
                 f"{parent} in {list(values)}" for parent, values in self.when]
        return " only when " + " and ".join(parts)

    def snap(self, value: float) -> float | int:
        """``value`` clipped to the bounds, on the step grid exactly (its nearest point
        ``lo + k * step``, ``sweeps.search.ranges``), an int for an int param.

        Example:
            >>> Param("d", "int", low=1, high=9, step=2).snap(4.2)
            5
            >>> Param("x", "float", low=0.1, high=0.9, step=0.2).snap(0.31)
            0.3
            >>> Param("x", "float", low=0, high=1).snap(3)
            1.0
        """
        if self.step:
            return nearest_point(self.low, self.high, self.step, value,  # type: ignore[arg-type]
                                 integer=self.kind == "int")
        value = min(max(value, float(self.low)), float(self.high))  # type: ignore[arg-type]
        return int(round(value)) if self.kind == "int" else float(value)

    def applies(self, values: dict[str, Any]) -> bool:
        """Whether this param exists in a trial whose (flat) values are ``values``.

        Example:
            >>> p = Param("momentum", "float", 0.5, 0.9, when=(("opt", ("sgd",)),))
            >>> p.applies({"opt": "sgd"}), p.applies({"opt": "adam"}), p.applies({})
            (True, False, False)
        """
        return all(parent in values and any(same_value(values[parent], v) for v in allowed)
                   for parent, allowed in self.when)


def flatten_space(search_space: dict[str, Any]) -> dict[str, Any]:
    """``flatten`` for a search space: a conditional entry (``{when: ..., sample: ...}``) stays
    one leaf.

    Example:
        >>> flatten_space({"m": {"b": {"when": {"o": "x"}, "sample": "interval(0, 1)"}}})
        {'m.b': {'when': {'o': 'x'}, 'sample': 'interval(0, 1)'}}
    """
    from sweeps.search.conditions import is_conditional

    out: dict[str, Any] = {}
    for key, value in search_space.items():
        if isinstance(value, dict) and value and not is_conditional(value):
            out.update({f"{key}.{k}": v for k, v in flatten_space(value).items()})
        else:
            out[key] = value
    return out


def _parse_one(path: str, expr: Any) -> Param | Scalar | list | dict:
    """Parse one search-space value; constants come back unchanged."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import (
        ChoiceSweep,
        IntervalSweep,
        RangeSweep,
        Transformer,
    )
    from hydra.errors import HydraException

    key = f"experiment.search_space.{path}"
    if not isinstance(expr, str):
        return expr  # YAML already typed it: a constant
    try:
        override = OverridesParser.create().parse_overrides([f"{path}={expr}"])[0]
        value = override.value()
    except HydraException as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()
                 and not ln.startswith(("See https", "Error parsing override"))]
        raise SearchSpaceError(
            key, expr, f"does not parse ({lines[-1] if lines else str(exc)})",
            "use choice(a, b), range(lo, hi[, step]), interval(lo, hi), int(interval(lo, hi)) "
            "or tag(log, interval(lo, hi)); quote plain strings that contain commas or parens",
        ) from exc
    if not override.is_sweep_override():
        return value
    bad_tags = set(getattr(value, "tags", set())) - {"log"}
    if bad_tags or getattr(value, "shuffle", False):
        what = "shuffle" if getattr(value, "shuffle", False) else f"tag {sorted(bad_tags)}"
        raise SearchSpaceError(key, expr, f"uses {what}, which a sampler cannot honour",
                               "drop it; only tag(log, ...) is supported")
    log = "log" in value.tags
    if isinstance(value, ChoiceSweep):
        if log:
            raise SearchSpaceError(key, expr, "puts tag(log) on a choice",
                                   "use tag(log, interval(lo, hi)) for a log range")
        choices = tuple(override.sweep_iterator(transformer=Transformer.identity))
        if not all(isinstance(c, Scalar) for c in choices):
            raise SearchSpaceError(key, expr, "has a list or mapping among its choices",
                                   "choose between scalars, e.g. choice(small, large), and map "
                                   "each name to its structure in the trainable")
        if len(set(map(repr, choices))) != len(choices):
            raise SearchSpaceError(key, expr, "repeats a choice", "list each value once")
        return Param(path, "choice", choices=choices)
    if isinstance(value, RangeSweep):
        if log:
            raise SearchSpaceError(key, expr, "puts tag(log) on a range",
                                   "use tag(log, int(interval(lo, hi))) for a log-spaced int")
        lo, hi, step = value.start, value.stop, value.step
        is_int = check_range(key, expr, lo, hi, step)
        return Param(path, "int" if is_int else "float", low=lo, high=hi, step=step)
    if isinstance(value, IntervalSweep):
        is_int = check_interval(key, expr, value.start, value.end, log)
        return Param(path, "int" if is_int else "float", low=value.start, high=value.end, log=log)
    raise SearchSpaceError(key, expr, "is a sweep kind this package does not support",
                           "use choice, range or interval")


def parse_space(search_space: dict[str, Any]) -> tuple[list[Param], dict[str, Any]]:
    """Parse a ``search_space`` mapping (dotted or nested keys) into params and constants.

    Example:
        >>> params, consts = parse_space({"lr": "interval(0.01, 0.1)", "model": {"act": "relu"}})
        >>> params[0].kind, consts
        ('float', {'model.act': 'relu'})
    """
    from sweeps.search.conditions import is_conditional, resolve_conditions

    params: list[Param] = []
    constants: dict[str, Any] = {}
    flat = flatten_space(search_space)
    for path in flat:
        clash = next((p for p in flat if p != path and p.startswith(f"{path}.")), None)
        if clash:
            raise SearchSpaceError(f"experiment.search_space.{path}", flat[path],
                                   f"is both a value and the parent of {clash}",
                                   "keep only one of the two keys")
    conditions: dict[str, Any] = {}
    for path, expr in flat.items():
        if isinstance(expr, str) and expr.lstrip().startswith("{"):
            # a conditional entry given on the command line arrives as one quoted string
            mapping = _parse_one(path, expr)
            expr = mapping if is_conditional(mapping) else expr
        if is_conditional(expr):
            if set(expr) != {"when", "sample"}:
                raise SearchSpaceError(f"experiment.search_space.{path}", expr,
                                       "is a conditional entry with keys "
                                       f"{sorted(map(str, expr))}",
                                       "give it exactly `when: {parent: value}` and "
                                       "`sample: EXPR`")
            conditions[path] = expr["when"]
            expr = expr["sample"]
        parsed = _parse_one(path, expr)
        if isinstance(parsed, Param):
            params.append(parsed)
        elif path in conditions:
            raise SearchSpaceError(f"experiment.search_space.{path}.sample", expr,
                                   "is a constant under `when`, so there is nothing to sample",
                                   f"write choice({expr}) for a single value, or move it out "
                                   "of the conditional entry")
        else:
            constants[path] = parsed
    return resolve_conditions(params, conditions), constants
