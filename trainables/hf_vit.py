"""A Transformers ViT on scikit-learn's 8x8 digits, in a plain Ray Train PyTorch loop.

    python -m sweeps +experiment=hf_vit        # conf/experiment/hf_vit.yaml

``train_func(config)`` runs on every Train worker and is written the way Ray Train's PyTorch
guide writes a loop: ``ray.train.torch.prepare_model`` (DDP, and the GPU when the trial has
one), ``prepare_data_loader`` (Ray inserts a ``DistributedSampler``, so each worker trains on its
own shard, and moves batches to the worker's device), ``ray.train.report(metrics,
checkpoint=...)`` every epoch with rank 0 saving, and ``ray.train.get_checkpoint()`` to resume.
Nothing is downloaded: the model is ``ViTForImageClassification`` built from a tiny
``ViTConfig`` (random init), the data is ``sklearn.datasets.load_digits`` (1,797 images, split
once with seed 0 into 1,438 train / 359 validation, the split of ``trainables.digits``).

Each epoch reports ``val_accuracy`` and ``val_loss`` (every rank evaluates the whole
validation split with identical weights, so the values are exact and the same on every rank),
``train_loss`` (averaged over the ranks), ``epoch`` (epochs done, 1-based) and ``world_size``.

Every checkpoint directory holds, at its root::

    config.json, model.safetensors     model.save_pretrained(d)      (the DDP wrapper unwrapped)
    preprocessor_config.json           processor.save_pretrained(d)  (the processor trained with)
    training_state.pt                  {"optimizer": ..., "epoch": epochs done}

so ``ViTForImageClassification.from_pretrained(d)`` and ``AutoImageProcessor.from_pretrained(d)``
reload it offline, and a resumed trial restores model, optimizer and epoch.

**The image processor and its input.** ``build_processor()`` is Transformers'
``ViTImageProcessor`` set up for these images: no resize (they stay 8x8), rescale by 1/16 (the
digits' pixels run 0..16), normalize by the train split's mean and standard deviation. It is
the PIL backend class, ``ViTImageProcessorPil`` (what ``ViTImageProcessor`` falls back to
without torchvision; saved as ``"image_processor_type": "ViTImageProcessor"``, so
``AutoImageProcessor`` reloads it with whichever backend is installed). In transformers 5.23 it
does NOT take a list of 2-D 8x8 arrays ("Could not make a flat list of images") and a 3-D
``(N, 8, 8)`` array fails with "Unable to infer channel dimension format" (or, for N=3, is
read as one 3-channel image). Give it the channel axis and say where it is: an ``(N, 1, 8, 8)``
array (or a list of ``(1, 8, 8)`` arrays) with ``input_data_format="channels_first"``, or PIL
grayscale images. ``pixel_values(processor, images)`` does that for ``(N, 8, 8)`` arrays or
lists of 8x8 arrays and returns the ``(N, 1, 8, 8)`` float tensor the model takes.

A batch size larger than a worker's shard of the training set is refused with a ``ValueError``
naming both: the loader would silently hand each worker its whole shard as one batch, so every
such value in a search would train the same way under different names.

This module imports nothing from ``sweeps``: copy it into your project as a starting point.
``config`` holds the keys of ``DEFAULTS`` (an unknown key is an error, so a typo in the
experiment fails loudly instead of training with a default); any may be searched. Importing it
sets ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` unless already set; that takes effect only if
nothing imported ``transformers`` (or ``huggingface_hub``) earlier in the process, which holds
on Ray Train workers, where this module is the first to import them.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here needs the Hub: fail, never fetch
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import math  # noqa: E402
import tempfile  # noqa: E402
from functools import lru_cache  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import ray.train  # noqa: E402
import ray.train.torch  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from ray.train import Checkpoint  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402
from transformers import ViTConfig, ViTForImageClassification  # noqa: E402

__all__ = ["DEFAULTS", "LABELS", "TRAINING_STATE", "build_model", "build_processor",
           "check_batch_size", "load_split", "pixel_values", "save_checkpoint", "train_func"]

LABELS = [str(d) for d in range(10)]  # id2label: the digit each class is
TRAINING_STATE = "training_state.pt"  # optimizer state and epochs done, next to the model

DEFAULTS: dict[str, Any] = {
    "lr": 1e-3,             # AdamW
    "weight_decay": 0.05,
    "batch_size": 32,       # per worker
    "epochs": 9,            # the sweep sets it to scheduler.max_t
    "hidden_size": 64,      # a multiple of num_heads
    "patch_size": 4,        # divides 8: 2 (16 patches) or 4 (4 patches)
    "num_layers": 2,
    "num_heads": 4,
    "dropout": 0.1,         # hidden and attention dropout
    "seed": 0,
}


@lru_cache(maxsize=1)
def load_split(val_fraction: float = 0.2, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(x_train, y_train, x_val, y_val): float32 ``(N, 8, 8)`` raw pixels in 0..16, int64 labels.

    Example:
        >>> [a.shape for a in load_split()]
        [(1438, 8, 8), (1438,), (359, 8, 8), (359,)]
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.images.astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_val = int(round(len(x) * val_fraction))
    return x[order[n_val:]], y[order[n_val:]], x[order[:n_val]], y[order[:n_val]]


def build_processor() -> transformers.ViTImageProcessorPil:
    """ViT's image processor for the digits: no resize, rescale 0..16 to 0..1, normalize by the
    train split's statistics (computed, so the same on every worker and every run).

    Example:
        >>> p = build_processor()
        >>> p.do_resize, p.rescale_factor, [round(m, 3) for m in p.image_mean]
        (False, 0.0625, [0.305])
    """
    x_train = load_split()[0] / 16.0
    return transformers.ViTImageProcessorPil(
        do_resize=False, do_rescale=True, rescale_factor=1 / 16, do_normalize=True,
        image_mean=[float(x_train.mean())], image_std=[float(x_train.std())])


def pixel_values(processor: Any, images: Any) -> torch.Tensor:
    """``processor`` applied to 8x8 grayscale ``images`` (an ``(N, 8, 8)`` array or a list of
    8x8 arrays): the ``(N, 1, 8, 8)`` float tensor ``model(pixel_values=...)`` takes. Adds the
    channel axis and names it, since the processor refuses 2-D images and guesses 3-D ones.

    Example:
        >>> p = build_processor()
        >>> x = load_split()[2][:5]
        >>> px = pixel_values(p, list(x))
        >>> tuple(px.shape), px.dtype
        ((5, 1, 8, 8), torch.float32)
        >>> expected = (x / 16 - p.image_mean[0]) / p.image_std[0]
        >>> bool(np.allclose(px[:, 0].numpy(), expected, atol=1e-5))
        True
    """
    stacked = np.stack([np.asarray(im, dtype=np.float32) for im in images])
    if stacked.ndim != 3:
        raise ValueError(f"pixel_values: expected 8x8 grayscale images, got an array of shape "
                         f"{stacked.shape}; pass an (N, 8, 8) array or a list of 8x8 arrays")
    return processor(images=stacked[:, None], input_data_format="channels_first",
                     return_tensors="pt")["pixel_values"]


def build_model(hidden_size: int = 64, patch_size: int = 4, num_layers: int = 2,
                num_heads: int = 4, dropout: float = 0.1) -> ViTForImageClassification:
    """A tiny ViT for 1-channel 8x8 images, 10 classes labelled ``"0"``..``"9"`` (random init).

    Example:
        >>> model = build_model(hidden_size=32, patch_size=2)
        >>> model(pixel_values=torch.zeros(3, 1, 8, 8)).logits.shape
        torch.Size([3, 10])
        >>> model.config.id2label[7]
        '7'
    """
    if 8 % patch_size:
        raise ValueError(f"patch_size={patch_size} does not divide the 8x8 image; use 1, 2, 4 "
                         "or 8")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size={hidden_size} is not a multiple of num_heads="
                         f"{num_heads}")
    config = ViTConfig(
        image_size=8, patch_size=patch_size, num_channels=1, hidden_size=hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads,
        intermediate_size=2 * hidden_size, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout, num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})
    return ViTForImageClassification(config)


def check_batch_size(batch_size: int, shard: int, n_train: int, world_size: int) -> None:
    """Refuse a batch larger than a worker's shard (it would silently become the whole shard).

    Example:
        >>> check_batch_size(1024, 719, 1438, 2)
        Traceback (most recent call last):
        ...
        ValueError: batch_size=1024 is larger than this worker's shard of 719 training images ...
    """
    if batch_size > shard:
        raise ValueError(
            f"batch_size={batch_size} is larger than this worker's shard of {shard} training "
            f"images ({n_train} split over {world_size} worker(s)); use batch_size <= {shard} "
            "(or fewer workers)")


def save_checkpoint(directory: str, model: torch.nn.Module, processor: Any,
                    optimizer: torch.optim.Optimizer, epoch: int) -> None:
    """Write model, image processor and training state into ``directory`` (its root)."""
    getattr(model, "module", model).save_pretrained(directory)  # unwrap DDP
    processor.save_pretrained(directory)
    torch.save({"optimizer": optimizer.state_dict(), "epoch": epoch},
               os.path.join(directory, TRAINING_STATE))


def _params(config: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"hf_vit: unknown config key(s) {unknown}; known: {sorted(DEFAULTS)}")
    return {**DEFAULTS, **config}


@torch.no_grad()
def _evaluate(model: torch.nn.Module, loader: DataLoader) -> tuple[float, float]:
    """(accuracy, mean loss) of ``model`` over every batch of ``loader``."""
    model.eval()
    loss_sum, correct, count = 0.0, 0, 0
    for x, y in loader:
        logits = model(pixel_values=x).logits
        loss_sum += torch.nn.functional.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(dim=1) == y).sum().item()
        count += len(y)
    return correct / count, loss_sum / count


def _mean_over_ranks(value: float) -> float:
    if not torch.distributed.is_available() or not torch.distributed.is_initialized():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=ray.train.torch.get_device())
    torch.distributed.all_reduce(t)
    return t.item() / torch.distributed.get_world_size()


def train_func(config: dict[str, Any]) -> None:
    """Per-worker loop for ``+experiment=hf_vit`` (a ``TorchTrainer`` ``train_loop_per_worker``)."""
    p = _params(config)
    context = ray.train.get_context()
    rank, world_size = context.get_world_rank(), context.get_world_size()
    torch.manual_seed(int(p["seed"]))  # the same initial weights on every rank

    start_epoch, optimizer_state = 0, None
    checkpoint = ray.train.get_checkpoint()
    if checkpoint:  # resume: the checkpoint's own architecture, weights, processor, optimizer
        with checkpoint.as_directory() as d:
            model = ViTForImageClassification.from_pretrained(d)
            processor = transformers.ViTImageProcessorPil.from_pretrained(d)
            state = torch.load(os.path.join(d, TRAINING_STATE), map_location="cpu")
        optimizer_state, start_epoch = state["optimizer"], int(state["epoch"])
    else:
        model = build_model(int(p["hidden_size"]), int(p["patch_size"]), int(p["num_layers"]),
                            int(p["num_heads"]), float(p["dropout"]))
        processor = build_processor()

    x_tr, y_tr, x_va, y_va = load_split()
    train_set = TensorDataset(pixel_values(processor, x_tr), torch.from_numpy(y_tr))
    val_set = TensorDataset(pixel_values(processor, x_va), torch.from_numpy(y_va))
    batch_size = int(p["batch_size"])
    check_batch_size(batch_size, math.ceil(len(train_set) / world_size), len(train_set),
                     world_size)  # DistributedSampler's shard: ceil(n / world), padded
    train_loader = ray.train.torch.prepare_data_loader(
        DataLoader(train_set, batch_size=batch_size, shuffle=True))
    # Every rank evaluates the whole validation split (no sampler): exact, identical metrics.
    val_loader = ray.train.torch.prepare_data_loader(
        DataLoader(val_set, batch_size=256), add_dist_sampler=False)

    model = ray.train.torch.prepare_model(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(p["lr"]),
                                  weight_decay=float(p["weight_decay"]))
    if optimizer_state is not None:
        optimizer.load_state_dict(optimizer_state)
        for group in optimizer.param_groups:  # this trial's values, not the saved ones (PBT)
            group["lr"], group["weight_decay"] = float(p["lr"]), float(p["weight_decay"])

    for epoch in range(start_epoch, int(p["epochs"])):
        if world_size > 1:
            train_loader.sampler.set_epoch(epoch)
        model.train()
        loss_sum, steps = 0.0, 0
        for x, y in train_loader:
            loss = model(pixel_values=x, labels=y).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss_sum, steps = loss_sum + loss.item(), steps + 1
        val_accuracy, val_loss = _evaluate(getattr(model, "module", model), val_loader)
        metrics = {"val_accuracy": val_accuracy, "val_loss": val_loss,
                   "train_loss": _mean_over_ranks(loss_sum / steps), "epoch": epoch + 1,
                   "world_size": world_size}
        with tempfile.TemporaryDirectory() as d:
            saved = None
            if rank == 0:
                save_checkpoint(d, model, processor, optimizer, epoch + 1)
                saved = Checkpoint.from_directory(d)
            ray.train.report(metrics, checkpoint=saved)
