"""Run a sweep from a validated config: plan, start (or join) Ray, fit, summarize, release.

    from sweeps import compose, run_sweep
    result = run_sweep(compose("digits", ["search.num_samples=4"]))
    result.best["checkpoint"]

Every check that can fail on user input runs before Ray starts (``prepare``). A Ray instance
this function starts is shut down by it; a running one (``ray.init`` done by the caller, or
``ray.address``) is left running, with every placement group of the sweep released. The steps'
modules: docs/development.md#how-the-code-is-laid-out.
"""

from __future__ import annotations

import logging
from typing import Any

from sweeps.config.schema import SweepConfig
from sweeps.driver.interrupt import Interrupt
from sweeps.driver.prepare import Prepared, check_config, prepare, sweep_dir_of
from sweeps.driver.ray_session import ray_session
from sweeps.errors import StorageFull, SweepError, SweepInterrupted
from sweeps.lease import claim_store, hold, this_driver
from sweeps.report.result import SweepResult
from sweeps.storage import trees
from sweeps.storage.location import display
from sweeps.storage.preflight import check_writable

__all__ = ["Prepared", "SweepResult", "SweepInterrupted", "prepare", "run_sweep", "sweep_dir_of"]

log = logging.getLogger(__name__)


def run_sweep(cfg: SweepConfig, prepared: Prepared | None = None) -> SweepResult:
    """Run the sweep ``cfg`` describes to the end (resuming the one in ``sweep.dir`` if
    ``sweep.resume`` says so) and return its summary; ``SweepInterrupted`` on Ctrl-C/SIGTERM.

    Example:
        >>> result = run_sweep(compose("digits", ["search.num_samples=4"]))  # doctest: +SKIP
        >>> result.best["trial_id"]  # doctest: +SKIP
        '9a6685fe'
    """
    from sweeps.driver.fit import fit

    check_config(cfg)  # bad input is refused before the claim, the first thing written there
    sweep_dir = sweep_dir_of(cfg)
    check_writable(sweep_dir)
    made = trees.first_missing(sweep_dir)  # what the claim creates, removed if prepare refuses
    interrupt = Interrupt(cfg.sweep.name, cfg.sweep.stop_grace_s)
    me = this_driver(cfg.sweep.name, cfg.sweep.lease_heartbeat_s, cfg.sweep.lease_expiry_s)
    try:
        with interrupt.handling_sigterm(), \
                hold(claim_store(sweep_dir), me, on_lost=interrupt.lost) as lease:
            interrupt.lease = lease
            if lease.taken_over:
                print(f"sweeps: {lease.taken_over}", flush=True)
            try:
                prep = _current(prepared, cfg, lease.gen)
            except BaseException:
                interrupt.closing = True
                lease.withdraw()  # refused before anything ran: the claim as it was before
                if made is not None:  # and no directory left
                    trees.remove_empty(sweep_dir / "state" / "claims", up_to=made)
                raise
            try:
                result = _run(cfg, prep, interrupt, fit)
                lease.me.stopped_by = ""  # a SIGTERM it outlived stopped nothing
                return result
            finally:
                interrupt.closing = True  # a SIGTERM from here on lets the release finish
    except (SweepError, KeyboardInterrupt):
        raise
    except Exception as exc:  # the driver's own write refused: one line, not a traceback
        from sweeps.storage.full import storage_refusal

        found = storage_refusal(exc, within=sweep_dir)
        if found is None:
            raise
        raise StorageFull(found.line(display(sweep_dir))) from exc


def _current(prepared: Prepared | None, cfg: SweepConfig, gen: int) -> Prepared:
    """``prepared``, if it was made while no driver held the sweep directory and no driver
    claimed it since (the claim taken is the next generation); else it is prepared again."""
    if prepared is None or prepared.claim_gen < 0 or prepared.claim_gen + 1 != gen:
        return prepare(cfg)
    return prepared


def _run(cfg: SweepConfig, prep: Prepared, interrupt: Interrupt, fit: Any) -> SweepResult:
    from sweeps._ray import compat

    compat.check()  # a Ray whose internals changed fails here, in one line, before anything starts
    for warning in prep.warnings:
        log.warning(warning)
    for note in prep.notes:
        log.info(note)  # what the plan's "note:" says, once, when the sweep starts
    res = prep.resources
    if res.max_concurrent_trials > res.trials_that_fit:
        log.warning("search.max_concurrent_trials=%d but only %d trial(s) fit at once; the "
                    "rest wait for resources", res.max_concurrent_trials, res.trials_that_fit)
    prep.sweep_dir.mkdir(parents=True, exist_ok=True)
    with ray_session(cfg, prep, interrupt):
        return fit(prep, interrupt)
