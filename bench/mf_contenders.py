"""The four contenders of ``python -m bench.mf``, each one run of one task and seed under a
budget of epochs (fidelity steps), one evaluation at a time.

    evaluations = CONTENDERS["dehb"]("mfh3_good", seed=0, budget=3000)
    evaluations[-1]   # (epochs spent so far, the value that evaluation saw)

Every contender returns its evaluations in order: ``(spent, value)``, ``spent`` the epochs spent
once that value was seen. **What an evaluation costs.** A value at fidelity ``f`` costs ``f``
epochs where a trial starts from scratch (DEHB: each of its evaluations pays its whole fidelity,
as carps counts it and as dehb's ``run`` sums "cost aggregated by all function evaluations"),
and one epoch where a running trial goes on from its last report (ASHA's promotions and Optuna's
pruners continue a trial: one run to epoch ``e`` costs ``e``, not the sum of its rungs). No
contender spends past the budget: a trial starts, or goes on, only while its next epoch fits
(``sweeps.search.budget``'s rule), and DEHB stops before the first evaluation that does not fit,
leaving at most one evaluation's epochs unspent.

* ``sweeps-default``: ``bench/conf/experiment/mfhD.yaml`` composed as ``python -m sweeps``
  composes it (``sweep.seed``, ``sweep.budget.epochs`` and ``search.num_samples`` set to the
  run's), checked by ``sweeps.validate`` and settled by ``settle_defaults``; the sampler from
  ``build_sampler`` (TPE with ``tpe_arguments``: 4 start-up trials, multivariate, constant
  liar), trial 1 ``first_point`` (``search.params_first``: the cube's centre), ASHA's
  ``AsyncHalving`` with the config's ``grace_period`` 1, ``reduction_factor`` 3 and ``max_t``
  100, the space parsed by ``sweeps.search.space`` and asked through ``DefineByRun``, the loop
  the experiment names; driven by ``bench.search_sim.replay``, which tells Optuna what Ray's
  ``OptunaSearch`` tells it. Divergence from a sweep: one trial at a time (a sweep runs as many
  as the machine fits), as every contender here runs.
* ``random-asha``: the same with ``search=random``, drawn by Optuna's ``RandomSampler`` seeded
  with ``sweep.seed`` (a sweep draws through Tune's generator: the same uniform distributions,
  other draws); no first point (``params_first`` is for TPE only).
* ``optuna-tpe-hyperband``: plain Optuna as its ``HyperbandPruner`` docs write it:
  ``TPESampler(seed=seed)`` (Optuna 5: 10 start-up trials, multivariate, constant liar),
  ``HyperbandPruner(min_resource=1, max_resource=100, reduction_factor=3)``, an objective that
  reports every epoch (``step`` = the epoch, 1-based, so steps are fidelities; the docs' example
  counts from 0) and raises ``TrialPruned`` when ``should_prune``.
* ``dehb``: the ``dehb`` package (0.1.2) as its README writes it: ``DEHB(f=..., cs=...,
  dimensions=..., min_fidelity=1, max_fidelity=100)`` with ``ask`` and ``tell``, its defaults
  (eta 3, DE ``rand1_bin``) and ``seed=seed``. Also given: ``n_workers=1`` (0.1.2 refuses a
  DEHB without workers or a Dask client, which the README omits) and an ``output_path`` in a
  temporary directory (it writes its log and state there; the default is the working
  directory). Its fidelities are ``100 * 3**-k`` (1.23, 3.70, 11.1, 33.3, 100), truncated to
  whole epochs as carps' mf-prior-bench wrapper truncates them (``int(budget)``): 1, 3, 11,
  33, 100.
"""

from __future__ import annotations

import importlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.mf_loop import benchmark, dims, value_at
from bench.search_sim import replay

__all__ = ["CONTENDERS", "Evaluations", "sweeps_contender", "optuna_tpe_hyperband", "dehb"]

CONF = Path(__file__).resolve().parent / "conf"
Evaluations = list[tuple[int, float]]  # (epochs spent once the value was seen, the value)


def _loop(trainable: str) -> Callable[[dict[str, Any]], Iterator[dict[str, float]]]:
    """The function ``experiment.trainable`` names (``module:function``)."""
    module, _, name = trainable.partition(":")
    return getattr(importlib.import_module(module), name)


