"""Check command-line overrides against the schema before Hydra composes them.

    python -m sweeps +experiment=digits search.num_sample=20
    # sweeps: error: search.num_sample: 20 is not a config key; did you mean search.num_samples?

Hydra would reject the same typo, but suggests ``+search.num_sample=20`` (which cannot work on
a typed section) and exits 1 with a stack-trace hint. This names the closest real key instead.
Keys under ``experiment.params`` and ``experiment.search_space`` are free-form and not checked;
``hydra.*`` keys are Hydra's.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from sweeps.config import SweepConfig, available_experiments
from sweeps.errors import ConfigError

__all__ = ["check_overrides", "quote_search_space", "schema_keys"]

FREE_FORM = ("experiment.params", "experiment.search_space")
GROUPS = ("search", "scheduler", "scaling")


def schema_keys(cls: type = SweepConfig, prefix: str = "") -> list[str]:
    """Every dotted key the schema declares, sections included (``search``, ``search.algorithm``).

    Example:
        >>> "scheduler.max_t" in schema_keys()
        True
    """
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        keys.append(key)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            keys += schema_keys(type(default), f"{key}.")
    return keys


def quote_search_space(args: list[str]) -> list[str]:
    """Quote search-space values so Hydra stores them instead of sweeping over them.

    Without this, ``experiment.search_space.lr=interval(0.1,0.5)`` on the command line is a
    Hydra sweep of its own and fails with "requires --multirun".

    Example:
        >>> quote_search_space(["experiment.search_space.lr=interval(0.1,0.5)"])
        ["experiment.search_space.lr='interval(0.1,0.5)'"]
    """
    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if (sep and key.lstrip("+~").startswith("experiment.search_space.") and value
                and value[0] not in "'\"" and "'" not in value):
            arg = f"{key}='{value}'"
        out.append(arg)
    return out


def _parse(args: list[str]) -> list[Any]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(args)


def check_overrides(args: list[str]) -> None:
    """Raise ``ConfigError`` for an unknown experiment or an unknown plain key in ``args``."""
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    if not overrides:
        return
    try:
        parsed = _parse(overrides)
    except Exception:
        return  # let Hydra report the syntax error with its own pointer into the text
    known = schema_keys()
    for ov in parsed:
        key = ov.key_or_group
        if key.startswith("hydra") or ov.is_delete():
            continue
        if key == "experiment" and ov.is_add():
            names = available_experiments()
            value = ov.value()
            if isinstance(value, str) and value not in names:
                close = difflib.get_close_matches(value, names, n=1)
                hint = f"did you mean +experiment={close[0]}? " if close else ""
                raise ConfigError("experiment", value, "is not an experiment in conf/experiment",
                                  f"{hint}available: {', '.join(names)}")
            continue
        if key in GROUPS or key in known or key.startswith(tuple(f"{p}." for p in FREE_FORM)):
            continue
        if ov.is_add() and not any(key.startswith(f"{k}.") for k in known if "." not in k):
            continue  # '+newkey=...' outside the schema's sections: Hydra decides
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        fix = (f"did you mean {close[0]}?" if close
               else "run `python -m sweeps --help` to list the keys")
        raise ConfigError(key, ov.value(), "is not a config key", fix)
