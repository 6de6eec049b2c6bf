"""Transformers' ``Trainer`` as Ray's Transformers guide writes it: ``RayTrainReportCallback``
and ``prepare_trainer`` on a tiny BERT built from a config (nothing downloaded), resuming from
``ray.train.get_checkpoint()``: the built-in ``+experiment=hf_text`` loop, which imports
nothing from sweeps, at a few seconds' size (its config keys only: it refuses others)."""

from __future__ import annotations

from tests.conformance.observe import note
from trainables.hf_text import DEFAULTS
from trainables.hf_text import train_func as hf_text_train_func


def train_func(config):
    hf_text_train_func({k: v for k, v in config.items() if k in DEFAULTS})
    note(config, "ended")
