"""A Tune function, written as Tune's docs write one, whose loss depends on ``x`` and not on
``z``, which it reads (tests/integration/test_importance.py)."""

from ray import tune


def objective(config):
    ignored = config["z"]  # read, as a loop reads a setting that turns out not to matter
    tune.report({"loss": (config["x"] - 0.3) ** 2, "z_seen": ignored})
