"""Compose a sweep config the way the CLI does, from Python (tests, notebooks).

    from sweeps import compose
    cfg = compose("digits", ["search.num_samples=4", "scaling.num_workers=1"])
    cfg = compose("mine", config_dir="conf")  # conf/experiment/mine.yaml of your project

The search path is the CLI's (``sweeps/config/search_path.py``), ``config_dir`` as
``--config-dir``: your ``experiment/digits.yaml`` shadows the built-in one.
"""

from __future__ import annotations

import os

from omegaconf import OmegaConf

from sweeps.config import search_path
from sweeps.config.paths import CONF_DIR
from sweeps.config.schema import SweepConfig, register_schema, to_config
from sweeps.config.search_path import SearchPath
from sweeps.config.search_path_args import for_compose

__all__ = ["PRIMARY", "compose", "compose_raw", "register_primary"]


PRIMARY = "sweeps_primary"
"""ConfigStore name of the built-in ``conf/sweep.yaml``: the primary config of every run."""


def register_primary(help_for: SearchPath | None = None) -> None:
    """Store the built-in ``conf/sweep.yaml`` in Hydra's ConfigStore as ``PRIMARY``.

    Hydra looks the primary config up BEFORE it adds ``hydra.searchpath`` entries and keeps
    that lookup (``CachingConfigRepository.initialize_sources`` does not clear its cache), so
    with no ``config_path`` the primary must come from the ConfigStore (the ``schema`` source).
    It is not stored as ``sweep``: Hydra would then treat it as the schema of any file
    ``sweep.yaml`` it loads ("automatic schema matching") and refuse it for its defaults list.
    With ``help_for``, ``--help`` lists the groups of every entry of that search path (Hydra's
    own ``$APP_CONFIG_GROUPS`` ignores ``hydra.searchpath`` entries).

    Example:
        >>> from hydra.core.config_store import ConfigStore
        >>> register_primary(); ConfigStore.instance().load("sweeps_primary.yaml").provider
        'sweeps'
    """
    from hydra.core.config_store import ConfigStore

    node = OmegaConf.load(CONF_DIR / "sweep.yaml")
    if help_for is not None:
        text = help_for.listing().replace("$", "$$").replace("${", "\\${")
        node.hydra.help = {"template": "${hydra.help.header}\n" + text + "\n\n== Config ==\n"
                           "Override anything in the config (foo.bar=value)\n\n$CONFIG\n\n"
                           "${hydra.help.footer}"}
    ConfigStore.instance().store(name=PRIMARY, node=node, provider="sweeps")


def compose_raw(experiment: str | None, overrides: list[str] | None = None,
                config_dir: str | os.PathLike[str] | None = None):  # -> DictConfig
    """Hydra's composed DictConfig for ``+experiment=experiment`` plus ``overrides``.

    Example:
        >>> compose_raw("digits").experiment.trainable
        'trainables.digits:train_mlp'
    """
    from hydra import compose as hydra_compose
    from hydra import initialize

    from sweeps.config.overrides import add_builtin_searchpath, check_experiment

    register_schema()
    register_primary()
    args = ([f"+experiment={experiment}"] if experiment else []) + list(overrides or [])
    sp = for_compose(config_dir, args)
    if experiment:
        check_experiment(experiment, sp)  # the CLI's message, every entry named
    first = [e.path for e in sp.entries if e.provider == "command-line"]
    # No config_path: every entry, the built-in conf last, comes from hydra.searchpath.
    with initialize(version_base=None, config_path=None):
        return hydra_compose(config_name=PRIMARY,
                             overrides=add_builtin_searchpath(args, extra_first=first))


def compose(experiment: str | None, overrides: list[str] | None = None,
            config_dir: str | os.PathLike[str] | None = None) -> SweepConfig:
    """The typed ``SweepConfig`` for ``+experiment=experiment`` plus ``overrides``.

    ``config_dir``: as ``--config-dir DIR``. The experiment's file is remembered for the plan.

    Example:
        >>> compose("digits", ["search.num_samples=2"]).search.num_samples
        2
        >>> conf = Path(tempfile.mkdtemp()) / "conf"; (conf / "experiment").mkdir(parents=True)
        >>> _ = (conf / "experiment" / "mine.yaml").write_text(
        ...     "# @package _global_\\nexperiment:\\n  name: mine\\n"
        ...     "  trainable: trainables.digits:train_mlp\\n  metric: val_acc\\n  mode: max\\n")
        >>> compose("mine", config_dir=str(conf)).experiment.name
        'mine'
    """
    args = ([f"+experiment={experiment}"] if experiment else []) + list(overrides or [])
    cfg = to_config(compose_raw(experiment, overrides, config_dir))
    if experiment:
        search_path.remember(cfg, for_compose(config_dir, args).find(experiment))
    return cfg
