"""The trainable of a sweep that runs several corpus loops, one per trial
(``tests.conformance.harness.run_group``): the trial's ``loop`` names the corpus loop, whose own
``train_func`` gets the config its plain run gets (``harness.config_of``)."""

from __future__ import annotations

from pathlib import Path


def train_func(config):
    from tests.conformance.corpus import LOOPS
    from tests.conformance.harness import config_of

    loop = LOOPS[config["loop"]]
    own = config_of(loop, Path(config["observe_base"]) / loop.name)
    loop.function()({**own, "lr": config["lr"]})  # the sweep's one point, 0.05
