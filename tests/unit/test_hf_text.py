"""The Transformers text trainable's pieces without a Ray cluster: the generated reviews
(deterministic, balanced, a fixed eval split, label noise on training labels only, a signal
that needs word order), the word-level tokenizer (deterministic, offline round trip), the config
checks, that the learning rate visibly matters, and the loop itself in Ray Train's local mode
(``ScalingConfig(num_workers=0)``: the function runs in this process, no Ray started)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from trainables.hf_text import (
    DEFAULTS,
    build_datasets,
    build_model,
    build_trainer,
    check_config,
    compute_metrics,
    train_func,
)
from trainables.text_data import (
    LABELS,
    SPECIAL_TOKENS,
    build_tokenizer,
    make_reviews,
    make_splits,
)


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Train on one thread, as a Ray Train worker with 1 CPU does (Ray sets OMP_NUM_THREADS):
    on a busy 2-core machine torch's default threads fight and run ten times slower."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def test_the_trainable_keeps_transformers_offline() -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"  # set by importing the trainable
    assert os.environ.get("TRANSFORMERS_OFFLINE") == "1"


def test_reviews_are_the_same_for_the_same_seed_and_differ_across_seeds() -> None:
    assert make_reviews(300, seed=4, label_noise=0.1) == make_reviews(300, seed=4,
                                                                        label_noise=0.1)
    assert make_reviews(300, seed=4)[0] != make_reviews(300, seed=5)[0]


def test_the_eval_split_is_fixed_whatever_the_training_size() -> None:
    _, small = make_splits(100, 200)
    _, large = make_splits(5000, 200)
    assert small == large
    assert make_splits(100, 200, seed=1)[1] != small  # it follows the seed, not the size


def test_label_noise_touches_only_training_labels_and_not_the_texts() -> None:
    (texts, noisy), (eval_texts, eval_labels) = make_splits(4000, 500, label_noise=0.05)
    clean_texts, clean = make_reviews(4000, seed=0)
    assert texts == clean_texts
    flipped = sum(a != b for a, b in zip(noisy, clean, strict=True)) / len(clean)
    assert 0.04 < flipped < 0.06
    assert (eval_texts, eval_labels) == make_reviews(500, seed=1_000_003)  # clean


def test_the_four_labels_are_balanced() -> None:
    counts = Counter(make_reviews(4000, seed=0)[1])
    assert sorted(counts) == list(range(len(LABELS)))
    assert all(0.22 < n / 4000 < 0.28 for n in counts.values()), counts


def test_the_label_needs_word_order_a_bag_of_words_falls_short() -> None:
    """Negations and distractor clauses: unigram counts leave much on the table, word pairs
    get most of it; the task is learnable, and not by a lookup."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    (x_tr, y_tr), (x_ev, y_ev) = make_splits(4000, 500)
    scores = {}
    for ngrams in [(1, 1), (1, 2)]:
        vec = CountVectorizer(ngram_range=ngrams)
        model = LogisticRegression(max_iter=2000).fit(vec.fit_transform(x_tr), y_tr)
        scores[ngrams] = model.score(vec.transform(x_ev), y_ev)
    assert scores[(1, 1)] < 0.8 and scores[(1, 2)] > 0.85, scores