def sweeps_contender(overrides: list[str]) -> Callable[[str, int, int], Evaluations]:
    """A contender that runs the task's experiment as a sweep would, with ``overrides``."""

    def run(task: str, seed: int, budget: int) -> Evaluations:
        import optuna

        from sweeps import compose, validate
        from sweeps.search.asha import AsyncHalving
        from sweeps.search.defaults import first_point, params_first, settle_defaults
        from sweeps.search.optuna_space import DefineByRun
        from sweeps.search.samplers import build_sampler
        from sweeps.search.space import parse_space

        cfg = compose(f"mfh{dims(task)}", [
            f"experiment.params.task={task}", f"experiment.params.noise_seed={seed}",
            f"sweep.seed={seed}", f"sweep.budget.epochs={budget}",
            f"search.num_samples={budget}", *overrides], config_dir=CONF)
        validate(cfg)
        cfg = settle_defaults(cfg)
        params = parse_space(dict(cfg.experiment.search_space))[0]
        e, s = cfg.experiment, cfg.scheduler
        sampler = (optuna.samplers.RandomSampler(seed=cfg.sweep.seed)
                   if cfg.search.algorithm == "random" else
                   build_sampler(cfg, conditional=any(p.when for p in params)))
        study = optuna.create_study(direction="minimize" if e.mode == "min" else "maximize",
                                    sampler=sampler)
        if params_first(cfg):  # as OptunaSearch(points_to_evaluate=[...]) enqueues it
            study.enqueue_trial(first_point(cfg, params))
        loop = _loop(e.trainable)
        reports = replay(study, DefineByRun(params), dict(e.params),
                         lambda values, _: (r[e.metric] for r in loop(values)), s.max_t,
                         AsyncHalving(s.grace_period, s.max_t, s.reduction_factor),
                         slots=1, samples=cfg.search.num_samples,
                         sign=-1.0 if e.mode == "min" else 1.0, budget=cfg.sweep.budget.epochs)
        return [(spent, value) for spent, (_, _, value) in enumerate(reports, 1)]

    return run


def optuna_tpe_hyperband(task: str, seed: int, budget: int) -> Evaluations:
    """Optuna's TPE with its Hyperband pruner, every epoch an intermediate value."""
    import optuna

    bench = benchmark(task, seed)
    seen: Evaluations = []

    def objective(trial: optuna.Trial) -> float:
        x = {f"X_{i}": trial.suggest_float(f"X_{i}", 0.0, 1.0) for i in range(dims(task))}
        value = float("nan")
        for step in range(int(bench.start), int(bench.end) + 1):
            if len(seen) + 1 > budget:  # the budget ends it before this epoch
                raise optuna.TrialPruned()
            value = value_at(bench, x, step)
            seen.append((len(seen) + 1, value))
            trial.report(value, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return value

    def stop_when_spent(study: optuna.Study, _: optuna.trial.FrozenTrial) -> None:
        if len(seen) + 1 > budget:  # not one more epoch: no new trial
            study.stop()

    study = optuna.create_study(
        direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(min_resource=1, max_resource=int(bench.end),
                                              reduction_factor=3))
    study.optimize(objective, callbacks=[stop_when_spent])
    return seen


def dehb(task: str, seed: int, budget: int) -> Evaluations:
    """DEHB's ask and tell; each evaluation pays its fidelity in whole epochs."""
    from dehb import DEHB

    bench = benchmark(task, seed)
    seen: Evaluations = []

    def target(config: Any, fidelity: float) -> dict[str, float]:
        epochs = int(fidelity)
        return {"fitness": value_at(bench, dict(config), epochs), "cost": epochs}

    spent = 0
    with tempfile.TemporaryDirectory() as out:
        optimizer = DEHB(f=target, cs=bench.space, dimensions=dims(task),
                         min_fidelity=int(bench.start), max_fidelity=int(bench.end),
                         n_workers=1, seed=seed, output_path=out)
        while True:
            job_info = optimizer.ask()
            if spent + int(job_info["fidelity"]) > budget:
                break
            result = target(config=job_info["config"], fidelity=job_info["fidelity"])
            spent += int(result["cost"])
            seen.append((spent, result["fitness"]))
            optimizer.tell(job_info, result)
    return seen


CONTENDERS: dict[str, Callable[[str, int, int], Evaluations]] = {
    "sweeps-default": sweeps_contender([]),
    "random-asha": sweeps_contender(["search=random"]),
    "optuna-tpe-hyperband": optuna_tpe_hyperband,
    "dehb": dehb,
}
