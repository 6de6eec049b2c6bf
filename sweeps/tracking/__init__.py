"""Tracking: every sweep event to MLflow, through a durable journal, never lost.

    python -m sweeps +experiment=digits tracking.uri=http://mlflow:5000

Its modules: docs/development.md#how-the-code-is-laid-out. ``python -m sweeps.sync DIR`` sends
what a sweep could not.
"""
