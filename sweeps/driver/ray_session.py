"""The Ray instance a sweep runs on, for as long as it runs.

    with ray_session(cfg, prepared, interrupt):    # in run_sweep, inside the claim
        return fit(prepared, interrupt)

On entry: Tune's environment defaults are set (a value the user exported wins), Ray's log goes
to ``<sweep dir>/ray.log`` unless ``sweep.verbose``, a private local Ray instance starts unless
this process is already connected (``ray.init`` by the caller, or ``ray.address`` joined by
``prepare``), and SIGTERM is taken back from ``ray.init`` (``sweeps.driver.interrupt``). On
exit, in reverse: the placement groups still held are counted into ``state/end.json`` (all
of a Ray instance started here, which is then shut down; this job's on a joined one, which
keeps running); the ``ray`` loggers are put back as they were.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from sweeps._ray.logs import RAY_LOGGERS, raylet_notices_logged
from sweeps._ray.tune import tune_env
from sweeps.config.schema import SweepConfig
from sweeps.driver.code_shipping import runtime_env
from sweeps.driver.interrupt import Interrupt
from sweeps.driver.prepare import Prepared
from sweeps.files import make_dirs, write_atomic
from sweeps.layout import SweepLayout
from sweeps.storage.trees import publish

__all__ = ["ray_session", "repeated_steps_quiet"]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def ray_session(cfg: SweepConfig, prepared: Prepared, interrupt: Interrupt) -> Iterator[None]:
    """Ray started (or joined), its log in the sweep directory, and SIGTERM back with
    ``interrupt``'s handler after ``ray.init`` (``Interrupt.handling_sigterm``, in run_sweep,
    puts the previous one back at the end).

    Example:
        >>> interrupt = Interrupt(cfg.sweep.name)  # doctest: +SKIP
        >>> with interrupt.handling_sigterm(), ray_session(cfg, prep, interrupt):  # doctest: +SKIP
        ...     results = tuner.fit()        # Tune returns early on Ctrl-C or SIGTERM
    """
    for key, value in tune_env(cfg.sweep.verbose).items():  # what each is for: tune_env
        os.environ.setdefault(key, value)
    layout = prepared.layout
    with _ray_logs_to_file(layout.ray_log, cfg.sweep.verbose) as attach_ray_log:
        import ray

        # A private local instance unless one is connected. Its workers import the user's
        # modules from the cwd (Ray puts the driver's cwd on their sys.path); code is shipped
        # only when ray.working_dir or ray.py_modules names some (a working_dir replaces the cwd).
        started = not ray.is_initialized()
        if started:
            ray.init(num_cpus=int(prepared.resources.cluster_cpus),
                     num_gpus=int(prepared.resources.cluster_gpus), include_dashboard=False,
                     log_to_driver=cfg.sweep.verbose, runtime_env=runtime_env(cfg),
                     logging_level=logging.INFO if cfg.sweep.verbose else logging.WARNING,
                     configure_logging=cfg.sweep.verbose)
        attach_ray_log()
        try:
            interrupt.reinstall()  # ray.init installs its own SIGTERM handler (it aborts)
            with repeated_steps_quiet():
                yield
        finally:
            _record_release(layout, whole_instance=started)
            if started:
                ray.shutdown()


@contextlib.contextmanager
def _ray_logs_to_file(ray_log: Path, verbose: bool) -> Iterator[Callable[[], None]]:
    """Unless verbose, Ray's own log records go to ``ray_log`` while the sweep runs; the
    ``ray`` loggers are put back as they were afterwards. Yields ``attach``, to call again
    after ``ray.init``: with ``configure_logging=False`` it clears the ``ray`` logger's
    handlers, and Python's last-resort handler would then print Ray's warnings and errors
    (whole Tune tracebacks) on the console."""
    if verbose:
        yield lambda: None
        return
    import ray  # noqa: F401  (its import adds a stderr handler to the "ray" logger: first)

    loggers = [logging.getLogger(name) for name in RAY_LOGGERS]
    saved = [(list(lg.handlers), lg.propagate) for lg in loggers]
    handler = _QuietOnFullDisk(ray_log)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def attach() -> None:
        for lg in loggers:
            lg.handlers, lg.propagate = [handler], False

    attach()
    try:
        with raylet_notices_logged():
            yield attach
    finally:
        with contextlib.suppress(OSError):  # a full disk: its last records are lost, not more
            handler.close()
        for lg, (handlers, propagate) in zip(loggers, saved, strict=True):
            lg.handlers, lg.propagate = handlers, propagate
        try:  # to the object store of a URI sweep directory (a log: a failure only warns)
            publish(ray_log)
        except Exception as exc:
            log.warning("could not upload %s: %s", ray_log.name, exc)


class _QuietOnFullDisk(logging.FileHandler):
    """Ray's log file, which stops (once, with one warning) when its disk refuses a write,
    instead of printing logging's "--- Logging error ---" block for every later record."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        from sweeps.storage.full import storage_refusal

        if storage_refusal(sys.exc_info()[1]) is None:
            super().handleError(record)
            return
        if self.level != logging.CRITICAL + 1:
            self.setLevel(logging.CRITICAL + 1)
            log.warning("%s: no longer written (%s)", self.baseFilename, sys.exc_info()[1])


@contextlib.contextmanager
def repeated_steps_quiet() -> Iterator[None]:
    """Within the block, Optuna's "The reported value is ignored because this `step=N` is
    already reported" is not printed. Ray's ``OptunaSearch`` reports each result at Tune's
    ``training_iteration``, which starts again at 1 when Tune retries a trial (its driver's
    node was lost) or a sweep resumes, so every epoch the trial reports again printed one such
    warning over the progress lines. Harmless: sweeps' Optuna study prunes nothing and judges a
    trial by its final value only.

    Example:
        >>> import optuna, warnings
        >>> trial = optuna.create_study().ask()
        >>> trial.report(0.5, step=1)
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     trial.report(0.6, step=1)
        ...     with repeated_steps_quiet():
        ...         trial.report(0.7, step=1)
        >>> [str(w.message)[:51] for w in seen]  # the first report again, not the second
        ['The reported value is ignored because this `step=1`']
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"The reported value is ignored because "
                                r"this `step=\d+` is already reported", category=UserWarning)
        yield


def _record_release(layout: SweepLayout, whole_instance: bool) -> None:
    """The placement groups still held at the sweep's end, counted into ``state/end.json`` (a
    warning if not 0): all of a Ray instance it started, its own job's on a joined cluster."""
    from sweeps.placement.reaper import held_groups, held_job_groups

    try:
        held = held_groups() if whole_instance else held_job_groups()
    except Exception as exc:  # Ray is already going down: nothing to check against
        log.debug("could not count placement groups: %s", exc)
        return
    if held:
        log.warning("%d placement group(s) still held at sweep end", held)
    make_dirs(layout.state)
    try:
        write_atomic(layout.end, json.dumps({"held_placement_groups": held, "time": time.time()}))
    except OSError as exc:  # a full disk: the sweep says so already; this record is a check
        log.warning("could not write %s: %s", layout.end, exc)
