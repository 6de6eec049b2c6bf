"""python -m sweeps +experiment=NAME [key=value ...]

Composes ``conf/sweep.yaml`` with the experiment and overrides, checks everything (exit code 2
with a one-line error naming key, value and fix; Ray is not started), then runs the sweep and
prints the trial table, the best config and the best checkpoint. ``--help`` and ``--cfg job``
stay fast: Ray and torch are imported only once a sweep really runs.
"""

from __future__ import annotations

import logging
import sys

import hydra
from omegaconf import DictConfig

from sweeps.config import register_schema
from sweeps.paths import CONF_DIR

register_schema()


@hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="sweep")
def main(cfg: DictConfig) -> None:
    """Hydra entry: validate, run, report."""
    from sweeps.config import to_config
    from sweeps.errors import SweepError
    from sweeps.runner import SweepInterrupted, prepare, print_result, run_sweep

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        sweep_cfg = to_config(cfg)
        prepared = prepare(sweep_cfg)
    except SweepError as exc:
        print(f"sweeps: error: {exc}", file=sys.stderr)
        sys.exit(2)
    if sweep_cfg.sweep.dry_run:
        from sweeps.plan import format_plan

        print(format_plan(prepared))
        return
    try:
        result = run_sweep(sweep_cfg, prepared)
    except SweepInterrupted as exc:
        print(f"sweeps: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    print_result(result, sweep_cfg)
    if result.best is None:
        sys.exit(1)


def _precheck(args: list[str]) -> None:
    """Catch typos in keys and experiment names with a better message than Hydra's."""
    from sweeps.errors import ConfigError
    from sweeps.overrides import check_overrides

    try:
        check_overrides(args)
    except ConfigError as exc:
        print(f"sweeps: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    from sweeps.overrides import quote_search_space

    sys.argv[1:] = quote_search_space(sys.argv[1:])
    _precheck(sys.argv[1:])
    main()
