"""python -m bench.search_sim [--experiments digits digits_cnn digits_data] [--seeds 30]
[--candidates ...] [--jobs 2]

Where the default search's knobs were chosen: a replay of a sweep's search and ASHA in one
process, with no Ray, over many seeds, so that a choice of TPE start-up trials or ASHA rungs
is made on 30 seeds rather than on the 5 that ``bench.search_efficiency`` can afford.

What is the same as a sweep: the experiment's search space (``sweeps.search.space`` parsed,
asked through ``sweeps.search.optuna_space.DefineByRun``), Optuna's samplers, ASHA's rule
(``sweeps.search.asha.AsyncHalving``, Ray's bracket decision for decision), what Optuna is told
(every epoch as an intermediate value, the last report as the trial's value, as Ray's
``OptunaSearch`` does), and the training itself: the built-in loops' model, data split,
optimizer, per-worker batch and seed, with the 2 DDP workers' mean gradient computed as one
mean loss over both ranks' batches.

What differs: random search draws through Optuna's ``RandomSampler`` (a sweep's through Tune's
generator: the same distributions, other draws); every epoch takes one time unit, so trials
that run at once report in lock step; as many run at once as on this 2-CPU machine (one, and
``digits_data``'s 2), not as on a larger one; dropout masks are not the workers'; and
``digits_data``'s ranks split the rows as ``shard`` does, not as Ray Data's split does.
The loop itself is ``replay`` (``bench.mf`` drives it too, under a ``sweep.budget.epochs``).
The real sweeps (``bench.search_efficiency --all``) check what this chose.

A contender is ``search x scheduler``; the baseline is random search under the same scheduler.
Per contender: the median over seeds of the best value, and of the epochs until a report first
reaches the target, the median over seeds of random's best (as ``bench.search_efficiency``).
Appends each run (its command, seeds and per-contender summary) to
``bench/results/search_sim.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

    from sweeps.search.asha import AsyncHalving
    from sweeps.search.optuna_space import DefineByRun

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

# A contender is "<search>/<scheduler>": search "random" or "tpeN" (N start-up trials), with
# "+base" when the experiment's params are tried first; scheduler "gXrY" (ASHA, grace period X,
# reduction factor Y) or "none". The baseline of each is "random/<the same scheduler>".
CANDIDATES = ["random/g1r3", "tpe4/g1r3", "tpe2/g1r3", "tpe3/g1r3"]


def parse(contender: str) -> tuple[dict[str, Any] | None, bool, dict[str, Any] | None]:
    """(TPE's kwargs or None for random, params first, ASHA's kwargs or None)."""
    search, _, scheduler = contender.partition("/")
    name, _, base = search.partition("+")
    sampler = None if name == "random" else {"n_startup_trials": int(name[3:])}
    asha = None
    if scheduler != "none":
        grace, _, rf = scheduler[1:].partition("r")
        asha = {"grace_period": int(grace), "reduction_factor": int(rf)}
    return sampler, base == "base", asha


def experiment(name: str) -> tuple[Any, Callable[[dict[str, Any], int, int], Iterator[float]]]:
    """(the composed config, ``curve(values, sweep_seed, trial_no)`` yielding val_acc per epoch)."""
    from sweeps import compose

    cfg = compose(name)
    loops = {"digits": _digits_curve("mlp"), "digits_cnn": _digits_curve("cnn"),
             "digits_data": _data_curve}
    return cfg, loops[name]


def _digits_curve(kind: str) -> Callable[..., Iterator[float]]:
    def curve(params: dict[str, Any], seed: int, trial_no: int) -> Iterator[float]:
        import torch

        from trainables.digits import _optimizer, build_cnn, build_mlp, load_split

        torch.manual_seed(seed)  # TrialSession.build_model: the same init in every trial
        if kind == "mlp":
            model = build_mlp(int(params["hidden"]), int(params["depth"]),
                              float(params["dropout"]))
        else:
            model = build_cnn(int(params["channels"]), int(params["blocks"]),
                              float(params["dropout"]))
        return _train(model, _optimizer(params, model), params, seed, load_split(), True)
    return curve


def _data_curve(params: dict[str, Any], seed: int, trial_no: int) -> Iterator[float]:
    import torch

    from trainables.digits import load_split
    from trainables.digits_data import build_model

    torch.manual_seed(seed * 1000 + trial_no)  # train_func seeds nothing: any init
    model = build_model(int(params["hidden"]), float(params["dropout"]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=params["lr"],
                                  weight_decay=params["weight_decay"])
    return _train(model, optimizer, params, seed, load_split(), False)


def _train(model: Any, optimizer: Any, params: dict[str, Any], seed: int,
           data: tuple[Any, ...], shuffle: bool) -> Iterator[float]:
    """Two DDP ranks' epochs as one process: each step's loss is the mean over both ranks'
    batches of ``batch_size`` (DDP averages the ranks' gradients of their batch means)."""
    import torch
    from torch import nn

    from trainables.digits import shard

    x_tr, y_tr, x_va, y_va = (torch.from_numpy(a) for a in data)
    shards = [shard(len(x_tr), r, 2) for r in (0, 1)]
    batch = int(params["batch_size"])
    epoch = 0
    while True:
        epoch += 1
        model.train()
        orders = []
        for rank, idx in enumerate(shards):
            if shuffle:
                gen = torch.Generator().manual_seed(seed * 10_000 + epoch * 100 + rank)
                idx = idx[torch.randperm(len(idx), generator=gen).numpy()]
            orders.append(torch.from_numpy(idx))
        for start in range(0, len(orders[0]), batch):
            idx = torch.cat([o[start:start + batch] for o in orders])
            loss = nn.functional.cross_entropy(model(x_tr[idx]), y_tr[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            value = float((model(x_va).argmax(1) == y_va).float().mean())
        yield value  # outside no_grad: the caller's next() resumes in grad mode


def simulate(name: str, contender: str, seed: int,
             samples: int | None = None) -> list[tuple[str, int, float]]:
    """One sweep of ``name`` under ``contender``: its reports (trial, epoch, value) in order."""
    import optuna

    from sweeps.search.asha import AsyncHalving
    from sweeps.search.optuna_space import DefineByRun
    from sweeps.search.space import parse_space

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    cfg, curve = experiment(name)
    sampler_kw, params_first, asha_kw = parse(contender)
    params = parse_space(dict(cfg.experiment.search_space))[0]
    sampler = (optuna.samplers.RandomSampler(seed=seed) if sampler_kw is None else
               optuna.samplers.TPESampler(seed=seed, **sampler_kw))
    study = optuna.create_study(direction="maximize", sampler=sampler)
    if params_first:  # the values inside the space, as a sweep's first trial takes them
        from sweeps.search.defaults import first_point

        study.enqueue_trial(first_point(cfg, params))
    max_t = cfg.scheduler.max_t
    halving = AsyncHalving(max_t=max_t, **asha_kw) if asha_kw else None
    return replay(study, DefineByRun(params), dict(cfg.experiment.params),
                  lambda values, trial_no: curve(values, seed, trial_no), max_t, halving,
                  slots=cfg.search.max_concurrent_trials or 1,
                  samples=samples or cfg.search.num_samples)


def replay(study: optuna.Study, space: DefineByRun, fixed: dict[str, Any],
           curve: Callable[[dict[str, Any], int], Iterator[float]], max_t: int,
           halving: AsyncHalving | None, slots: int, samples: int, sign: float = 1.0,
           budget: int | None = None) -> list[tuple[str, int, float]]:
    """A sweep's trials, ``slots`` at a time in lock step (one epoch each per round): each asks
    ``study`` through ``space`` (a ``DefineByRun``), trains ``curve(values, trial_no)`` (the
    trial's values over ``fixed``, the experiment's params) and reports every epoch to Optuna;
    ASHA's ``halving`` judges ``sign * value`` (-1 for a ``min`` metric, as the sweep's
    scheduler signs it); a trial that ``halving`` stops or that reaches ``max_t`` is told its
    last value, as Ray's ``OptunaSearch`` tells it. ``budget`` (``sweep.budget.epochs``) is
    ``sweeps.search.budget``'s rule: a trial starts, or trains its next epoch, only while that
    epoch fits; a trial the budget stops is told its last value, one that never reported is
    left untold (as ``MetricTolerantOptunaSearch`` leaves it). Returns the reports (trial
    number, epoch, value) in order: each one epoch spent.
    """
    running: list[tuple[Any, Iterator[float], int, float | None]] = []
    reports: list[tuple[str, int, float]] = []
    started = 0

    def fits() -> bool:
        return budget is None or len(reports) + 1 <= budget

    while (started < samples and fits()) or running:
        while len(running) < slots and started < samples and fits():
            trial = study.ask()
            exact = space(trial)  # asks every param; returns only the snapped stepped ones
            values = {**fixed, **{k.replace("/", "."): v for k, v in
                                  {**trial.params, **exact}.items()}}
            running.append((trial, curve(values, started), 0, None))
            started += 1
        still = []
        for trial, epochs, done, last in running:
            if not fits():  # the budget stops it at this report
                if last is not None:
                    study.tell(trial, last)
                continue
            value, epoch = next(epochs), done + 1
            reports.append((str(trial.number), epoch, value))
            trial.report(value, epoch)
            stop = epoch >= max_t or (halving is not None and
                                      halving.judge(str(trial.number), epoch, sign * value))
            if stop:
                study.tell(trial, value)
            else:
                still.append((trial, epochs, epoch, value))
        running = still
    return reports


def _one(job: tuple[str, str, int, int | None]) -> tuple[str, str, int, list]:
    import torch

    torch.set_num_threads(1)
    return (*job[:3], simulate(*job))


def summarize(runs: dict[str, dict[str, dict[int, list]]]) -> dict[str, Any]:
    """Per experiment and contender: median best, median epochs to the target (random under
    the same scheduler's median best), reached count, and the ratio to that random's."""
    out: dict[str, Any] = {}
    for name, by_contender in runs.items():
        rows: dict[str, Any] = {}
        for contender, by_seed in by_contender.items():
            base = "random/" + contender.split("/")[1]
            bests = [max(r[2] for r in by_contender[base][s]) for s in by_seed]
            target = statistics.median(bests)
            to_target = [next((i for i, r in enumerate(by_seed[s], 1) if r[2] >= target),
                              math.inf) for s in by_seed]
            rows[contender] = {"target": target,
                               "best": statistics.median(max(r[2] for r in reps)
                                                         for reps in by_seed.values()),
                               "best_per_seed": [max(r[2] for r in by_seed[s]) for s in by_seed],
                               "to_target_per_seed": [None if math.isinf(t) else t
                                                      for t in to_target],
                               "epochs_to_target": statistics.median(to_target),
                               "reached": sum(not math.isinf(t) for t in to_target),
                               "epochs": statistics.median(len(r) for r in by_seed.values())}
        for contender, row in rows.items():
            base = rows["random/" + contender.split("/")[1]]
            row["ratio"] = row["epochs_to_target"] / base["epochs_to_target"]
        out[name] = rows
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiments", nargs="+", default=["digits", "digits_cnn",
                                                             "digits_data"])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--samples", type=int, help="search.num_samples (default: the "
                        "experiment's)")
    parser.add_argument("--out", default=str(RESULTS / "search_sim.json"))
    args = parser.parse_args(argv)
    jobs = [(e, c, s, args.samples) for e in args.experiments for c in args.candidates
            for s in range(args.seeds)]
    runs: dict[str, dict[str, dict[int, list]]] = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for name, contender, seed, reports in pool.map(_one, jobs, chunksize=4):
            runs.setdefault(name, {}).setdefault(contender, {})[seed] = reports
    result = {"command": " ".join(["python -m bench.search_sim", *(argv or sys.argv[1:])]),
              "seeds": args.seeds, "samples": args.samples, "summary": summarize(runs)}
    out = Path(args.out)  # every run is appended: the file holds each setting measured
    earlier = json.loads(out.read_text())["runs"] if out.exists() else []
    out.write_text(json.dumps({"runs": [*earlier, result]}, indent=1) + "\n")
    for name, rows in result["summary"].items():
        print(name)
        for contender, row in rows.items():
            print(f"  {contender:<22} best {row['best']:.4f} to-target "
                  f"{row['epochs_to_target']:>5} ({row['reached']}/{args.seeds}) ratio "
                  f"{row['ratio']:.2f} epochs {row['epochs']}")


if __name__ == "__main__":
    sys.exit(main())
