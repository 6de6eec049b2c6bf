"""The sweep driver: the one process that runs ``python -m sweeps`` (or ``run_sweep``).

    result = run_sweep(cfg)      # sweeps.driver.runner

From a validated config to Tune's run and the sweep's end, all in the driver process:
``prepare`` (every input check, Ray-free, nothing written), ``runner`` (the claim, the Ray
session, fit, the summary), ``ray_session`` (start or join Ray), ``fit`` and ``tuner`` (Tune's
run: search algorithm, scheduler, the trial function and its ``TrialPlan``), ``resources`` (what
a trial reserves and which backend runs it), ``datasets`` (``experiment.datasets``, built once),
``code_shipping`` and ``cluster_address``/``cluster_watch`` (a Ray cluster), ``interrupt`` and
``storage_watch`` (how a run stops early), ``unread`` (searched keys no loop read), ``dry_run``
(the plan ``sweep.dry_run=true`` prints), ``tracking_run`` (the MLflow parent run).
Nothing here runs in a trial: ``sweeps.trial`` is the Tune trial process, ``sweeps.loop`` what
a user's loop touches.
"""
