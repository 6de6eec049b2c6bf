"""The generated review corpus and tokenizer of ``+experiment=hf_text``: no download, no files.

    python -m sweeps +experiment=hf_text        # trainables/hf_text.py builds its data here

Each text is a short review of a dish or a film whose label is its topic and its sentiment
(``food_pos``, ``food_neg``, ``film_pos``, ``film_neg``; chance is 0.25). What makes it a task
rather than a lookup: a negator right before the sentiment word flips it ("the soup was not
good" is negative), and a distractor clause about something else ("but the parking was awful")
carries its own sentiment word that must be ignored, so neither a bag of words nor the first
sentiment word suffices. A share of the training labels (``label_noise``) is replaced by a
random other label; the evaluation labels are clean.

Everything is drawn from ``random.Random`` with a fixed seed, so the same arguments give the same
texts on every worker and every machine. The evaluation split does not depend on the training
size: it is drawn from its own stream, so shrinking ``n_train`` in a test keeps the yardstick.
The tokenizer is a word-level ``tokenizers`` model trained on the training texts (deterministic:
its vocabulary is sorted by frequency, then alphabetically), wrapped as a
``PreTrainedTokenizerFast`` that ``save_pretrained`` / ``AutoTokenizer.from_pretrained`` round-trip
offline.
"""

from __future__ import annotations

import random

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

__all__ = ["LABELS", "make_reviews", "make_splits", "build_tokenizer", "SPECIAL_TOKENS"]

LABELS = ("food_pos", "food_neg", "film_pos", "film_neg")
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

_TOPICS = (  # label index = 2 * topic + (1 if negative)
    ("soup", "pasta", "pizza", "dessert", "salad", "curry", "bread", "steak"),
    ("movie", "plot", "actor", "scene", "soundtrack", "ending", "script", "sequel"),
)
_POSITIVE = ("good", "great", "excellent", "lovely", "superb", "wonderful", "brilliant", "tasty")
_NEGATIVE = ("bad", "awful", "terrible", "poor", "dull", "bland", "dreadful", "boring")
_NEGATORS = ("not", "never", "hardly")
_ASIDES = ("weather", "parking", "queue", "ticket", "waiter", "seat", "traffic", "music")
_OPENERS = ("honestly", "overall", "yesterday", "today", "frankly", "i think", "my friend said",
            "we agreed")
_INTENSIFIERS = ("really", "quite", "very", "so", "truly")
_CLOSERS = ("again", "this time", "as usual", "for once", "tonight")
P_NEGATED, P_ASIDE = 0.2, 0.3  # how often the sentiment is negated / a distractor follows


def _review(rng: random.Random) -> tuple[str, int]:
    """One text and its clean label."""
    topic, negative = rng.randrange(2), rng.random() < 0.5
    negated = rng.random() < P_NEGATED
    words = _NEGATIVE if negative != negated else _POSITIVE  # "not" + positive = negative
    parts = []
    if rng.random() < 0.5:
        parts.append(rng.choice(_OPENERS))
    parts += ["the", rng.choice(_TOPICS[topic]), rng.choice(("was", "is", "seemed"))]
    if rng.random() < 0.4:
        parts.append(rng.choice(_INTENSIFIERS))
    if negated:
        parts.append(rng.choice(_NEGATORS))
    parts.append(rng.choice(words))
    if rng.random() < P_ASIDE:  # the distractor: a sentiment about something else
        parts += [rng.choice(("but", "and", "while")), "the", rng.choice(_ASIDES), "was"]
        if rng.random() < 0.3:
            parts.append(rng.choice(_NEGATORS))
        parts.append(rng.choice(_POSITIVE + _NEGATIVE))
    if rng.random() < 0.3:
        parts.append(rng.choice(_CLOSERS))
    return " ".join(parts), 2 * topic + int(negative)


def make_reviews(n: int, seed: int, label_noise: float = 0.0) -> tuple[list[str], list[int]]:
    """``n`` (text, label) pairs drawn with ``seed``; then a ``label_noise`` share of the labels
    is replaced by a random other label (drawn from its own stream, so the texts and the other
    labels do not depend on ``label_noise``).

    Example:
        >>> texts, labels = make_reviews(3, seed=0)
        >>> len(texts), all(0 <= y < len(LABELS) for y in labels)
        (3, True)
        >>> make_reviews(3, seed=0) == (texts, labels)
        True
    """
    rng = random.Random(seed)
    pairs = [_review(rng) for _ in range(n)]
    texts, labels = [t for t, _ in pairs], [y for _, y in pairs]
    noise = random.Random(f"label-noise-{seed}")  # str seeds hash deterministically
    for i in range(n):
        if noise.random() < label_noise:
            labels[i] = (labels[i] + noise.randrange(1, len(LABELS))) % len(LABELS)
    return texts, labels


def make_splits(n_train: int, n_eval: int, seed: int = 0, label_noise: float = 0.05
                ) -> tuple[tuple[list[str], list[int]], tuple[list[str], list[int]]]:
    """((train texts, labels), (eval texts, labels)). The eval split comes from its own
    stream (``seed + 1_000_003``), so it is the same whatever ``n_train`` is, and is clean."""
    return (make_reviews(n_train, seed, label_noise),
            make_reviews(n_eval, seed + 1_000_003, 0.0))


def build_tokenizer(texts: list[str], max_length: int = 32) -> PreTrainedTokenizerFast:
    """A word-level tokenizer trained on ``texts``: lower-cased, split on whitespace and
    punctuation, ``[CLS] ... [SEP]`` around each text, unknown words as ``[UNK]``.

    Example:
        >>> tok = build_tokenizer(["the soup was good", "the plot was dull"])
        >>> tok.convert_ids_to_tokens(tok("The soup was dull")["input_ids"])
        ['[CLS]', 'the', 'soup', 'was', 'dull', '[SEP]']
        >>> tok("the pasta")["input_ids"][2] == tok.unk_token_id
        True
    """
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=SPECIAL_TOKENS,
                                                             show_progress=False))
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, model_max_length=max_length, pad_token="[PAD]",
        unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
