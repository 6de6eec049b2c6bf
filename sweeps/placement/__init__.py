"""Guaranteed release of a stopped trial's Train workers (placement group), within seconds.

    tuner = Tuner(..., run_config=tune.RunConfig(callbacks=[PlacementGroupReaper(sweep_id)]))
    RunConfig(callbacks=[PlacementGroupLedger(sweep_id, trial_id)])   # each trial's Train run

Two sides: ``ledger`` runs in each trial's Train controller, ``reaper`` in the sweep driver;
they meet in Ray's key-value store (``sweeps._ray.kv``) under ``pg/``, ``ctl/`` and ``stop/``
keys per sweep and trial.

Why: when Tune stops a trial (ASHA, a stopper, an error), the trial's actor dies and takes the
Train controller and workers with it, or Tune keeps the actor for the next trial
(``trial.reuse_process``) and the Train run goes on in it; either way the workers' placement
group is scoped to the job and stays CREATED, holding their CPUs/GPUs (ray#54305). Ray
Train's own remedy is a detached cleaner actor per run that polls the State API; without
``ray[default]``'s dashboard, or with two Ray instances on one machine, it never succeeds and
the sweep deadlocks after a few trials.

How (no State API involved):

1. ``PlacementGroupLedger`` runs inside each trial's Train controller. It records the worker
   group's placement-group id in Ray's GCS key-value store under the trial's key the moment
   Train creates the group (not once the workers are up: a controller killed during the
   seconds of worker startup would leave an unrecorded group holding its CPUs for the rest of
   the sweep, and a retried trial waiting for them forever). Before any (re)start it checks the
   trial's "stopped" flag and refuses to create a new group once the sweep has ended the trial.
2. ``PlacementGroupReaper`` is a Tune callback in the sweep driver. When a trial completes,
   is stopped or errors, it sets the trial's stopped flag and removes the recorded placement
   group (a no-op when Train already removed it), then keeps watching the key in case a
   restart slipped in, for ``watch_s`` seconds or until the sweep ends (one watcher thread for
   all ended trials).
3. At the end of the sweep the reaper waits until the sweep's Train controllers are gone
   (``join``), then ``release_all`` removes whatever any trial of the sweep recorded and
   ``release_new_groups`` whatever else this job created during the sweep and still holds.

Because the reaper does the job, ``sweeps._ray.train.trainer_class()`` leaves out Ray
Train's per-run cleaner actor: one process fewer per trial and no cleaner that loops forever.
"""
