"""The digits trainables' pieces and the checkpoint format, without Ray."""

from __future__ import annotations

import pytest
import torch

from sweeps.execution.checkpoint import (
    CHECKPOINT_FILE,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from trainables.digits import build_cnn, build_mlp, evaluate, load_split, shard


def test_split_is_fixed_and_disjoint() -> None:
    x_tr, y_tr, x_va, y_va = load_split()
    assert (len(x_tr), len(x_va)) == (1438, 359)
    assert x_tr.shape[1] == 64 and 0.0 <= x_tr.min() and x_tr.max() <= 1.0
    assert set(y_tr.tolist()) == set(range(10)) == set(y_va.tolist())
    again = load_split.__wrapped__()
    assert (again[2] == x_va).all()


@pytest.mark.parametrize(("n", "world"), [(1437, 1), (1437, 2), (1437, 3), (360, 4), (7, 2)])
def test_equal_shards_have_equal_length_and_do_not_overlap(n: int, world: int) -> None:
    shards = [shard(n, r, world) for r in range(world)]
    assert len({len(s) for s in shards}) == 1
    flat = [i for s in shards for i in s.tolist()]
    assert len(flat) == len(set(flat)) and len(flat) >= n - world + 1


def test_unequal_shards_cover_everything() -> None:
    covered = sorted(i for r in range(3) for i in shard(10, r, 3, equal=False).tolist())
    assert covered == list(range(10))


@pytest.mark.parametrize("model", [build_mlp(hidden=16, depth=1), build_mlp(depth=3),
                                   build_cnn(channels=8, blocks=1), build_cnn(channels=12)])
def test_models_map_flat_digits_to_ten_logits(model: torch.nn.Module) -> None:
    assert model(torch.zeros(5, 64)).shape == (5, 10)


def test_checkpoint_roundtrip_rebuilds_the_same_model(tmp_path) -> None:
    torch.manual_seed(1)
    model = build_cnn(channels=8, blocks=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    save_checkpoint(tmp_path, {"model_state": model.state_dict(),
                               "optimizer_state": opt.state_dict(), "epoch": 3,
                               "model_factory": "trainables.digits:build_cnn",
                               "model_kwargs": {"channels": 8, "blocks": 1}})
    assert (tmp_path / CHECKPOINT_FILE).is_file()
    assert not list(tmp_path.glob("*.tmp"))
    assert load_checkpoint(tmp_path)["epoch"] == 3
    loaded = load_model(tmp_path)
    _, _, x_va, y_va = load_split()
    x, y = torch.from_numpy(x_va), torch.from_numpy(y_va)
    assert evaluate(loaded, x, y) == evaluate(model, x, y)
    assert not loaded.training


def test_load_checkpoint_on_a_non_checkpoint_says_so(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="not a sweeps checkpoint"):
        load_checkpoint(tmp_path)
