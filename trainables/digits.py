"""Built-in trainables on scikit-learn's bundled 8x8 digits (1,797 images, no download).

    python -m sweeps +experiment=digits        # train_mlp
    python -m sweeps +experiment=digits_cnn    # train_cnn

The data is split once (seed 0) into 1,438 train / 359 validation images. Each worker trains on
its own equal-size shard of the train split (DDP averages the gradients) and evaluates its shard
of the validation split; the shards' counts are summed across workers, so ``val_acc`` and
``val_loss`` are exact over the whole validation split. The CNN uses GroupNorm, not BatchNorm,
so every rank holds identical weights and rank 0's checkpoint reproduces the reported accuracy.
Every report also carries ``n_params``, the model's trainable parameter count (an int, the same on
every rank), the size objective of ``+experiment=digits_multiobjective``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import torch
from torch import nn

from sweeps.loop.session import TrialSession

__all__ = ["load_split", "shard", "build_mlp", "build_cnn", "train_mlp", "train_cnn", "evaluate",
           "train_epoch", "count_params"]

NUM_CLASSES = 10


@lru_cache(maxsize=1)
def load_split(val_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_val, y_val): float32 pixels scaled to [0, 1], int64 labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_val = int(round(len(x) * val_fraction))
    val, train = order[:n_val], order[n_val:]
    return x[train], y[train], x[val], y[val]


def shard(n: int, rank: int, world_size: int, equal: bool = True) -> np.ndarray:
    """Indices of ``rank``'s shard of ``n`` items. ``equal`` trims so every shard has the same
    length (DDP needs the same number of steps on every worker)."""
    usable = n - n % world_size if equal else n
    return np.arange(usable)[rank::world_size]


def build_mlp(hidden: int = 128, depth: int = 2, dropout: float = 0.1) -> nn.Module:
    """64 -> ``depth`` x (Linear ``hidden``, ReLU, Dropout) -> 10 logits."""
    layers: list[nn.Module] = [nn.Flatten()]
    width = 64
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout)]
        width = hidden
    layers.append(nn.Linear(width, NUM_CLASSES))
    return nn.Sequential(*layers)


class _ResBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        groups = 8 if channels % 8 == 0 else 1
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.GroupNorm(groups, channels), nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.GroupNorm(groups, channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.body(x))


def build_cnn(channels: int = 32, blocks: int = 2, dropout: float = 0.1) -> nn.Module:
    """ResNet-style net for 8x8 inputs: stem conv, ``blocks`` residual blocks, pool, linear."""
    groups = 8 if channels % 8 == 0 else 1
    return nn.Sequential(
        nn.Unflatten(1, (1, 8, 8)),
        nn.Conv2d(1, channels, 3, padding=1, bias=False), nn.GroupNorm(groups, channels),
        nn.ReLU(),
        *[_ResBlock(channels) for _ in range(blocks)],
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(dropout),
        nn.Linear(channels, NUM_CLASSES),
    )


def count_params(model: nn.Module) -> int:
    """Trainable parameters of ``model`` (a DDP wrapper counts as the module it wraps).

    Example:
        >>> count_params(build_mlp(hidden=16, depth=1))  # 64*16+16 + 16*10+10
        1210
    """
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


@torch.no_grad()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float]:
    """(summed loss, correct, count) of ``model`` on ``x``/``y`` in eval mode."""
    model.eval()
    logits = model(x)
    loss = nn.functional.cross_entropy(logits, y, reduction="sum").item()
    correct = (logits.argmax(dim=1) == y).sum().item()
    return loss, float(correct), float(len(y))


def train_epoch(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor,
                y: torch.Tensor, order: torch.Tensor, batch: int) -> float:
    """One pass over ``x[order]`` in batches of ``batch`` (also the Hydra baseline's epoch in
    ``bench/hydra_optuna``); returns the summed training loss."""
    train_loss = 0.0
    for start in range(0, len(order), batch):
        idx = order[start:start + batch]
        loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        train_loss += loss.item() * len(idx)
    return train_loss


def _optimizer(params: dict[str, Any], model: nn.Module) -> torch.optim.Optimizer:
    name = params.get("optimizer", "sgd")
    lr, wd = float(params["lr"]), float(params.get("weight_decay", 0.0))
    if name == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=wd)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=wd,
                               momentum=float(params.get("momentum", 0.9)))
    raise ValueError(f"params.optimizer: {name!r} is not 'sgd' or 'adam'")


def _fit(session: TrialSession, model: nn.Module) -> None:
    """The loop both trainables share: shard, train, evaluate globally, report each epoch."""
    params, device = session.params, session.device
    optimizer = _optimizer(params, model)
    x_tr, y_tr, x_va, y_va = load_split()
    tr = shard(len(x_tr), session.rank, session.world_size)
    va = shard(len(x_va), session.rank, session.world_size, equal=False)
    x_tr, y_tr = torch.from_numpy(x_tr[tr]).to(device), torch.from_numpy(y_tr[tr]).to(device)
    x_va, y_va = torch.from_numpy(x_va[va]).to(device), torch.from_numpy(y_va[va]).to(device)
    batch = int(params.get("batch_size", 64))
    n_params = count_params(model)
    for epoch in session.epochs(model, optimizer):
        model.train()
        gen = torch.Generator().manual_seed(session.seed * 10_000 + epoch * 100 + session.rank)
        order = torch.randperm(len(x_tr), generator=gen).to(device)
        train_loss = train_epoch(model, optimizer, x_tr, y_tr, order, batch)
        loss_sum, correct, count, tl = session.all_reduce_sum(
            [*evaluate(model, x_va, y_va), train_loss])
        session.report(epoch, {
            "val_acc": correct / count, "val_loss": loss_sum / count,
            "train_loss": tl / (len(order) * session.world_size), "n_params": n_params,
        }, model, optimizer)


def train_mlp(config: dict[str, Any]) -> None:
    """Per-worker loop for ``+experiment=digits``: an MLP on the digits."""
    session = TrialSession(config)
    p = session.params
    model = session.build_model(build_mlp, hidden=int(p.get("hidden", 128)),
                                depth=int(p.get("depth", 2)),
                                dropout=float(p.get("dropout", 0.1)))
    _fit(session, model)


def train_cnn(config: dict[str, Any]) -> None:
    """Per-worker loop for ``+experiment=digits_cnn``: a small residual CNN on the digits."""
    session = TrialSession(config)
    p = session.params
    model = session.build_model(build_cnn, channels=int(p.get("channels", 32)),
                                blocks=int(p.get("blocks", 2)),
                                dropout=float(p.get("dropout", 0.1)))
    _fit(session, model)
