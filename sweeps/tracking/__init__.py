"""Tracking: every sweep event to MLflow, through a durable journal, never lost.

    python -m sweeps +experiment=digits tracking.uri=http://mlflow:5000

``target`` decides where runs go (``tracking.uri``, ``MLFLOW_TRACKING_URI``, the default); ``setup``
checks the store and opens the parent run; ``callback`` (a Tune callback) turns trial events into
journal records; ``sweeps.storage.journal`` keeps them (fsync'ed) until ``mlflow_sink`` applied them
to MLflow; ``masking`` hides secrets first. ``python -m sweeps.sync DIR`` sends what a sweep could
not.
"""

from __future__ import annotations
