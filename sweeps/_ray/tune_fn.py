"""Ray Tune's function API served to a trial's loop in the Tune trial's own process (inline).

    with tune_api("tune"):          # sweeps.loop.worker.run_loop, around the loop
        objective(config)           # tune.report / tune.get_checkpoint / tune.get_context work

Tune's function API (``ray.tune.report``, ``get_checkpoint``, ``get_context()``'s trial name,
id and directory) reads one process-global object, the Tune session
(``ray.train._internal.session.get_session()``). An inline trial's loop runs in the Tune
trial process itself, beside the real session of the sweep's own trial function (a Train
worker has none: Tune's calls warn and return None there, and the Train backend refuses Tune
functions). For the loop's duration ``tune_api`` puts a view in that place:

* ``tune``, a Tune function trainable: ``report(metrics, checkpoint=)`` goes to the trial's
  Train per-worker API (``ray.train.report`` as served there: the sweep's clock, checkpoints,
  report log), ``get_checkpoint()`` answers the trial's latest checkpoint as a
  ``ray.tune.Checkpoint``, the trial's name, id and directory are the real session's, and
  ``world_rank`` is None, as in a Tune function (so ``ray.train.report`` there raises
  Ray's own "deprecated in a function passed to Ray Tune").
* ``train``, a Ray Train loop, inline: ``ray.tune.report`` and ``tune.get_checkpoint()`` warn
  and return None, as in a Train worker (which has no Tune session); the rest (the trial's
  name, its resources for Ray's nested-task check) is the real session's.

Everything else (the trial process's own thread reading the session: ``step``,
``load_checkpoint``, ``cleanup``) passes through to the real session, which the sweep's own
reports reach through ``report_to_tune``. Private: ``ray.train._internal.session``'s
``_session`` and ``_TrainSession``'s attribute names; ``ray.train.v2``'s train_fn_utils.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from typing import Any

from sweeps._ray.train import SESSION_MODULE, tune_session
from sweeps._ray.train_fn import TRAIN_FN_UTILS_MODULE

__all__ = ["report_to_tune", "tune_api"]


class _View:
    """What Tune's function API reads of its session while a trial's loop runs."""

    def __init__(self, real: Any, tune: bool) -> None:
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_tune", tune)

    def __getattr__(self, name: str) -> Any:
        return None if name == "world_rank" and self._tune else getattr(self._real, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._real, name, value)

    def report(self, metrics: dict[str, Any], checkpoint: Any = None) -> None:
        if not self._tune:
            return _as_in_a_train_worker("report")
        utils = importlib.import_module(TRAIN_FN_UTILS_MODULE)
        return utils.get_train_fn_utils().report(dict(metrics), checkpoint)

    @property
    def loaded_checkpoint(self) -> Any:
        if not self._tune:
            return _as_in_a_train_worker("get_checkpoint")
        found = importlib.import_module(TRAIN_FN_UTILS_MODULE).get_train_fn_utils().get_checkpoint()
        if found is None:
            return None
        from ray.tune import Checkpoint

        return Checkpoint(found.path, filesystem=found.filesystem)


def _as_in_a_train_worker(name: str) -> None:
    """What Tune's function API does in a Ray Train worker (no Tune session): Ray's warning."""
    warnings.warn(f"`{name}` is meant to only be called inside a function that is executed "
                  "by a Tuner or Trainer. Returning `None`.", stacklevel=3)


def report_to_tune(metrics: dict[str, Any]) -> None:
    """``ray.tune.report(metrics)`` to the trial's real Tune session, under a view too."""
    session = tune_session()
    getattr(session, "_real", session).report(metrics, checkpoint=None)


@contextlib.contextmanager
def tune_api(api: str) -> Iterator[None]:
    """Serve Tune's function API as ``api`` ("tune" or "train") says, while the block runs."""
    module = importlib.import_module(SESSION_MODULE)
    real = module.get_session()
    if real is None:  # a Train worker: already what Ray Train gives
        yield
        return
    view = _View(real, api == "tune")
    module._session = view
    try:
        yield
    finally:
        if module._session is view:  # Tune may have ended the session meanwhile (a stop)
            module._session = real
