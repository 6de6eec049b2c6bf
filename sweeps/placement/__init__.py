"""Guaranteed release of a stopped trial's Train workers (placement group), within seconds.

    tuner = Tuner(..., run_config=tune.RunConfig(callbacks=[PlacementGroupReaper(sweep_id)]))
    RunConfig(callbacks=[PlacementGroupLedger(sweep_id, trial_id)])   # each trial's Train run

Two sides, no State API: ``ledger`` in each trial's Train controller, ``reaper`` in the sweep
driver. Why (ray#54305), and how step by step:
docs/development.md#releasing-a-stopped-trials-workers.
"""
