"""A Transformers ``Trainer`` loop on Ray Train, as Ray's Transformers guide writes it.

    python -m sweeps +experiment=hf_text       # conf/experiment/hf_text.yaml

``train_func(config)`` runs on every Train worker: it builds the generated review data and a
word-level tokenizer (``trainables/text_data.py``), a tiny BERT built from a config (random
init, nothing downloaded), ``TrainingArguments`` that evaluate and save once per epoch, and a
``Trainer`` with Ray's ``RayTrainReportCallback`` (each save reports the merged logs, with
``eval_accuracy`` and a float ``epoch``, and the checkpoint) and ``prepare_trainer``. After an
interruption it resumes from ``ray.train.get_checkpoint()``. Under Ray Train the process group
is already set up, so the Trainer runs DDP itself: it shards the training set per rank and
gathers the evaluation predictions, so every rank reports the accuracy over the whole eval set.

It imports nothing from ``sweeps``: copy this file and ``text_data.py`` into your project as a
starting point. ``config`` holds the keys below (``DEFAULTS``); the searched ones are passed
straight to ``TrainingArguments``. Two deliberate divergences from the guide:

- each rank gets its own ``output_dir`` (``hf_output/rank<N>`` in Train's working directory,
  removed when the loop ends). Ray Train starts the workers of one node in the same working
  directory, so with the guide's single relative ``output_dir`` every rank's callback would
  find and report rank 0's ``checkpoint-N``, possibly half-written. Here rank 0's folder holds
  the model, tokenizer, optimizer and trainer state, the others only their RNG state, and Ray
  merges the ranks' folders into one ``<checkpoint>/checkpoint/``. ``save_total_limit=2``
  keeps rank 0's folder at two epochs; a trial stopped early (its workers are killed) leaves
  its folder in Ray's session directory, as it leaves its logs.
- ``eval_strategy`` (not ``evaluation_strategy``) and ``use_cpu`` (not ``no_cuda``): the names
  transformers 5 kept; ``warmup_steps`` below 1 is a fraction of the steps (``warmup_ratio``
  is gone).

The saved ``checkpoint/`` reloads offline with
``AutoModelForSequenceClassification.from_pretrained(d)`` and ``AutoTokenizer.from_pretrained(d)``.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here needs the Hub: fail, never fetch
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import shutil  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import ray.train  # noqa: E402
import torch  # noqa: E402
from ray.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer  # noqa: E402
from transformers import (  # noqa: E402
    BertConfig,
    BertForSequenceClassification,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
)

try:  # in this package, or copied next to text_data.py into your project
    from .text_data import LABELS, build_tokenizer, make_splits
except ImportError:
    from text_data import LABELS, build_tokenizer, make_splits  # type: ignore[no-redef]

__all__ = ["DEFAULTS", "ReviewDataset", "build_datasets", "build_model", "build_trainer",
           "check_config", "compute_metrics", "train_func"]

DEFAULTS: dict[str, Any] = {
    # searched (TrainingArguments names)
    "learning_rate": 3e-3, "weight_decay": 0.1, "per_device_train_batch_size": 16,
    "warmup_steps": 0.1,
    # fixed
    "num_train_epochs": 6, "seed": 0,
    "n_train": 4000, "n_eval": 500, "label_noise": 0.05, "max_length": 32,
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "initializer_range": 0.2,
}


def check_config(config: dict[str, Any], world_size: int = 1) -> dict[str, Any]:
    """``config`` over ``DEFAULTS``, refused with one line when a key is unknown (a typo would
    otherwise train with the default) or when a worker's batch exceeds its shard (the Trainer
    would silently take one short step per epoch).

    Example:
        >>> check_config({"learning_rate": 0.01})["per_device_train_batch_size"]
        16
        >>> check_config({"learning_rat": 0.01})
        Traceback (most recent call last):
        ...
        ValueError: unknown config key(s) ['learning_rat']; known: ...
        >>> check_config({"n_train": 100, "per_device_train_batch_size": 64}, world_size=2)
        Traceback (most recent call last):
        ...
        ValueError: per_device_train_batch_size=64 is larger than this worker's shard of 50 ...
    """
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown config key(s) {unknown}; known: {', '.join(DEFAULTS)}")
    c = {**DEFAULTS, **config}
    shard = -(-int(c["n_train"]) // world_size)  # the Trainer's sampler: ceil(n / world)
    batch = int(c["per_device_train_batch_size"])
    if batch > shard:
        raise ValueError(
            f"per_device_train_batch_size={batch} is larger than this worker's shard of {shard} "
            f"training reviews (n_train={c['n_train']} over {world_size} workers); lower it "
            "or raise n_train")
    return c


class ReviewDataset(torch.utils.data.Dataset):
    """Tokenized texts and labels, one dict per item (the Trainer's collator pads them)."""

    def __init__(self, texts: list[str], labels: list[int],
                 tokenizer: PreTrainedTokenizerFast) -> None:
        self.encodings = tokenizer(texts, truncation=True)
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {"input_ids": self.encodings["input_ids"][i],
                "attention_mask": self.encodings["attention_mask"][i],
                "labels": self.labels[i]}


def build_datasets(config: dict[str, Any]
                   ) -> tuple[ReviewDataset, ReviewDataset, PreTrainedTokenizerFast]:
    """(train, eval, tokenizer), the same on every rank (generated with ``config["seed"]``).

    Example:
        >>> train, ev, tok = build_datasets({**DEFAULTS, "n_train": 40, "n_eval": 10})
        >>> len(train), len(ev), sorted(train[0])
        (40, 10, ['attention_mask', 'input_ids', 'labels'])
    """
    c = {**DEFAULTS, **config}
    (train_x, train_y), (eval_x, eval_y) = make_splits(
        int(c["n_train"]), int(c["n_eval"]), seed=int(c["seed"]),
        label_noise=float(c["label_noise"]))
    tokenizer = build_tokenizer(train_x, max_length=int(c["max_length"]))
    return (ReviewDataset(train_x, train_y, tokenizer), ReviewDataset(eval_x, eval_y, tokenizer),
            tokenizer)


def build_model(config: dict[str, Any], tokenizer: PreTrainedTokenizerFast
                ) -> BertForSequenceClassification:
    """A tiny BERT for ``len(LABELS)`` classes, randomly initialised from ``config["seed"]``.

    Example:
        >>> _, _, tok = build_datasets({"n_train": 40, "n_eval": 4})
        >>> build_model({}, tok).config.id2label[1]
        'food_neg'
    """
    c = {**DEFAULTS, **config}
    torch.manual_seed(int(c["seed"]))
    return BertForSequenceClassification(BertConfig(
        vocab_size=len(tokenizer), hidden_size=int(c["hidden_size"]),
        num_hidden_layers=int(c["num_hidden_layers"]),
        num_attention_heads=int(c["num_attention_heads"]),
        intermediate_size=int(c["intermediate_size"]),
        max_position_embeddings=max(64, int(c["max_length"])),
        initializer_range=float(c["initializer_range"]),
        pad_token_id=tokenizer.pad_token_id, num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)}))


