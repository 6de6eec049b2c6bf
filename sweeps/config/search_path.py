"""Where ``+experiment=NAME`` is looked up: the config search path of a sweeps command.

    python -m sweeps --config-dir ~/proj/conf +experiment=mine
    python -m sweeps 'hydra.searchpath=[file://conf,pkg://myproj.conf]' +experiment=mine

Order, first match wins for every group (docs/experiments.md#where-experiments-are-looked-up):
``--config-dir`` (``-cd``), then ``hydra.searchpath`` entries in order (``file://DIR``, bare
``DIR`` or ``pkg://``; relative to the cwd), then the built-in ``conf/`` (``paths.CONF_DIR``).

``sweeps.config.search_path_args`` builds it from a command line (``from_argv``) or from the
arguments of ``sweeps.config.compose`` (``for_compose``).

Hydra 1.3's own order, read in its source: docs/development.md#the-config-search-path.

Deliberate divergence: no ``config_path`` (no ``main`` source), built-in ``conf/`` appended
LAST (``sweeps.config.overrides.add_builtin_searchpath``); the primary ``sweep.yaml`` comes from
the ConfigStore (``sweeps.config.compose.register_primary`` says why). The built-in is a
``file://`` entry, not ``pkg://sweeps.conf``: Hydra's ``pkg://`` source reports a package
without ``__init__.py`` as "not available" (a warning on every run), and ``conf/`` is a plain
data directory in the checkout and in the wheel.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from sweeps.config.paths import CONF_DIR

__all__ = ["Entry", "SearchPath", "Source", "activate", "active", "builtin", "builtin_only",
           "remember", "source_of"]

GROUP = "experiment"
LABELS = {"command-line": "--config-dir", "hydra.searchpath in command-line": "hydra.searchpath"}


@dataclass(frozen=True)
class Entry:
    """One search-path entry: who added it (Hydra's provider name) and its Hydra path."""

    provider: str
    path: str  # as Hydra writes it: "file:///abs/dir" or "pkg://package.module"

    @property
    def label(self) -> str:
        """Where the entry came from: ``--config-dir``, ``hydra.searchpath`` or ``built-in``."""
        if self.path == builtin().path:
            return "built-in"
        return LABELS.get(self.provider, self.provider)

    def root(self) -> Any:
        """The directory (a ``Path`` or an importlib ``Traversable``), or None if unreadable."""
        scheme, sep, rest = self.path.partition("://")
        if not sep:
            scheme, rest = "file", self.path
        if scheme == "file":
            return Path(os.path.abspath(rest))
        if scheme == "pkg":
            try:
                return resources.files(rest)
            except (ImportError, ValueError, TypeError):
                return None
        return None

    @property
    def where(self) -> str:
        """The entry for people: an absolute directory, or ``pkg://x.y`` with its directory."""
        root = self.root()
        if self.path.startswith("pkg://"):
            return self.path + (f" at {root}" if isinstance(root, Path) else "")
        return str(root)

    def exists(self) -> bool:
        """Whether the entry's directory is there (Hydra skips missing ones with a warning)."""
        root = self.root()
        return root is not None and root.is_dir()

    def options(self, group: str = GROUP) -> list[str]:
        """Names of the ``group/*.yaml`` files in this entry, sorted (``experiments()``)."""
        root = self.root()
        if root is None or not root.joinpath(group).is_dir():
            return []
        return sorted(f.name[:-5] for f in root.joinpath(group).iterdir()
                      if f.name.endswith(".yaml") and f.is_file())

    def groups(self) -> list[str]:
        """Top-level config groups of this entry (directories with ``*.yaml``), ``hydra`` aside."""
        root = self.root()
        if root is None or not root.is_dir():
            return []
        return sorted(d.name for d in root.iterdir()
                      if d.is_dir() and d.name != "hydra" and self.options(d.name))

    def experiments(self) -> list[str]:
        """Names of the ``experiment/*.yaml`` files in this entry, sorted."""
        return self.options(GROUP)

    def experiment_file(self, name: str) -> str | None:
        """The file ``+experiment=name`` loads from this entry, or None if it has none."""
        root = self.root()
        if root is None:
            return None
        res = root.joinpath(GROUP, f"{name}.yaml")
        if not res.is_file():
            return None
        return str(res) if isinstance(res, Path) else f"{self.path}/{GROUP}/{name}.yaml"


@dataclass(frozen=True)
class Source:
    """The file an experiment was composed from."""

    name: str
    file: str
    entry: Entry

    def describe(self) -> str:
        """``experiment mine from /abs/conf/experiment/mine.yaml (--config-dir)``."""
        return f"experiment {self.name} from {self.file} ({self.entry.label})"


@dataclass(frozen=True)
class SearchPath:
    """The entries ``+experiment=NAME`` is looked up in, first match first."""

    entries: tuple[Entry, ...]

    def find(self, name: str) -> Source | None:
        """The first entry's file for ``name``, or None.

        Example:
            >>> builtin_only().find("digits").entry.label
            'built-in'
        """
        for entry in self.entries:
            file = entry.experiment_file(name)
            if file is not None:
                return Source(name, file, entry)
        return None

    def experiments(self) -> dict[str, Source]:
        """Every experiment name with the file that wins for it, sorted by name."""
        found: dict[str, Source] = {}
        for entry in self.entries:
            for name in entry.experiments():
                found.setdefault(name, Source(name, entry.experiment_file(name) or "", entry))
        return dict(sorted(found.items()))

    def describe(self) -> str:
        """Every entry in order: ``/u/conf (--config-dir), /repo/conf (built-in)``."""
        return ", ".join(f"{e.where} ({e.label}{'' if e.exists() else ', missing'})"
                         for e in self.entries)

    def listing(self) -> str:
        """The groups' options, then every entry's experiments (shadowed ones marked)."""
        groups = sorted({g for e in self.entries for g in e.groups()})
        lines = ["== Configuration groups ==",
                 "Compose your configuration from those groups (group=option)", ""]
        lines += [f"{g}: {', '.join(sorted({o for e in self.entries for o in e.options(g)}))}"
                  for g in groups]
        lines += ["", "== Experiments (+experiment=NAME): the first entry that has it wins =="]
        winners = self.experiments()
        for i, entry in enumerate(self.entries, 1):
            state = "" if entry.exists() else " (missing)"
            lines.append(f"{i}. {entry.where} ({entry.label}){state}")
            for name in entry.experiments():
                win = winners[name].entry
                note = "" if win == entry else f"  (shadowed by {win.where}, {win.label})"
                lines.append(f"     {name}{note}")
        return "\n".join(lines)


def builtin() -> Entry:
    """The built-in ``conf/`` as a search-path entry (always last; Hydra's provider name)."""
    return Entry("hydra.searchpath in command-line", f"file://{CONF_DIR}")


def builtin_only() -> SearchPath:
    """The search path of a command without ``--config-dir`` or ``hydra.searchpath``."""
    return SearchPath((builtin(),))


_active: SearchPath | None = None
_sources: dict[int, tuple[Any, Source]] = {}


def activate(search_path: SearchPath | None) -> None:
    """Make ``search_path`` the one ``active()`` returns (the CLI sets it before Hydra runs)."""
    global _active
    _active = search_path


def active() -> SearchPath:
    """The search path of the running command; the built-in conf alone in library use."""
    return _active or builtin_only()


def remember(cfg: object, source: Source | None) -> None:
    """Record which file ``cfg`` (a composed ``SweepConfig``) came from, for ``source_of``."""
    if source is None:
        return
    key = id(cfg)
    _sources[key] = (weakref.ref(cfg, lambda _: _sources.pop(key, None)), source)


def source_of(cfg: object) -> Source | None:
    """The file ``cfg`` was composed from, if ``remember`` saw it."""
    ref, source = _sources.get(id(cfg), (None, None))
    return source if ref is not None and ref() is cfg else None
