"""System metrics of a trial's processes, sampled in each rank, for its MLflow run.

    with sampled(rank, context.system_metrics, context.run_dir):  # run_loop, in every rank
        loop(config)
    samples = taken_aside(run_dir)        # the sweep driver's tracking: every 10 s, at its end

A thread samples every ``INTERVAL_S`` seconds, before a report when one is due (so a trial
stopped at its first report has one) and as the loop ends: CPU (percent of one core, as
``top``) and resident memory of the process and its children, and with ``nvidia-ml-py`` (as for
MLflow's own) each GPU Ray gave it. Samples go to Ray's key-value store (every rank is a Ray
process), never into a report, so nothing the loop reads back holds one; the driver logs each
at its time under MLflow's ``system/`` names: docs/running.md#tracking-in-detail.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from sweeps._ray import kv
from sweeps._ray.train_fn import before_reports

__all__ = ["INTERVAL_S", "Sampler", "gpu_values", "new_points", "sampled", "taken_aside"]

INTERVAL_S = 5.0  # MLflow's own monitor: 10 s
MB = 1e6  # MLflow's megabytes
_ASIDE = "system/"  # Ray key-value keys of the samples: system/<run dir>/<rank>/<time ns>


def gpu_values(index: int, used_bytes: int, utilization: float) -> dict[str, float]:
    """GPU ``index``'s values by MLflow's names.

    Example:
        >>> gpu_values(3, 2_500_000_000, 87)
        {'gpu_3_utilization_percentage': 87.0, 'gpu_3_memory_usage_megabytes': 2500.0}
    """
    return {f"gpu_{index}_utilization_percentage": float(utilization),
            f"gpu_{index}_memory_usage_megabytes": used_bytes / MB}


def _gpu_readers(visible: str) -> list[Callable[[], dict[str, float]]]:
    """A reader per GPU in ``visible``, named by Ray's index (nvidia-smi's, NVML's); none
    without ``nvidia-ml-py``, which MLflow's own GPU metrics need too."""
    try:
        import pynvml

        pynvml.nvmlInit()
        gpus = {int(d): pynvml.nvmlDeviceGetHandleByIndex(int(d))
                for d in visible.split(",") if d.strip().isdigit()}
    except Exception:  # not installed, no driver
        return []
    return [lambda i=i, g=g: gpu_values(i, pynvml.nvmlDeviceGetMemoryInfo(g).used,
                                        pynvml.nvmlDeviceGetUtilizationRates(g).gpu)
            for i, g in gpus.items()]


class Sampler:
    """Sends a sample of this process every ``interval_s`` (a thread), when ``due`` and when
    closed."""

    def __init__(self, rank: int, send: Callable[[list], None],
                 interval_s: float | None = None) -> None:
        import psutil  # in a Ray process at the least Ray's own copy (ray/thirdparty_files)

        self.prefix = "system/" if rank == 0 else f"system/rank_{rank}/"
        self.send, self.interval_s = send, interval_s or INTERVAL_S
        self._procs: dict[int, Any] = {}
        self._own, self._stop, self._lock = psutil.Process(), threading.Event(), threading.Lock()
        self._last: float | None = None  # when the last sample went (None: none yet)
        self._gpus = _gpu_readers(os.environ.get("CUDA_VISIBLE_DEVICES") or "")
        self._own.cpu_percent()  # CPU use counts from here
        self._thread = threading.Thread(target=self._run, name="sweeps-system-metrics", daemon=True)
        self._thread.start()

    def sample(self) -> list:
        """``[time ms, {MLflow name: value}]`` of this process now."""
        cpu = memory = 0.0
        with contextlib.suppress(Exception):  # psutil.Error: a child ended meanwhile
            found = [self._own, *self._own.children(recursive=True)]
            self._procs = {p.pid: self._procs.get(p.pid, p) for p in found}  # CPU counts on
        for proc in self._procs.values() or [self._own]:
            with contextlib.suppress(Exception):  # it ended meanwhile
                cpu, memory = cpu + proc.cpu_percent(), memory + proc.memory_info().rss / MB
        values = {"process_cpu_utilization_percentage": cpu,
                  "process_memory_usage_megabytes": memory}
        for read in self._gpus:
            with contextlib.suppress(Exception):  # e.g. torch not imported (yet)
                values.update(read())
        return [int(time.time() * 1000), {self.prefix + k: round(v, 1) for k, v in values.items()}]

    def due(self, force: bool = False) -> None:
        """Send a sample if none went yet or the last went ``interval_s`` ago (``force``: now)."""
        with self._lock:
            if force or self._last is None or time.time() - self._last >= self.interval_s:
                self._last = time.time()
                with contextlib.suppress(Exception):  # a lost sample never ends the loop
                    self.send(self.sample())

    def _run(self) -> None:
        start = time.time()
        while not self._stop.wait((self._last or start) + self.interval_s - time.time()):
            self.due()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.due(force=True)


@contextlib.contextmanager
def sampled(rank: int, on: bool, run_dir: str) -> Iterator[None]:
    """A ``Sampler`` sending to Ray's key-value store while the block runs (``on``)."""
    if not on:
        yield
        return
    sampler = Sampler(rank, lambda sample: kv.put(
        f"{_ASIDE}{run_dir}/{rank}/{time.time_ns()}", json.dumps(sample)))
    try:
        with before_reports(sampler.due):
            yield
    finally:
        sampler.close()


def taken_aside(run_dir: str) -> list[list]:
    """The samples the ranks of the trial in ``run_dir`` sent, taken off the store (given a
    sweep's ``train`` directory: what every trial sent, e.g. a stopped trial's last)."""
    samples = []
    for key in sorted(kv.keys(f"{_ASIDE}{run_dir}/")):
        samples.append(json.loads(kv.get(key) or "null"))
        kv.delete(key)
    return [s for s in samples if s]


def new_points(samples: list[list], logged: dict[str, list]) -> tuple[list, dict[str, list]]:
    """(MLflow points ``(name, value, ms, step)``, each name's last ``[ms, step]``) of the
    samples after ``logged`` (each name's last point sent): each at its own time, numbered on
    per name as MLflow's own monitor steps them; a sample not after its name's last was sent.

    Example:
        >>> new_points([[9, {"system/a": 2.0}], [5, {"system/a": 1.0}]], {"system/a": [5, 0]})
        ([('system/a', 2.0, 9, 1)], {'system/a': [9, 1]})
    """
    last, points = dict(logged), []
    for ms, values in sorted(samples, key=lambda sample: sample[0]):
        for name, value in values.items():
            at, step = last.get(name, (-1, -1))
            if ms > at:
                points.append((name, float(value), int(ms), step + 1))
                last[name] = [ms, step + 1]
    return points, last
