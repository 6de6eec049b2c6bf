"""One Tune trial: what runs in the Tune trial process (and the processes it keeps).

    tune.with_parameters(run_trial, plan=TrialPlan(...))    # built by sweeps.driver.tuner

``plan`` (``TrialPlan``: everything a trial needs besides its sampled values), ``driver``
(``run_trial``: restore the trial's records, then one attempt on its backend), ``backends``
(the backend interface and its implementations: a Ray Train run, or the loop inline with peers
and a rendezvous), and the trial's records in its run directory: ``clock`` (its progress),
``report_log`` (every report, durably), ``exploit`` (a PBT donor's checkpoint). What the user's
loop itself touches is ``sweeps.loop``.
"""

from __future__ import annotations
