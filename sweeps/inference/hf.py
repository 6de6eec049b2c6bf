"""Hugging Face Transformers checkpoints: what one holds and how it loads, offline.

    model, tokenizer = load_pretrained(hf_checkpoint_dir("outputs/hf_text/train/<trial>/<ckpt>"))

Which directory is a Transformers checkpoint is decided once, by
``sweeps.loop.checkpoint.hf_checkpoint_dir``; this module reads such a directory: the model
class its ``config.json`` names, and the tokenizer or image processor saved beside it (the
``Trainer`` saves its ``processing_class`` into every checkpoint). Nothing is downloaded:
``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` default to 1 before Transformers is imported
here, as the built-in Transformers loops do.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["Pretrained", "IMAGE_PROCESSOR_FILE", "TOKENIZER_FILES", "architecture",
           "load_pretrained", "offline", "processor_kind", "task_of", "unsupported"]

class Pretrained(NamedTuple):
    """A Transformers model (eval mode) and what turns raw inputs into its tensors: the
    tokenizer or the image processor saved with it (None if none was).

    Example:
        >>> model, tokenizer = Pretrained("m", "t")
        >>> tokenizer
        't'
    """

    model: Any
    processor: Any


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                   "spiece.model", "sentencepiece.bpe.model")
IMAGE_PROCESSOR_FILE = "preprocessor_config.json"
# The heads sweeps predicts with, and the pipeline task MLflow's transformers flavor logs them
# as (its pyfunc then takes strings: texts, or image paths/URLs/base64).
TASKS = {"ForSequenceClassification": "text-classification",
         "ForImageClassification": "image-classification"}


OFFLINE_ENV = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Within the block, Hugging Face libraries do not reach the Hub (a value the user exported
    wins); the caller's environment is put back afterwards, so a later ``from_pretrained`` of
    theirs still downloads. Loads from a directory also pass ``local_files_only=True``."""
    saved = {name: os.environ.get(name) for name in OFFLINE_ENV}
    for name in OFFLINE_ENV:
        os.environ.setdefault(name, "1")
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def architecture(directory: str | Path) -> str | None:
    """The model class ``config.json`` names (``architectures[0]``), or None.

    Example:
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "config.json").write_text('{"architectures": ["BertForMaskedLM"]}')
        >>> architecture(d)
        'BertForMaskedLM'
    """
    try:
        names = json.loads((Path(directory) / "config.json").read_text()).get("architectures")
    except (OSError, ValueError, AttributeError):
        return None
    return names[0] if names else None


def task_of(arch: str | None) -> str | None:
    """The pipeline task of a model class sweeps predicts with; None for other heads.

    Example:
        >>> task_of("ViTForImageClassification"), task_of("BertForMaskedLM")
        ('image-classification', None)
    """
    return next((task for suffix, task in TASKS.items() if arch and arch.endswith(suffix)), None)


def unsupported(task: str | None, processor: Any, arch: str | None = None) -> str | None:
    """Why a Transformers model cannot run as a sweeps pipeline (``sweeps.predict``, the
    transformers flavor logged to MLflow), or None: its head must be one of ``TASKS`` and a
    tokenizer or image processor must be saved beside it.

    Example:
        >>> unsupported("text-classification", "tok"), unsupported(None, "tok", "BertForMaskedLM")
        (None, 'its head (BertForMaskedLM) is not a sequence or image classifier')
    """
    if task not in TASKS.values():
        return f"its head ({arch or task or 'unknown'}) is not a sequence or image classifier"
    if processor is None:
        return ("no tokenizer or image processor is saved beside it; save one "
                "(Trainer(processing_class=...) or processor.save_pretrained(dir))")
    return None


def processor_kind(directory: str | Path) -> str | None:
    """``tokenizer``, ``image_processor`` or None: what was saved beside the model. When both
    are there (a multimodal processor), an image classifier takes its image processor.

    Example:
        >>> d = Path(tempfile.mkdtemp())
        >>> _ = (d / "preprocessor_config.json").write_text("{}")
        >>> processor_kind(d)
        'image_processor'
    """
    root = Path(directory)
    has_tokenizer = any((root / name).is_file() for name in TOKENIZER_FILES)
    has_images = (root / IMAGE_PROCESSOR_FILE).is_file()
    if has_images and (not has_tokenizer or task_of(architecture(root)) == "image-classification"):
        return "image_processor"
    return "tokenizer" if has_tokenizer else None


def load_pretrained(directory: str | Path) -> Pretrained:
    """The model (eval mode, the class ``config.json`` names) and its tokenizer or image
    processor (None if none was saved) from a Transformers checkpoint directory.

    Example:
        >>> model, tokenizer = load_pretrained(checkpoint_dir)  # doctest: +SKIP
        >>> model(**tokenizer(["a text"], return_tensors="pt")).logits.shape  # doctest: +SKIP
        torch.Size([1, 2])
    """
    root = Path(directory)
    arch = architecture(root)
    with offline(), quiet_transformers():
        import transformers

        model_cls = getattr(transformers, arch, None) if arch else None
        model = (model_cls or transformers.AutoModel).from_pretrained(root, local_files_only=True)
        auto = {"tokenizer": "AutoTokenizer",
                "image_processor": "AutoImageProcessor"}.get(processor_kind(root))
        processor = (getattr(transformers, auto).from_pretrained(root, local_files_only=True)
                     if auto else None)
    return Pretrained(model.eval(), processor)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Transformers' per-load progress bars ("Loading weights", "Writing model shards") and
    notes are for interactive use; a batch job or a sweep's end says what it loaded itself."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
