"""One bracket of asynchronous successive halving (ASHA), in plain Python.

    halving = AsyncHalving(grace_period=1, max_t=9, reduction_factor=3)
    halving.judge("t0", 1, 0.8)     # False: the first result at rung 1 sets the bar
    halving.judge("t1", 1, 0.2)     # True: below the rung's cutoff, stop it

It decides exactly as Ray 2.60's ``ray.tune.schedulers.async_hyperband._Bracket`` (with ``s=0``)
under ``AsyncHyperBandScheduler(brackets=1)``, which is what Tune's ``ASHAScheduler`` runs by
default; ``tests/unit/search/test_schedulers.py`` checks it against Ray's own class on random result
streams. It is ours so the sweep's scheduler reads and writes no private Ray attribute.

* Rungs sit at ``grace_period * reduction_factor**k``, their number computed with Ray's float
  formula ``int(log(max_t / grace_period) / log(reduction_factor) + 1)``, so a rung at ``max_t``
  exists or not as in Ray (it does for 9/1/3, it does not for 1000/1/10, where the quotient is
  2.9999999999999996). Ray uses ``np.log``, this module ``math.log``: they can differ in the
  last bit (21/20 does), but the rung count agrees on every setting of a 217,910-setting grid
  (max_t 1..1000, grace 1..20, eleven factors from 1.1 to 10).
* A rung's cutoff is the ``(1 - 1/rf)`` quantile of the values recorded there, computed the way
  ``np.nanpercentile`` does it (method ``linear``: NaNs dropped, the two order statistics around
  ``(n - 1) * q`` blended with numpy's two-sided lerp); ties are not broken: a value equal to
  the cutoff continues, only ``value < cutoff`` stops.
* Values are signed so that higher is better (the caller multiplies a ``min`` metric by -1).
"""

from __future__ import annotations

import math
from typing import Any

from sweeps.errors import ConfigError

__all__ = ["AsyncHalving", "percentile", "replay_record", "logged_point"]


def percentile(values: list[float], pct: float) -> float:
    """``np.nanpercentile(values, pct)`` for a flat list, bit for bit (method ``linear``).

    Example:
        >>> percentile([1.0, 2.0, 4.0, float("nan")], 50)
        2.0
    """
    data = sorted(float(v) for v in values if not math.isnan(v))
    if not data:
        return math.nan  # numpy: nan (with an "All-NaN slice" warning)
    n = len(data)
    virtual = (n - 1) * (pct / 100)  # numpy divides the percentage by 100 first, as here
    if virtual >= n - 1:  # numpy uses index -1 for both neighbours (so gamma = virtual + 1)
        a = b = data[-1]
        gamma = virtual + 1
    else:
        below = math.floor(virtual)
        a, b, gamma = data[below], data[below + 1], virtual - below
    diff = b - a
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma  # numpy's _lerp


