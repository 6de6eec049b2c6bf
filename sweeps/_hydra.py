"""The one use of Hydra's private API: Hydra's own parser of the command line.

    parser = args_parser()       # hydra._internal.utils.get_args_parser

The CLI reads ``--config-dir`` and ``hydra.searchpath`` the way Hydra will, before Hydra runs,
to build the search path (``sweeps.config.search_path``). Public route: none in Hydra 1.3
(``hydra.main`` parses ``sys.argv`` itself); re-implementing the parser would drift from
Hydra's flags. ``tests/unit/config/test_search_path.py`` covers it.
"""

from __future__ import annotations

import argparse

__all__ = ["args_parser"]


def args_parser() -> argparse.ArgumentParser:
    """A fresh copy of the argument parser ``@hydra.main`` uses."""
    from hydra._internal.utils import get_args_parser

    return get_args_parser()
