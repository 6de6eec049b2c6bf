"""Compose a sweep config the way the CLI does, from Python (tests, notebooks).

    from sweeps import compose
    cfg = compose("digits", ["search.num_samples=4", "scaling.num_workers=1"])
"""

from __future__ import annotations

from sweeps.config import SweepConfig, register_schema, to_config
from sweeps.paths import CONF_DIR

__all__ = ["compose", "compose_raw"]


def compose_raw(experiment: str | None, overrides: list[str] | None = None):  # -> DictConfig
    """Hydra's composed DictConfig for ``+experiment=experiment`` plus ``overrides``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_schema()
    args = ([f"+experiment={experiment}"] if experiment else []) + list(overrides or [])
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return hydra_compose(config_name="sweep", overrides=args)


def compose(experiment: str | None, overrides: list[str] | None = None) -> SweepConfig:
    """The typed ``SweepConfig`` for ``+experiment=experiment`` plus ``overrides``."""
    return to_config(compose_raw(experiment, overrides))
