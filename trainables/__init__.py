"""Training code that runs on every Ray Train worker of a trial.

Each built-in trainable is a per-worker function ``fn(config: dict) -> None`` that uses
``trainables.contract.TrialSession`` to restore, report and checkpoint. Point an experiment at
any such function with ``experiment.trainable: package.module:function``.
"""

from trainables.contract import TrialSession

__all__ = ["TrialSession"]