class AsyncHalving:
    """The rungs of one ASHA bracket and the decisions they imply.

    Args:
        grace_period: the lowest rung (epochs): no trial is stopped before it.
        max_t: every trial's budget; with ``stop_last_trials`` a result at or past it stops.
        reduction_factor: rung spacing; about ``1/rf`` of the trials pass each rung.
        stop_last_trials: as Ray's: when False, a trial past ``max_t`` keeps running, and a
            trial recorded at a rung at or below its clock is not judged at a lower rung.
    """

    def __init__(self, grace_period: float, max_t: float, reduction_factor: float,
                 stop_last_trials: bool = True) -> None:
        if not max_t > 0:
            raise ConfigError("scheduler.max_t", max_t, "must be > 0", "set scheduler.max_t=10")
        if not 0 < grace_period <= max_t:
            raise ConfigError("scheduler.grace_period", grace_period,
                              f"must be > 0 and <= scheduler.max_t ({max_t})",
                              "set scheduler.grace_period=1")
        if not reduction_factor > 1:
            raise ConfigError("scheduler.reduction_factor", reduction_factor, "must be > 1",
                              "set scheduler.reduction_factor=3")
        self.grace_period, self.max_t, self.rf = grace_period, max_t, reduction_factor
        self.stop_last_trials = stop_last_trials
        count = int(math.log(max_t / grace_period) / math.log(reduction_factor) + 1)
        # Highest milestone first, as Ray keeps them: a result is judged at the highest rung
        # its clock reached that it is not recorded at.
        self._levels: list[tuple[float, dict[str, float]]] = [
            (grace_period * reduction_factor ** k, {}) for k in reversed(range(count))]

    def rungs(self) -> list[tuple[float, dict[str, float]]]:
        """(milestone, {trial id: signed value}) per rung, highest milestone first (copies)."""
        return [(milestone, dict(recorded)) for milestone, recorded in self._levels]

    def cutoff(self, recorded: dict[str, float]) -> float | None:
        """The value a trial must reach at a rung holding ``recorded`` (None: empty rung)."""
        if not recorded:
            return None
        return percentile(list(recorded.values()), (1 - 1 / self.rf) * 100)

    def on_result(self, trial_id: str, clock: float, value: float) -> bool:
        """Record ``value`` at the highest rung ``clock`` reached where ``trial_id`` has none;
        True when it is below that rung's cutoff (stop the trial). Ray's ``_Bracket.on_result``.
        """
        for milestone, recorded in self._levels:
            if clock >= milestone and trial_id in recorded and not self.stop_last_trials:
                return False  # passed this rung already; lower ones were decided before
            if clock < milestone or trial_id in recorded:
                continue
            stop = self._stops(recorded, value)
            recorded[trial_id] = value
            return stop
        return False

    def _stops(self, recorded: dict[str, Any], value: Any) -> bool:  # below the cutoff
        cutoff = self.cutoff(recorded)
        return cutoff is not None and value < cutoff

    def judge(self, trial_id: str, clock: float, value: float) -> bool:
        """Whether to stop a running trial on this result (True at ``max_t`` when
        ``stop_last_trials``, without recording it, as Ray's scheduler does)."""
        if clock >= self.max_t and self.stop_last_trials:
            return True
        return self.on_result(trial_id, clock, value)

    def describe(self) -> str:
        """Each rung's milestone and current cutoff, as Ray's ``debug_str``."""
        return "Bracket: " + " | ".join(f"Iter {m:.3f}: {self.cutoff(r)}" for m, r in self._levels)


def replay_record(halving: AsyncHalving, record: dict, point: Any) -> bool | None:
    """Re-apply one record of the scheduler's decision log to ``halving``, as the scheduler judged
    it: ``point`` is the record's value as the rungs compare it (signed so that higher is better; a
    tuple for ``sweeps.search.moasha.MOHalving``), None for a record without one. A judged result is
    judged again (the stop decision is returned); a trial's end is recorded only (None).

    Example:
        >>> h = AsyncHalving(1, 9, 3)
        >>> replay_record(h, {"trial": "a", "epoch": 1}, 0.9)
        False
        >>> replay_record(h, {"trial": "b", "epoch": 1}, 0.1)
        True
    """
    if "epoch" not in record or point is None:
        return None
    if record.get("end"):
        halving.on_result(record["trial"], record["epoch"], point)
        return None
    return halving.judge(record["trial"], record["epoch"], point)


def logged_point(record: dict, modes: dict[str, str]) -> Any:
    """A decision-log record's value as the rungs compare it: signed so that higher is better
    (``modes``: objective -> min|max, primary first), or with several objectives the tuple of
    its ``values``, primary first; None for a record without one.

    Example:
        >>> logged_point({"value": 0.2}, {"loss": "min"})
        -0.2
        >>> logged_point({"values": {"acc": 0.9, "n": 5}}, {"acc": "max", "n": "min"})
        (0.9, -5.0)
    """
    sign = {"max": 1.0, "min": -1.0}
    if len(modes) == 1:
        value = record.get("value")
        return None if value is None else sign[next(iter(modes.values()))] * value
    values = record.get("values")
    return None if not values else tuple(values[m] * sign[d] for m, d in modes.items())
