"""A per-worker training loop written the way Ray Train's docs write it.

It imports neither ``sweeps`` nor ``trainables``: the tests copy this file into a user project
outside the checkout and point an experiment at it. Besides its metrics it reports what it
received (``lr_seen``, ``hidden_seen``), so a test can check each trial got its own values.
``SLOW_EPOCH_S`` (env) makes each epoch sleep, so a test can kill the sweep mid-trial.
"""

import os
import tempfile
import time

import ray.train
import ray.train.torch
import torch
from ray.train import Checkpoint
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def _data(n=512, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=gen)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return TensorDataset(x, y)


def train_func(config):
    lr = config.get("lr", 1e-3)
    hidden = config["hidden"]
    epochs = config.get("epochs", 6)
    model = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 2))
    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    train_loader = ray.train.torch.prepare_data_loader(
        DataLoader(_data(), batch_size=32, shuffle=True))
    val = _data(256, seed=1)

    start = 0
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as checkpoint_dir:
            state = torch.load(os.path.join(checkpoint_dir, "model.pt"))
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            start = state["epoch"] + 1

    for epoch in range(start, epochs):
        if ray.train.get_context().get_world_size() > 1:
            train_loader.sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            accuracy = (model(val.tensors[0]).argmax(1) == val.tensors[1]).float().mean().item()
        time.sleep(float(os.environ.get("SLOW_EPOCH_S", "0")))
        metrics = {"val_accuracy": accuracy, "loss": loss.item(), "epoch": epoch,
                   "lr_seen": lr, "hidden_seen": hidden, "resumed_from": start}
        with tempfile.TemporaryDirectory() as temp_checkpoint_dir:
            checkpoint = None
            if ray.train.get_context().get_world_rank() == 0:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, os.path.join(temp_checkpoint_dir, "model.pt"))
                checkpoint = Checkpoint.from_directory(temp_checkpoint_dir)
            ray.train.report(metrics, checkpoint=checkpoint)


def _claim(claims_dir, behaviors):
    """This trial's behaviour: the next one not yet taken (one per trial, kept on retries)."""
    name = ray.train.get_context().get_experiment_name()  # the Train run: one per trial
    mine = os.path.join(claims_dir, f"trial-{name}")
    if os.path.exists(mine):
        with open(mine) as f:
            return f.read()
    for behavior in behaviors:
        try:
            os.close(os.open(os.path.join(claims_dir, f"slot-{behavior}"),
                             os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        with open(mine, "w") as f:
            f.write(behavior)
        return behavior
    return behaviors[0]


BEHAVIORS = ["wrong_metric", "nan", "raises", "no_epoch", "float_epoch", "ok"]


def train_diverges(config):
    """Reports one epoch, then raises: every trial of a sweep of it fails."""
    ray.train.report({"val_accuracy": 0.5, "epoch": 1})
    raise FloatingPointError(f"loss is nan at epoch 2 (lr={config['lr']:.3g})")


def train_misbehaving(config):
    """One behaviour per trial, in the order trials start (see ``BEHAVIORS``)."""
    os.makedirs(config["claims_dir"], exist_ok=True)
    behavior = _claim(config["claims_dir"], BEHAVIORS)
    lr = config["lr"]
    for epoch in range(3):
        if behavior == "wrong_metric":
            ray.train.report({"accuracy": 0.5, "epoch": epoch})
        elif behavior == "nan":
            ray.train.report({"val_accuracy": float("nan"), "epoch": epoch})
        elif behavior == "raises":
            if epoch == 1:
                raise ValueError(f"loss exploded (lr={lr})")
            ray.train.report({"val_accuracy": 0.5, "epoch": epoch})
        elif behavior == "no_epoch":
            ray.train.report({"val_accuracy": 0.6 + 0.01 * epoch})
        elif behavior == "float_epoch":  # as the Transformers callback reports it
            ray.train.report({"val_accuracy": 0.7 + 0.01 * epoch, "epoch": float(epoch + 1)})
        else:
            ray.train.report({"val_accuracy": 0.8 + 0.01 * epoch, "epoch": epoch + 1})
