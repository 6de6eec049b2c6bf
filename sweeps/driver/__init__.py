"""The sweep driver: the one process that runs ``python -m sweeps`` (or ``run_sweep``).

    result = run_sweep(cfg)      # sweeps.driver.runner

From a validated config to Tune's run and the sweep's end, all in the driver process (its
modules: docs/development.md#how-the-code-is-laid-out). Nothing here runs in a trial:
``sweeps.trial`` is the Tune trial process, ``sweeps.loop`` what a user's loop touches.
"""