def test_the_tokenizer_is_deterministic_and_covers_the_training_words() -> None:
    texts = make_reviews(2000, seed=0)[0]
    first, second = build_tokenizer(texts), build_tokenizer(list(texts))
    assert first.get_vocab() == second.get_vocab()
    assert [first.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    words = {w for t in texts for w in t.split()}
    assert words <= set(first.get_vocab())
    ids = first(texts[:50])["input_ids"]
    assert all(s[0] == first.cls_token_id and s[-1] == first.sep_token_id for s in ids)
    assert first.unk_token_id not in {i for s in ids for i in s}


def test_the_tokenizer_round_trips_offline_through_auto_tokenizer(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    texts = make_reviews(500, seed=0)[0]
    tok = build_tokenizer(texts)
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(texts[:20])["input_ids"] == tok(texts[:20])["input_ids"]
    assert loaded.pad_token == "[PAD]" and loaded.model_max_length == 32


def test_datasets_and_model_agree_on_vocabulary_and_labels() -> None:
    train, ev, tok = build_datasets({"n_train": 300, "n_eval": 50})
    model = build_model({}, tok)
    assert model.config.vocab_size == len(tok) and model.config.num_labels == len(LABELS)
    assert model.config.label2id == {name: i for i, name in enumerate(LABELS)}
    assert max(max(train[i]["input_ids"]) for i in range(len(train))) < len(tok)
    assert {ev[i]["labels"] for i in range(len(ev))} <= set(range(len(LABELS)))


@pytest.mark.parametrize(("config", "world_size", "message"), [
    ({"lr": 0.1}, 1, r"unknown config key\(s\) \['lr'\]; known: learning_rate, "),
    ({"epochs": 3, "learning_rate": 0.1}, 1, r"unknown config key\(s\) \['epochs'\]"),
    ({"n_train": 4000, "per_device_train_batch_size": 4096}, 1,
     "per_device_train_batch_size=4096 is larger than this worker's shard of 4000 training "
     r"reviews \(n_train=4000 over 1 workers\)"),
    ({"n_train": 101, "per_device_train_batch_size": 64}, 2,
     "per_device_train_batch_size=64 is larger than this worker's shard of 51 "),
])
def test_bad_config_is_refused_in_one_line(config, world_size, message) -> None:
    with pytest.raises(ValueError, match=message):
        check_config(config, world_size)


@pytest.mark.parametrize(("config", "world_size"), [
    ({}, 2), ({"n_train": 102, "per_device_train_batch_size": 51}, 2),
    ({"n_train": 64, "per_device_train_batch_size": 64}, 1),
])
def test_good_config_passes(config, world_size) -> None:
    assert check_config(config, world_size) == {**DEFAULTS, **config}


def test_compute_metrics_is_the_argmax_accuracy() -> None:
    logits = np.array([[0.1, 0.2, 0.9, 0.0], [2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    assert compute_metrics((logits, np.array([2, 0, 1]))) == {"accuracy": pytest.approx(2 / 3)}


def _accuracies(tmp_path: Path, **config) -> list[float]:
    trainer = build_trainer({"n_train": 2000, "n_eval": 300, "num_train_epochs": 2, **config},
                            str(tmp_path / "out"))
    trainer.train()
    return [h["eval_accuracy"] for h in trainer.state.log_history if "eval_accuracy" in h]


def test_a_good_learning_rate_learns_and_a_bad_one_stays_near_chance(tmp_path: Path) -> None:
    """Two short epochs: a good rate gets at least the topic right (0.5 alone; the sentiment
    under negations comes later), a rate 300x lower does not move off chance (0.25)."""
    good = _accuracies(tmp_path / "good", learning_rate=3e-3)
    bad = _accuracies(tmp_path / "bad", learning_rate=1e-5)
    assert len(good) == len(bad) == 2  # one evaluation per epoch
    assert good[-1] > 0.42 and bad[-1] < 0.32, (good, bad)


def test_the_loop_trains_and_reports_in_ray_train_local_mode(tmp_path: Path) -> None:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    trainer = TorchTrainer(train_func, train_loop_config={
        "n_train": 400, "n_eval": 100, "num_train_epochs": 1, "learning_rate": 1e-2},
        scaling_config=ScalingConfig(num_workers=0),
        run_config=RunConfig(name="local", storage_path=str(tmp_path)))
    try:
        result = trainer.fit()
    finally:
        assert not ray.is_initialized()
    assert {"eval_accuracy", "eval_loss", "loss", "epoch", "step"} <= set(result.metrics)
    assert result.metrics["epoch"] == 1.0 and result.metrics["step"] == 400 // 16


def test_defaults_match_the_experiment_config() -> None:
    from sweeps import compose

    cfg = compose("hf_text", ["scheduler.max_t=3", "sweep.seed=7"])
    params = dict(cfg.experiment.params)
    assert params == {**DEFAULTS, "num_train_epochs": 3, "seed": 7}
    assert set(cfg.experiment.search_space) <= set(params)
    assert (cfg.experiment.metric, cfg.experiment.mode) == ("eval_accuracy", "max")
