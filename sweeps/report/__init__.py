"""Report: what the user sees and keeps.

    python -m sweeps +experiment=digits sweep.dry_run=true     # dry_run: the plan
    python -m sweeps status outputs/digits                     # status: is it running?

``progress`` is the live view; ``summary`` the end-of-sweep table (``summary.csv``,
``best.json``), with ``pareto`` (a multi-objective sweep's front) and ``exploits`` (what PBT
did); ``console`` prints it; ``plots`` draws it; ``best`` loads the best model
(``sweeps.load_best``); ``dry_run`` prints the plan and starts nothing; ``status`` reads a sweep
directory, running or not, and says who runs it, how far it got and how to resume it.
"""
