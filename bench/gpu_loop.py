"""The loop every side of ``python -m bench.gpu`` runs: a ResNet-18 (the CIFAR stem: a 3x3 first
convolution, no max-pool) on synthetic 32x32 images, written as Ray Train's docs write a
per-worker function. Nothing from sweeps in it.

``config``: ``lr``, ``batch_size``, ``images`` (the training set's size, split over the
workers), ``epochs``, ``width`` (the first stage's channels; 64 is ResNet-18's). Each epoch
reports ``accuracy`` (on 1,024 held-out images), ``loss``, ``epoch``, ``epoch_time_s`` (this
epoch's training and evaluation) and ``gpu_peak_mib`` (torch's allocator peak on this rank's
device, 0 on a CPU), with a checkpoint of the model from rank 0; a restarted trial resumes
from ``ray.train.get_checkpoint()``.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import ray.train
import ray.train.torch
import torch
from ray.train import Checkpoint
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    """ResNet's basic block: two 3x3 convolutions and a shortcut."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = (nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


def resnet18(width: int = 64, classes: int = 10) -> nn.Module:
    layers: list[nn.Module] = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width),
                               nn.ReLU()]
    cin = width
    for stage, stride in enumerate((1, 2, 2, 2)):
        cout = width * 2 ** stage
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def synthetic(images: int, seed: int) -> TensorDataset:
    """Ten classes, each a fixed random image plus noise: learnable, and nothing to download."""
    gen = torch.Generator().manual_seed(0)
    prototypes = torch.randn(10, 3, 32, 32, generator=gen)
    gen.manual_seed(seed)
    y = torch.randint(0, 10, (images,), generator=gen)
    x = prototypes[y] + 2.0 * torch.randn(images, 3, 32, 32, generator=gen)
    return TensorDataset(x, y)


def train_func(config: dict[str, Any]) -> None:
    model = ray.train.torch.prepare_model(resnet18(int(config.get("width", 64))))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    batch = int(config.get("batch_size", 256))
    train_loader = ray.train.torch.prepare_data_loader(
        DataLoader(synthetic(int(config.get("images", 10_000)), seed=1), batch_size=batch,
                   shuffle=True))
    val_loader = ray.train.torch.prepare_data_loader(
        DataLoader(synthetic(1024, seed=2), batch_size=batch))
    device = ray.train.torch.get_device()
    start = 0
    if checkpoint := ray.train.get_checkpoint():
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "model.pt"), map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
    for epoch in range(start, int(config.get("epochs", 3))):
        began = time.perf_counter()
        if ray.train.get_context().get_world_size() > 1:
            train_loader.sampler.set_epoch(epoch)
        model.train()
        for x, y in train_loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum().item()
                total += len(y)
        metrics = {"accuracy": correct / total, "loss": loss.item(), "epoch": epoch,
                   "epoch_time_s": time.perf_counter() - began,
                   "gpu_peak_mib": (torch.cuda.max_memory_allocated(device) / 2**20
                                    if device.type == "cuda" else 0.0)}
        with tempfile.TemporaryDirectory() as d:
            ckpt = None
            if ray.train.get_context().get_world_rank() == 0:
                torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, os.path.join(d, "model.pt"))
                ckpt = Checkpoint.from_directory(d)
            ray.train.report(metrics, checkpoint=ckpt)