def compute_metrics(eval_pred: Any) -> dict[str, float]:
    """Accuracy of the argmax over the logits; the Trainer reports it as ``eval_accuracy``.

    Example:
        >>> compute_metrics((np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([1, 1])))
        {'accuracy': 0.5}
    """
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def build_trainer(config: dict[str, Any], output_dir: str, world_size: int = 1) -> Trainer:
    """The ``Trainer`` of one of ``world_size`` workers, without Ray: evaluate and save every
    epoch into ``output_dir`` (keeping the last 2 local checkpoints), log the training loss
    every epoch."""
    c = check_config(config, world_size)
    train_ds, eval_ds, tokenizer = build_datasets(c)
    args = TrainingArguments(
        output_dir=output_dir,
        learning_rate=float(c["learning_rate"]),
        weight_decay=float(c["weight_decay"]),
        per_device_train_batch_size=int(c["per_device_train_batch_size"]),
        per_device_eval_batch_size=128,
        warmup_steps=float(c["warmup_steps"]),
        num_train_epochs=float(c["num_train_epochs"]),
        seed=int(c["seed"]),
        eval_strategy="epoch",
        save_strategy="epoch",
        logging_strategy="epoch",
        save_total_limit=2,
        report_to="none",
        disable_tqdm=True,
        ddp_find_unused_parameters=False,
        use_cpu=not torch.cuda.is_available(),
    )
    return Trainer(model=build_model(c, tokenizer), args=args, train_dataset=train_ds,
                   eval_dataset=eval_ds, processing_class=tokenizer,
                   compute_metrics=compute_metrics)


def train_func(config: dict[str, Any]) -> None:
    """Per-worker loop (Ray Train's ``train_loop_per_worker``) of ``+experiment=hf_text``."""
    context = ray.train.get_context()
    # Ray Train runs the workers of a node in one working directory per run: each rank gets
    # its own folder in it, emptied first of what a killed earlier attempt left there.
    output_dir = os.path.abspath(os.path.join("hf_output", f"rank{context.get_world_rank()}"))
    shutil.rmtree(output_dir, ignore_errors=True)
    try:
        trainer = build_trainer(config, output_dir, context.get_world_size())
        trainer.add_callback(RayTrainReportCallback())  # each save: metrics + checkpoint
        trainer = prepare_trainer(trainer)
        checkpoint = ray.train.get_checkpoint()  # handed back after a crash or a resume
        if checkpoint:
            with checkpoint.as_directory() as d:
                trainer.train(resume_from_checkpoint=os.path.join(
                    d, RayTrainReportCallback.CHECKPOINT_NAME))
        else:
            trainer.train()
    finally:
        shutil.rmtree(output_dir, ignore_errors=True)
