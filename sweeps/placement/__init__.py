"""Guaranteed release of a stopped trial's Train workers (placement group), within seconds.

    tuner = Tuner(..., run_config=tune.RunConfig(callbacks=[PlacementGroupReaper(sweep_id)]))
    RunConfig(callbacks=[PlacementGroupLedger(sweep_id, trial_id)])   # each trial's Train run

Two sides, no State API: ``ledger`` runs in each trial's Train controller and records the
worker group's placement group the moment Train creates it, refusing a new group once the
trial is stopped; ``reaper`` runs in the sweep driver, removes an ended trial's group and, at
the sweep's end, every group the sweep still holds. They meet in Ray's key-value store
(``sweeps._ray.kv``) under ``pg/``, ``ctl/`` and ``stop/`` keys per sweep and trial.

Why (ray#54305), and how step by step: docs/development.md#releasing-a-stopped-trials-workers.
"""
