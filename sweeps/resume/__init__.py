"""Resume: an interrupted sweep continues where it stopped, or says why it cannot.

    python -m sweeps +experiment=digits      # the same command again, after a crash

Its modules: docs/development.md#how-the-code-is-laid-out.
"""
