"""The loop of ``bench/conf/experiment/mfh3.yaml`` and ``mfh6.yaml``, and what a value there is
worth: mf-prior-bench's multi-fidelity Hartmann functions, one epoch per fidelity step.

    for report in objective({"task": "mfh3_good", "noise_seed": 0, "X_0": 0.1, ...}):
        report   # {"value": ..., "epoch": 1}, then epoch 2, ... up to 100

``objective`` is a Tune function trainable that yields its metrics (docs/experiments.md, "From
Ray Tune"): epoch ``e`` reports the task's ``value`` (to minimize) at fidelity ``z = e``, for
``e`` from the task's lowest fidelity (1) to its highest (100), so ``scheduler.max_t`` is the
benchmark's own fidelity range and an epoch costs one fidelity step. ``python -m bench.mf``
replays it without Ray; a sweep of it (``python -m sweeps --config-dir bench/conf
+experiment=mfh3``) was not run here, as no Ray instance could be started beside the suite's.

The tasks (mf-prior-bench 1.10.0, ``mfpbench/synthetic/hartmann``): Hartmann 3 and 6 on the unit
cube, whose coefficients are flattened by a fidelity ``bias`` and raised by a noise ``|N(0, 1)|
* noise`` below full fidelity, both shrinking with ``log z`` to none at ``z = 100``: ``good``
(bias 2.5, noise 2.0), ``moderate`` (3, 3), ``bad`` (3.5, 4), ``terrible`` (4, 5). Full fidelity
is the noiseless Hartmann function, and a lower one is never below it, so no low-fidelity value
flatters a configuration. The noise is seeded by the benchmark's ``seed`` (``noise_seed``; 0
and None mean mf-prior-bench's own 1337) and the configuration, so a repeated query repeats.

**Regret.** ``regret(value, best)``: ``(value - best) / (WORST - best)``, clipped to [0, 1].
``best`` is the task's optimum, mf-prior-bench's ``optimum`` configuration queried at full
fidelity (-3.86278 for Hartmann 3, -3.32237 for Hartmann 6; its coordinates have 6 digits, so a
found point can beat it by less than 1e-9, which the clip makes 0: a Nelder-Mead polish from it
gained 4e-10 and 2e-11). ``WORST`` is 0: every term of a Hartmann function is negative, so 0
bounds its values from above (the cube's corners come within 4e-5 of it) and a regret of 1
means no better than that. Values below full fidelity can be above 0 (bias and noise), hence
the clip at 1.

mf-prior-bench is imported inside the functions that need it: ``bench.mf`` runs them in its
own venv (``bench.venvs``), and the rest of the benchmark imports this module without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mfpbench import Benchmark

__all__ = ["TASKS", "WORST", "objective", "benchmark", "dims", "value_at", "optimum", "regret"]

TASKS = ("mfh3_good", "mfh3_moderate", "mfh3_bad", "mfh3_terrible",
         "mfh6_good", "mfh6_moderate", "mfh6_bad", "mfh6_terrible")
WORST = 0.0  # the supremum of a Hartmann function (every term of its sum is negative)


def dims(task: str) -> int:
    """The task's dimensions, from its name.

    Example:
        >>> dims("mfh6_bad")
        6
    """
    return int(task[3])


def benchmark(task: str, noise_seed: int | None) -> Benchmark:
    """mf-prior-bench's benchmark ``task`` with its noise seeded by ``noise_seed``."""
    import mfpbench

    return mfpbench.get(task, seed=noise_seed)


def value_at(bench: Benchmark, x: dict[str, float], epoch: int) -> float:
    """The task's value at ``x`` (``X_0``, ``X_1``, ...) and fidelity ``epoch``."""
    return float(bench.query(x, at=epoch).error)  # the value metric, to minimize


def objective(config: dict[str, Any]) -> Iterator[dict[str, float]]:
    """The loop: ``{"value": ..., "epoch": e}`` for every fidelity step ``e`` of ``config["task"]``
    at the point ``config["X_0"], ...``."""
    bench = benchmark(config["task"], config["noise_seed"])
    x = {f"X_{i}": float(config[f"X_{i}"]) for i in range(dims(config["task"]))}
    for epoch in range(int(bench.start), int(bench.end) + 1):
        yield {"value": value_at(bench, x, epoch), "epoch": epoch}


@cache
def optimum(task: str) -> float:
    """The task's lowest value: its ``optimum`` configuration at full fidelity (no noise there,
    so any ``noise_seed`` gives it)."""
    bench = benchmark(task, None)
    return value_at(bench, dict(bench.optimum), int(bench.end))


def regret(value: float, best: float) -> float:
    """``value``'s normalized regret on a task whose lowest value is ``best``.

    Example:
        >>> regret(-3.0, -4.0), regret(-4.0, -4.0), regret(0.5, -4.0), regret(-4.1, -4.0)
        (0.25, 0.0, 1.0, 0.0)
    """
    return min(1.0, max(0.0, (value - best) / (WORST - best)))
