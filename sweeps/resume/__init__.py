"""Resume: an interrupted sweep continues where it stopped, or says why it cannot.

    python -m sweeps +experiment=digits      # the same command again, after a crash

``state`` records what a sweep is (``state/sweep.json``) and decides whether a directory can be
resumed; ``train_runs`` repairs a trial's Train run before it restarts; ``notes`` tells the
user what was recovered.
"""
