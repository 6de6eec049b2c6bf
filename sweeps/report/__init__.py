"""Report: what the user sees and keeps.

    python -m sweeps status outputs/digits                     # status: is it running?

Its modules: docs/development.md#how-the-code-is-laid-out. The plan a dry run prints is the
driver's (``sweeps.driver.dry_run``).
"""
