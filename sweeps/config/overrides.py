"""Check command-line overrides against the schema before Hydra composes them.

    python -m sweeps +experiment=digits search.num_sample=20
    # sweeps: error: search.num_sample: 20 is not a config key; did you mean search.num_samples?

Hydra would reject the same typo, but suggests ``+search.num_sample=20`` (which cannot work on
a typed section) and exits 1 with a stack-trace hint. This names the closest real key instead.
Keys under ``experiment.params`` and ``experiment.search_space`` are free-form and not checked;
``hydra.*`` keys are Hydra's. ``+experiment=NAME`` is looked up in every entry of the config
search path (``--config-dir``, ``hydra.searchpath``, the built-in ``conf/``; see
``sweeps/config/search_path.py``), and an unknown name is refused with all of them listed.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from omegaconf.errors import ValidationError
from omegaconf.nodes import BooleanNode

from sweeps.config.schema import SweepConfig
from sweeps.config.search_path import SearchPath, builtin
from sweeps.config.search_path_args import from_argv, parse_argv, searchpath_values
from sweeps.errors import ConfigError

__all__ = ["add_builtin_searchpath", "check_experiment", "check_overrides", "quote_search_space",
           "schema_keys", "searchpath_override"]

FREE_FORM = ("experiment.params", "experiment.search_space", "experiment.metrics",
             "experiment.datasets", "search.sampler")
GROUPS = ("search", "scheduler", "scaling")
# Free-form entries a command line may add without Hydra's "+" (quote_search_space adds "++")
ADDABLE = ("experiment.search_space.", "search.sampler.")


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


def bool_keys(cls: type = SweepConfig, prefix: str = "") -> list[str]:
    """The schema's keys typed plain ``bool`` (not ``bool | None``).

    Example:
        >>> "tracking.tensorboard" in bool_keys(), "sweep.name" in bool_keys()
        (True, False)
    """
    keys: list[str] = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(default):
            keys += bool_keys(type(default), f"{prefix}{f.name}.")
        elif f.type in ("bool", bool):
            keys.append(f"{prefix}{f.name}")
    return keys


def _is_bool(value: object) -> bool:
    """A value OmegaConf turns into a bool (its own check: true/false, yes/no, y/n, on/off, an
    int), or an interpolation it resolves later."""
    if "${" in str(value):
        return True
    try:
        BooleanNode(value)
    except ValidationError:
        return False
    return True


def quote_search_space(args: list[str]) -> list[str]:
    """Quote search-space values so Hydra stores them instead of sweeping over them, and let
    a search-space or sampler entry be added without Hydra's ``+``.

    Without this, ``experiment.search_space.lr=interval(0.1,0.5)`` on the command line is a
    Hydra sweep of its own and fails with "requires --multirun", and a key the space does not
    have yet fails with Hydra's "Key 'lr' is not in struct". ``++`` adds or overrides.

    Example:
        >>> quote_search_space(["experiment.search_space.lr=interval(0.1,0.5)"])
        ["++experiment.search_space.lr='interval(0.1,0.5)'"]
    """
    out = []
    for arg in args:
        key, sep, value = arg.partition("=")
        if sep and key.startswith(ADDABLE):
            key = f"++{key}"  # add or override: the entry may not be in the space yet
        if (sep and key.lstrip("+~").startswith("experiment.search_space.") and value
                and value[0] not in "'\"" and "'" not in value):
            value = f"'{value}'"
        out.append(f"{key}={value}" if sep else arg)
    return out


def searchpath_override(paths: list[str]) -> str:
    """``hydra.searchpath=[...]`` for ``paths``, each quoted.

    Example:
        >>> searchpath_override(["file:///a b"])
        "hydra.searchpath=['file:///a b']"
    """
    quoted = ("'" + p.replace("\\", "\\\\").replace("'", "\\'") + "'" for p in paths)
    return f"hydra.searchpath=[{','.join(quoted)}]"  # Hydra's single-quoted strings


def add_builtin_searchpath(argv: list[str], extra_first: list[str] | None = None) -> list[str]:
    """``argv`` with the built-in conf appended to ``hydra.searchpath`` (added if absent).

    Hydra would otherwise rank its ``main`` source (the built-in conf) above the user's
    directories; ``sweeps/config/search_path.py`` explains the order.

    ``extra_first`` entries go before the user's (``compose`` puts ``config_dir`` there).
    The new override goes where the overrides are, so Hydra's parser still takes every one.

    Example:
        >>> add_builtin_searchpath(["+experiment=x"])[0].startswith("hydra.searchpath=['file://")
        True
    """
    args = parse_argv(argv)
    overrides = list(args.overrides) if args is not None else []
    found = searchpath_values(overrides)
    new = searchpath_override([*(extra_first or []), *(found[1] if found else []), builtin().path])
    if found is not None:
        index = _chunk_start(argv, overrides) + found[0]
        return [*argv[:index], new, *argv[index + 1:]]
    index = _chunk_start(argv, overrides) if overrides else 0
    return [*argv[:index], new, *argv[index:]]


def _chunk_start(argv: list[str], overrides: list[str]) -> int:
    """Where the run of positional ``overrides`` starts in ``argv`` (argparse keeps them
    together; a second run would be "unrecognized arguments")."""
    n = len(overrides)
    for i in range(len(argv) - n, -1, -1):
        if argv[i:i + n] == overrides:
            return i
    return 0


def check_overrides(args: list[str], search_path: SearchPath | None = None) -> None:
    """Raise ``ConfigError`` for an unknown experiment or an unknown plain key in ``args``.

    ``args`` is the command line after ``python -m sweeps``; ``search_path`` defaults to the
    one it names (``from_argv(args)``, which also refuses a missing ``--config-dir``).

    Example:
        >>> check_overrides(["+experiment=digts"])
        Traceback (most recent call last):
        ...
        sweeps.errors.ConfigError: experiment: 'digts' is not an experiment ...; did you mean ...
    """
    if search_path is None:
        search_path = from_argv(args)
    parsed_args = parse_argv(args)
    overrides = (list(parsed_args.overrides) if parsed_args is not None
                 else [a for a in args if "=" in a and not a.startswith("-")])
    if not overrides:
        return
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception:
        return  # let Hydra report the syntax error with its own pointer into the text
    known, flags = schema_keys(), set(bool_keys())
    for ov in parsed:
        key = ov.key_or_group
        if key.startswith("hydra") or ov.is_delete():
            continue
        if key == "experiment" and ov.is_add():
            check_experiment(ov.value(), search_path)
            continue
        if key in flags and not _is_bool(ov.value()):  # one line, not OmegaConf's five
            raise ConfigError(key, ov.value(), "must be true or false",
                              f"write {key}=true or {key}=false")
        if key in GROUPS or key in known or key.startswith(tuple(f"{p}." for p in FREE_FORM)):
            continue
        if ov.is_add() and not any(key.startswith(f"{k}.") for k in known if "." not in k):
            continue  # '+newkey=...' outside the schema's sections: Hydra decides
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        fix = (f"did you mean {close[0]}?" if close
               else "run `python -m sweeps --help` to list the keys")
        raise ConfigError(key, ov.value(), "is not a config key", fix)


def check_experiment(value: Any, search_path: SearchPath) -> None:
    """Refuse ``+experiment=value`` unless some search-path entry has the file."""
    if not isinstance(value, str) or search_path.find(value) is not None:
        return
    found = search_path.experiments()
    close = difflib.get_close_matches(value, list(found), n=1)
    hint = f"did you mean +experiment={close[0]}? " if close else ""
    names = ", ".join(f"{n} ({s.entry.label})" for n, s in found.items()) or "none"
    raise ConfigError("experiment", value,
                      f"is not an experiment in experiment/ of {search_path.describe()}",
                      f"{hint}available: {names}")
