"""The one adapter between sweeps and Ray's private API: a Ray upgrade touches this package alone.

    from sweeps._ray import compat
    compat.check()              # at sweep start: one line naming the Ray version and what changed

Every private Ray symbol, attribute, file format and environment variable sweeps relies on is
reached through a named function here, whose docstring names the upstream issue and the public
API to move to once Ray has one. ``compat.check()`` imports each of them and checks the
attributes and signatures the functions rely on; ``tests/unit/ray_adapter/test_ray_compat.py``
runs it in seconds without a cluster, so an incompatible Ray fails one fast test and one line
at startup, never a hang mid-sweep.

Modules: ``kv`` (the GCS key-value store), ``placement`` (placement groups, actor states, the
Train controller's worker-group hook), ``train`` (Train's trainer callbacks, the trial
session's result hand-over, env vars it reads), ``tune`` (restoring a Tuner with a new
scheduler, Tune's env vars, reading its experiment state), ``tune_state`` and
``tune_state_file`` (saving Tune's experiment state), ``train_fn`` (Train's per-worker API,
served inline), ``train_snapshot`` (Train's run snapshot), ``shipping`` (runtime-env
packaging: ignore rules, size limit, job config), ``logs`` (Ray's logger names), ``compat``
(the check of all of the above, with ``compat_probes``).
"""

from __future__ import annotations
