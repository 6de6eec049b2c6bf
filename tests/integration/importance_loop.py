"""A Tune function, written as Tune's docs write one, whose loss depends much on ``x``, a
little on ``y`` and not at all on ``z``, which it reads (tests/integration/test_importance.py)."""

from ray import tune


def objective(config):
    ignored = config["z"]  # read, as a loop reads a setting that turns out not to matter
    loss = (config["x"] - 0.3) ** 2 + 0.05 * (config["y"] - 0.5) ** 2
    tune.report({"loss": loss, "z_seen": ignored})
