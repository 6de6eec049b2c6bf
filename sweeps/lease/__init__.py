"""One driver per sweep directory: the claim a driver holds while it runs a sweep.

    with hold(claim_store(sweep_dir), this_driver(name, 5, 45), on_lost=stop) as lease:
        ...   # run the sweep; a second driver on the same directory gets SweepBusy

Runs in the sweep driver (and in ``sweeps status``, which only reads). Its modules:
docs/development.md#how-the-code-is-laid-out.
"""

from sweeps.lease.holder import ClaimVerdict, Holder, describe, judge, read_holder, this_driver
from sweeps.lease.protocol import Lease, acquire, hold, inspect, takeover_line
from sweeps.storage.claims import ClaimStore, LocalClaims, ObjectClaims, claim_store

__all__ = ["Holder", "ClaimVerdict", "describe", "judge", "read_holder", "this_driver", "Lease",
           "acquire", "hold", "inspect", "takeover_line", "ClaimStore", "LocalClaims",
           "ObjectClaims", "claim_store"]
