"""One Tune trial: what runs in the Tune trial process (and the processes it keeps).

    tune.with_parameters(run_trial, plan=TrialPlan(...))    # built by sweeps.driver.tuner

Its modules: docs/development.md#how-the-code-is-laid-out. What the user's loop itself
touches is ``sweeps.loop``.
"""
