"""Searched keys the training loop never read: a search that changes nothing, said out loud.

    callbacks=[UnreadKeysCheck(["lr", "hidden"], sweep_dir / "train")]

A loop that reads ``config.get("learning_rate")`` while the space searches ``lr`` trains every
trial with its own default: the sweep runs, MLflow shows a different ``lr`` per trial, and the
search does nothing. After the first report of the first trial (the loop has built its model and
optimizer by then), this Tune callback reads the keys the loop read (``config_reads.json``,
written by ``sweeps.loop.worker``) and warns once, naming every searched key that was not read.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ray.tune import Callback

from sweeps.files import read_text
from sweeps.protocol import CONFIG_READS_FILE, run_file

__all__ = ["UnreadKeysCheck", "unread_keys"]

log = logging.getLogger(__name__)


def unread_keys(searched: list[str], read: list[str]) -> list[str]:
    """The searched dotted keys not among the keys read.

    Example:
        >>> unread_keys(["lr", "model.hidden", "depth"], ["lr", "model", "model.hidden"])
        ['depth']
    """
    seen = set(read)
    return [k for k in searched if k not in seen]


class UnreadKeysCheck(Callback):
    """Warns once, after the first report of the sweep, about searched keys never read."""

    def __init__(self, searched: list[str], train_storage: str | Path) -> None:
        self.searched, self.train_storage = list(searched), str(train_storage)
        self.checked = not self.searched
        self.unread: list[str] = []

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        if self.checked:
            return
        self.checked = True
        path = run_file(Path(self.train_storage) / trial.trial_id, CONFIG_READS_FILE)
        try:
            read = json.loads(read_text(path))
        except (OSError, ValueError):
            read = []
        self.unread = unread_keys(self.searched, read)
        if self.unread:
            log.warning("the training loop never read the searched key(s) %s (trial %s, after "
                        "its first report): every trial trains with the loop's own value, so "
                        "the search changes nothing for them. Read them from the loop's config "
                        "(config[%r]), or remove them from experiment.search_space",
                        ", ".join(self.unread), trial.trial_id, self.unread[0])
