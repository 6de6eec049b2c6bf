"""The config search path a command line builds: Hydra's own reading of its flags and overrides.

    search_path = from_argv(argv)                  # sweeps.__main__, before Hydra runs
    sp = for_compose(config_dir, overrides)        # sweeps.config.compose
    found = searchpath_values(overrides)           # sweeps.config.overrides

``--config-dir DIR`` (``-cd DIR``, ``--config-dir=DIR``) comes first, then the entries of the first
override whose key is exactly ``hydra.searchpath`` (Hydra's rule), then the built-in ``conf/``
(``sweeps.config.search_path.builtin``); ``sweeps/config/search_path.py`` explains the order and how
it differs from plain Hydra. The command line is read by Hydra's own argument parser
(``sweeps._hydra.args_parser``) and override grammar, so a flag means here what it means to Hydra.
"""

from __future__ import annotations

import argparse
import os

from sweeps.config.search_path import Entry, SearchPath, builtin, builtin_only
from sweeps.errors import ConfigError

__all__ = ["for_compose", "from_argv", "parse_argv", "searchpath_values"]


def parse_argv(argv: list[str]) -> argparse.Namespace | None:
    """Hydra's own reading of ``argv`` (``config_dir``, ``overrides``, ...); None if it fails.

    Example:
        >>> parse_argv(["-cd", "conf", "+experiment=mine"]).config_dir
        'conf'
    """
    return _parse(argv)[0]


def _parse(argv: list[str]) -> tuple[argparse.Namespace | None, str | None]:
    """(Hydra's reading of ``argv``, None) or (None, its parser's complaint, if it made one)."""
    from sweeps._hydra import args_parser

    parser = args_parser()

    def error(message: str) -> None:
        raise ValueError(message)

    parser.error = error  # type: ignore[method-assign]  # Hydra reports it when it runs
    try:
        return parser.parse_args(argv), None
    except ValueError as exc:
        return None, str(exc)
    except SystemExit:  # an action that exits (--version)
        return None, None


def searchpath_values(overrides: list[str]) -> tuple[int, list[str]] | None:
    """Index and entries of the first ``hydra.searchpath=[...]`` override (Hydra's rule)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for i, text in enumerate(overrides):
        if not text.lstrip("+~").startswith("hydra.searchpath"):
            continue
        try:
            ov = parser.parse_override(text)
        except Exception:
            return None  # Hydra reports the syntax error
        if ov.get_key_element() == "hydra.searchpath":
            value = ov.value()
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return i, list(value)
            return None
    return None


def from_argv(argv: list[str]) -> SearchPath:
    """The search path a ``python -m sweeps ARGV`` run composes from.

    Raises ``ConfigError`` for a ``--config-dir`` that is not a directory (Hydra would exit 1
    with "Additional config directory ... not found") and for argv Hydra's parser refuses (an
    unknown flag; Hydra would print its usage and exit 2).

    Example:
        >>> [e.label for e in from_argv(["-cd", "/tmp", "+experiment=mine"]).entries]
        ['--config-dir', 'built-in']
    """
    args, problem = _parse(argv)
    if args is None:
        if problem:  # Hydra would exit with its usage text; one line, and what to write
            unknown = problem.removeprefix("unrecognized arguments: ")
            raise ConfigError(
                "command line", unknown,
                "is not a flag Hydra knows" if unknown != problem else "(Hydra's parser)",
                "options are key=value overrides (sweep.dry_run=true prints the plan); "
                "--help lists them")
        return builtin_only()
    return _build(args.config_dir, list(args.overrides), "--config-dir")


def for_compose(config_dir: str | os.PathLike[str] | None, overrides: list[str]) -> SearchPath:
    """The search path of ``sweeps.config.compose(..., config_dir=...)``: the CLI's, in its order.

    Example:
        >>> for_compose(None, []).entries == (builtin(),)
        True
    """
    return _build(config_dir, overrides, "config_dir")


def _build(config_dir: str | os.PathLike[str] | None, overrides: list[str], key: str) -> SearchPath:
    entries: list[Entry] = []
    if config_dir is not None:
        abs_dir = os.path.abspath(config_dir)
        if not os.path.isdir(abs_dir):
            flag = "--config-dir ./conf" if key == "--config-dir" else "config_dir='conf'"
            raise ConfigError(key, abs_dir, "is not a directory",
                              "pass the directory that holds your experiment/ folder, e.g. "
                              f"{flag} for ./conf/experiment/NAME.yaml")
        entries.append(Entry("command-line", f"file://{abs_dir}"))
    found = searchpath_values(overrides)
    entries += [Entry("hydra.searchpath in command-line", p) for p in (found or (0, []))[1]]
    return SearchPath((*entries, builtin()))
