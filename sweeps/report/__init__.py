"""Report: what the user sees and keeps.

    python -m sweeps status outputs/digits                     # status: is it running?

``progress`` is the live view; ``summary`` the end-of-sweep table (``summary.csv``,
``best.json``) over each trial's whole ``history`` (its earlier starts' reports too), with
``pareto`` (a multi-objective sweep's front) and ``exploits`` (what PBT did); ``console``
prints it; ``plots`` draws it; ``best`` finds the best checkpoint (``sweeps.best_checkpoint``;
loading it is ``sweeps.inference.bundle.load_best``); ``failure`` says why a trial failed in
one line; ``result`` is what ``run_sweep`` returns; ``status`` reads
a sweep directory, running or not, and says who runs it, how far it got and how to resume it.
The plan a dry run prints is the driver's (``sweeps.driver.dry_run``).
"""
