"""python -m sweeps +experiment=NAME [key=value ...]

    sweeps --config-dir ./conf +experiment=mine sweep.dry_run=true   # the same, installed
    sweeps predict outputs/mine --input data.parquet --output preds/  # the best model, batch
    sweeps template slurm > sweep.sbatch                             # a cluster job to copy

Composes ``conf/sweep.yaml`` with the experiment and overrides, checks everything (exit code 2
with a one-line error naming key, value and fix; Ray is not started), then runs the sweep and
prints the trial table, the best config and the best checkpoint. ``--help`` and ``--cfg job``
stay fast: Ray and torch are imported only once a sweep really runs.

Experiments are looked up in ``--config-dir DIR``, then ``hydra.searchpath=[...]`` entries, then the
built-in ``conf/`` (``sweeps/config/search_path.py`` says why that differs from plain Hydra);
``--help`` lists them per entry. The ``sweeps`` console command runs this module exactly as ``python
-m sweeps`` does (the working directory on ``sys.path`` included).
"""

from __future__ import annotations

import logging
import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from sweeps.config.compose import PRIMARY, register_primary
from sweeps.config.schema import register_schema, to_config
from sweeps.config.search_path import Entry, SearchPath, activate, active, remember
from sweeps.config.search_path_args import from_argv
from sweeps.driver.prepare import prepare
from sweeps.driver.runner import SweepInterrupted, run_sweep
from sweeps.errors import ConfigError, StorageFull, SweepError
from sweeps.lease.holder import remember_command

register_schema()
register_primary()
COMMANDS = {"predict": "sweeps.inference.cli", "status": "sweeps.report.status",
            "optuna-log": "sweeps.tracking.optuna_log",
            "template": "sweeps.templates"}  # sweeps NAME ...: the module whose main runs it


# config_path=None: the built-in conf/ comes last in hydra.searchpath (add_builtin_searchpath).
@hydra.main(version_base=None, config_path=None, config_name=PRIMARY)
def main(cfg: DictConfig) -> None:
    """Hydra entry: validate, run, report."""
    from sweeps.report.console import print_result

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        sweep_cfg = to_config(cfg)
        if sweep_cfg.sweep.dry_run:
            from sweeps.driver.dry_run import format_plan

            # The file Hydra took +experiment from: its choice, looked up in its own sources;
            # remembered before prepare, which copies what it settles.
            runtime = HydraConfig.get().runtime
            choice = runtime.choices.get("experiment")
            entries = tuple(Entry(s.provider, f"{s.schema}://{s.path}") for s in
                            runtime.config_sources if s.provider not in ("hydra", "schema"))
            remember(sweep_cfg, SearchPath(entries).find(choice) if choice else None)
            print(format_plan(prepare(sweep_cfg)))
            return
        result = run_sweep(sweep_cfg)  # claims the sweep directory, then prepares
    except SweepInterrupted as exc:
        print(f"sweeps: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except StorageFull as exc:
        print(f"sweeps: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except SweepError as exc:  # bad input, a busy sweep, RayIncompatible: one line, exit 2
        print(f"sweeps: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:  # Ctrl-C outside Tune's run (Tune's own stops are SweepInterrupted)
        print("sweeps: interrupted; what the sweep saved is kept: run the same command again to "
              "resume it", file=sys.stderr)
        sys.exit(130)
    print_result(result, sweep_cfg)
    if result.best is None or result.failed:
        sys.exit(1)


def prepare_argv(argv: list[str]) -> list[str]:
    """The command line Hydra gets: search spaces quoted, checked, built-in conf appended.

    Exits 2 with one line for an unknown experiment or key, or a missing ``--config-dir``,
    before Hydra or Ray runs. Records the search path for ``--help`` and error messages.

    Example:
        >>> prepare_argv(["+experiment=digits"])
        ["hydra.searchpath=['file:///.../conf']", '+experiment=digits']
    """
    from sweeps.config.overrides import add_builtin_searchpath, check_overrides, quote_search_space

    argv = quote_search_space(argv)
    try:
        search_path = from_argv(argv)
        check_overrides(argv, search_path)
    except ConfigError as exc:
        print(f"sweeps: error: {exc}", file=sys.stderr)
        sys.exit(2)
    activate(search_path)
    return add_builtin_searchpath(argv)


def run() -> None:
    """``python -m sweeps ...``: prepare ``sys.argv``, then let Hydra run ``main``.

    ``sweeps NAME ...`` for a NAME in ``COMMANDS`` goes to that module's ``main`` instead,
    before Hydra reads the command line (a Hydra override is never one bare word).
    """
    command = COMMANDS.get(sys.argv[1]) if len(sys.argv) > 1 else None
    if command is not None:
        sys.exit(__import__(command, fromlist=["main"]).main(sys.argv[2:]))
    remember_command(sys.argv[1:])
    sys.argv[1:] = prepare_argv(sys.argv[1:])
    register_primary(active())  # --help then lists the groups of every search-path entry
    main()


def cli() -> None:
    """``sweeps ...`` (console script): runs this module as ``python -m sweeps`` would.

    ``python -m`` puts the working directory first on ``sys.path`` (trainables next to your
    configs import from there); a console script does not, so it is added here. The module
    runs as ``__main__`` (``runpy``) so Hydra sees the same caller and task name.
    """
    import runpy

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    sys.modules.pop("sweeps.__main__", None)  # the script imported it; runpy runs it afresh
    runpy.run_module("sweeps", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    run()
