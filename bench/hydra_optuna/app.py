"""The Hydra + Optuna sweeper baseline of ``bench.search_efficiency`` (not part of the product).

    <venv>/bin/python bench/hydra_optuna/app.py --multirun log=/tmp/epochs.jsonl

Runs in its own virtual environment (hydra-optuna-sweeper needs optuna<3), created by
``bench.search_efficiency``. Each Hydra job trains the digits MLP of ``+experiment=digits`` in
one process for ``epochs`` epochs with the sampled values, appends one JSON line per epoch
(``t``, ``trial``, ``epoch``, ``val_acc``) to ``log`` and returns its best ``val_acc`` for the
sweeper to maximise. The batch is ``batch_size x workers``: the global batch a 2-worker DDP trial
of sweeps takes (each worker runs ``batch_size`` on its half of the data), so both search the
same problem epoch for epoch.
"""

from __future__ import annotations

import json
import time

import hydra
import torch
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path="conf", config_name="config")
def main(cfg: DictConfig) -> float:
    from hydra.core.hydra_config import HydraConfig

    from trainables.digits import _optimizer, build_mlp, evaluate, load_split, train_epoch

    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    trial = HydraConfig.get().job.num
    params = {k: cfg[k] for k in ("lr", "optimizer", "momentum", "weight_decay")}
    model = build_mlp(hidden=int(cfg.hidden), depth=int(cfg.depth), dropout=float(cfg.dropout))
    optimizer = _optimizer(params, model)
    x_tr, y_tr, x_va, y_va = (torch.from_numpy(a) for a in load_split())
    batch = int(cfg.batch_size) * int(cfg.workers)
    best = 0.0
    for epoch in range(1, int(cfg.epochs) + 1):
        model.train()
        gen = torch.Generator().manual_seed(cfg.seed * 10_000 + epoch * 100)
        train_epoch(model, optimizer, x_tr, y_tr, torch.randperm(len(x_tr), generator=gen),
                    batch)
        _, correct, count = evaluate(model, x_va, y_va)
        best = max(best, correct / count)
        with open(cfg.log, "a") as f:
            f.write(json.dumps({"t": time.time(), "trial": trial, "epoch": epoch,
                                "val_acc": correct / count}) + "\n")
    return best


if __name__ == "__main__":
    main()
