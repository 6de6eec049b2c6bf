"""Moved: ``TrialSession`` is public API of ``sweeps`` now (``from sweeps import TrialSession``).

Kept so loops written against ``trainables.contract`` keep importing.
"""

from sweeps.loop.session import TrialSession

__all__ = ["TrialSession"]
