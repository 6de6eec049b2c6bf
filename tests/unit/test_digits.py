"""The digits trainables' pieces and the checkpoint format, without Ray."""

from __future__ import annotations

import pytest
import torch

from sweeps.loop.checkpoint import (
    CHECKPOINT_FILE,
    load_checkpoint,
    load_model,
    save_checkpoint,
)
from trainables.digits import (
    _fit,
    build_cnn,
    build_mlp,
    count_params,
    evaluate,
    load_split,
    shard,
)


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


@pytest.mark.parametrize(("model", "expected"), [
    (build_mlp(hidden=16, depth=1), 64 * 16 + 16 + 16 * 10 + 10),
    (build_mlp(hidden=8, depth=2), 64 * 8 + 8 + 8 * 8 + 8 + 8 * 10 + 10),
    (build_mlp(hidden=512, depth=4), 826_378),
    (build_cnn(channels=8, blocks=1), 9 * 8 + 2 * 8 + 2 * (9 * 64 + 2 * 8) + 8 * 10 + 10),
])
def test_count_params_counts_trainable_parameters(model: torch.nn.Module, expected: int) -> None:
    assert count_params(model) == expected


def test_count_params_skips_frozen_ones() -> None:
    model = build_mlp(hidden=16, depth=1)
    model[1].weight.requires_grad_(False)
    assert count_params(model) == 16 + 16 * 10 + 10


class _Session:
    """What ``_fit`` reads of a ``TrialSession``: one worker, two epochs, reports kept."""

    params = {"lr": 0.05, "batch_size": 256}
    device, rank, world_size, seed = torch.device("cpu"), 0, 1, 0

    def __init__(self) -> None:
        self.reports: list[dict] = []

    def epochs(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> range:
        return range(1, 3)

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        return values

    def report(self, epoch: int, metrics: dict, model: torch.nn.Module, optimizer) -> None:
        self.reports.append(metrics)


def test_every_report_carries_n_params_as_an_int() -> None:
    session, model = _Session(), build_mlp(hidden=16, depth=1)
    _fit(session, model)
    assert [r["n_params"] for r in session.reports] == [1210, 1210]
    assert all(type(r["n_params"]) is int for r in session.reports)
    assert {"val_acc", "val_loss", "train_loss"} <= set(session.reports[0])
