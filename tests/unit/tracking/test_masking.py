"""Credentials never reach a tracking server."""

from __future__ import annotations

import pytest

from sweeps.tracking.masking import MASK, mask_params, mask_tree


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [("db.password", "hunter2", MASK), ("api_key", "abc", MASK), ("auth_token", "x", MASK),
     ("aws.secret_access_key", "y", MASK), ("HF_TOKEN", "z", MASK), ("passwd", "p", MASK),
     ("password", None, None), ("lr", 0.1, 0.1), ("optimizer", "adam", "adam"),
     ("note", "ghp_abcdefghijklmnopqrstuvwxyz0123", MASK),
     ("model_url", "https://user:s3cret@host/path", f"https://user:{MASK}@host/path"),
     ("plain_url", "https://host/path", "https://host/path"),
     ("tokenizer", "bpe", "bpe"), ("sort_key", "id", "id"), ("max_tokens", 512, 512),
     ("githubToken", "t", MASK), ("private_key", "k", MASK)],
)
def test_mask_params(key: str, value: object, expected: object) -> None:
    assert mask_params({key: value}) == {key: expected}


def test_mask_tree_masks_nested_values_and_keeps_structure() -> None:
    tree = {"db": {"password": "x", "host": "h"}, "urls": ["postgresql://u:p@h/db"], "n": 1}
    assert mask_tree(tree) == {"db": {"password": MASK, "host": "h"},
                               "urls": [f"postgresql://u:{MASK}@h/db"], "n": 1}
