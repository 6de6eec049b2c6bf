"""Real Hugging Face checkpoints for tests, built offline in a few hundred milliseconds.

    text = text_checkpoint(tmp_path / "ckpt" / "checkpoint")   # RayTrainReportCallback layout
    model, tokenizer = load_best(tmp_path / "ckpt")

A 1-layer BERT classifier (2 classes, ``neg``/``pos``) with a WordLevel tokenizer trained on a
few sentences, and a 1-layer ViT (8x8 images, 10 classes) with its ``ViTImageProcessor``; both
written with ``save_pretrained``, as the Trainer writes them into each checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TEXTS = ["a good great film", "an awful bad poor film", "the movie was good",
         "the movie was bad", "great acting", "poor plot"]
LABELS = {0: "neg", 1: "pos"}


def text_checkpoint(directory: Path, seed: int = 0) -> Path:
    """A BERT sequence classifier and its fast tokenizer saved in ``directory``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TEXTS, trainers.WordLevelTrainer(
        special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]",
                                        unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]")
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=16,
                        num_labels=2, id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    directory.mkdir(parents=True, exist_ok=True)
    BertForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def vit_checkpoint(directory: Path, channels: int = 3, seed: int = 0) -> Path:
    """A ViT image classifier for 8x8 images and its image processor saved in ``directory``."""
    import torch
    from transformers import ViTConfig, ViTForImageClassification
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    torch.manual_seed(seed)
    config = ViTConfig(image_size=8, patch_size=4, num_channels=channels, hidden_size=16,
                       num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                       num_labels=10)
    processor = ViTImageProcessorPil(do_resize=False, size={"height": 8, "width": 8},
                                     do_rescale=True, rescale_factor=1 / 16,
                                     image_mean=[0.5] * channels, image_std=[0.5] * channels)
    directory.mkdir(parents=True, exist_ok=True)
    ViTForImageClassification(config).save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def quiet() -> None:
    """No progress bars in test output."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
