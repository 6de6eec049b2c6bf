"""One driver per sweep directory: the claim a driver holds while it runs a sweep.

    with hold(claim_store(sweep_dir), this_driver(name, 5, 45), on_lost=stop) as lease:
        ...   # run the sweep; a second driver on the same directory gets SweepBusy

Runs in the sweep driver (and in ``sweeps status``, which only reads). ``holder`` is the claim's
content and the rule that judges it, ``protocol`` the acquire / heartbeat / release cycle; the
exclusive create on a file system or an object store is storage's (``sweeps.storage.claims``).
"""

from sweeps.lease.holder import ClaimVerdict, Holder, describe, judge, read_holder, this_driver
from sweeps.lease.protocol import Lease, acquire, hold, inspect, takeover_line
from sweeps.storage.claims import ClaimStore, LocalClaims, ObjectClaims, claim_store

__all__ = ["Holder", "ClaimVerdict", "describe", "judge", "read_holder", "this_driver", "Lease",
           "acquire", "hold", "inspect", "takeover_line", "ClaimStore", "LocalClaims",
           "ObjectClaims", "claim_store"]
