"""The short path for a training loop: restore, report an epoch, checkpoint in one call each.

    from sweeps import TrialSession

    def train(config: dict) -> None:            # experiment.trainable: mypkg.mod:train
        session = TrialSession(config)
        model = session.build_model(build_net, hidden=config["hidden"])
        opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
        for epoch in session.epochs(model, opt):     # resumes after the last checkpoint
            ...train one epoch...
            session.report(epoch, {"val_acc": acc}, model, opt)

Optional: any Ray Train loop runs in a sweep unchanged (what ``report`` adds and when it
checkpoints: docs/experiments.md#the-short-path-trialsession). ``config`` is the trial's flat
hyperparameter dict (``session.params`` is the same dict); the epoch budget, seed and checkpoint
cadence come from ``sweeps.trial_context()``. Outside a sweep (a plain ``TorchTrainer``) the
session trains ``max_epochs`` epochs (argument, else ``config["epochs"]``, else 1).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from sweeps.loop.checkpoint import factory_ref, load_checkpoint, save_checkpoint
from sweeps.loop.context import in_trial, trial_context
from sweeps.protocol import checkpoint_dir_name

__all__ = ["TrialSession", "load_optimizer_state"]

# torch.optim param-group entries that are the trial's choice, not training state
HYPERPARAMETERS = frozenset({"lr", "weight_decay", "momentum", "dampening", "nesterov", "betas",
                             "eps", "alpha", "amsgrad"})


def load_optimizer_state(optimizer: Any, state: dict[str, Any]) -> None:
    """``optimizer.load_state_dict(state)`` keeping the optimizer's own hyperparameters.

    They are this trial's config, not the checkpoint's: after a PBT exploit the checkpoint is
    the donor's and the config the explored one (Ray's PBT examples reset
    ``param_group["lr"]`` the same way). The moments and step counts are the checkpoint's.

    Example:
        >>> import torch
        >>> w = [torch.nn.Parameter(torch.zeros(1))]
        >>> donor = torch.optim.SGD(w, lr=0.5, momentum=0.9).state_dict()
        >>> mine = torch.optim.SGD(w, lr=0.1, momentum=0.8)
        >>> load_optimizer_state(mine, donor)
        >>> mine.param_groups[0]["lr"], mine.param_groups[0]["momentum"]
        (0.1, 0.8)
    """
    chosen = [{k: v for k, v in group.items() if k in HYPERPARAMETERS}
              for group in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, values in zip(optimizer.param_groups, chosen, strict=False):
        group.update(values)


class TrialSession:
    """Per-worker view of the trial: params, rank, device, restore and report."""

    def __init__(self, config: dict[str, Any], max_epochs: int | None = None) -> None:
        import ray.train
        import ray.train.torch

        self.params: dict[str, Any] = config
        if in_trial():
            ctx = trial_context()
            self.max_epochs, self.checkpoint_every = ctx.max_epochs, ctx.checkpoint_every
            self.seed = ctx.seed
        else:
            self.max_epochs = int(max_epochs or config.get("epochs", 1))
            self.checkpoint_every, self.seed = 1, int(config.get("seed", 0))
        train_ctx = ray.train.get_context()
        self.rank: int = train_ctx.get_world_rank()
        self.world_size: int = train_ctx.get_world_size()
        self.device = ray.train.torch.get_device()
        self._model_spec: tuple[str, dict[str, Any]] | None = None
        self._restored_metrics: dict[str, Any] = {}
        self._compute_start = time.perf_counter()

    def build_model(self, factory: Callable[..., Any], **kwargs: Any) -> Any:
        """Build ``factory(**kwargs)``, remember how (for the checkpoint), wrap it for DDP.

        ``factory`` must be a module-level function so ``sweeps.load_model`` can call it again.
        """
        import ray.train.torch
        import torch

        self._model_spec = (factory_ref(factory), dict(kwargs))
        torch.manual_seed(self.seed)  # same init everywhere; DDP also broadcasts rank 0's
        return ray.train.torch.prepare_model(factory(**kwargs))

    def epochs(self, model: Any, optimizer: Any) -> Iterator[int]:
        """Epoch numbers still to run, 1-based, after restoring the latest checkpoint if any."""
        start = self.restore(model, optimizer) + 1
        if start > self.max_epochs and self._restored_metrics:
            # Every epoch was trained before an interruption, but Tune may not have seen the
            # last report: send it again (no checkpoint, no compute) so the trial can close.
            import ray.train

            ray.train.report({**self._restored_metrics, "epoch_time_s": 0.0})
        self._compute_start = time.perf_counter()  # setup (imports, data, model) is not compute
        yield from range(start, self.max_epochs + 1)

    def restore(self, model: Any, optimizer: Any) -> int:
        """Load the trial's latest checkpoint into model and optimizer; return its epoch (or 0)."""
        import ray.train

        checkpoint = ray.train.get_checkpoint()
        if checkpoint is None:
            return 0
        with checkpoint.as_directory() as directory:
            payload = load_checkpoint(directory)
        _unwrap(model).load_state_dict(payload["model_state"])
        load_optimizer_state(optimizer, payload["optimizer_state"])
        self._restored_metrics = dict(payload.get("metrics") or {})
        return int(payload["epoch"])

    def report(self, epoch: int, metrics: dict[str, float], model: Any, optimizer: Any) -> None:
        """Report ``metrics`` for ``epoch``; rank 0 checkpoints when the cadence says so."""
        # epoch_time_s: compute since the previous report returned (reporting excluded), so
        # sweep overhead = wall time - sum of epoch_time_s.
        metrics = {**metrics, "epoch": epoch,
                   "epoch_time_s": time.perf_counter() - self._compute_start}
        try:
            self._report(epoch, metrics, model, optimizer)
        finally:
            self._compute_start = time.perf_counter()

    def _report(self, epoch: int, metrics: dict[str, float], model: Any, optimizer: Any) -> None:
        import ray.train

        due = epoch % self.checkpoint_every == 0 or epoch == self.max_epochs
        if not due:
            ray.train.report(metrics)
            return
        with tempfile.TemporaryDirectory() as tmp:
            checkpoint = None
            if self.rank == 0:
                if self._model_spec is None:
                    raise RuntimeError("build the model with session.build_model(...) so its "
                                       "checkpoint records how to rebuild it")
                factory, kwargs = self._model_spec
                save_checkpoint(tmp, {
                    "model_state": _unwrap(model).state_dict(),
                    "optimizer_state": optimizer.state_dict(), "epoch": epoch, "metrics": metrics,
                    "model_factory": factory, "model_kwargs": kwargs, "params": self.params,
                })
                checkpoint = ray.train.Checkpoint.from_directory(tmp)
            ray.train.report(metrics, checkpoint=checkpoint,
                             checkpoint_dir_name=checkpoint_dir_name(epoch))

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        """Sum ``values`` over all workers (for exact global validation metrics)."""
        import torch
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64)
        if self.world_size > 1 and dist.is_initialized():
            if dist.get_backend() == "nccl":
                tensor = tensor.to(self.device)
            dist.all_reduce(tensor)
        return tensor.cpu().tolist()


def _unwrap(model: Any) -> Any:
    """The module inside a DDP wrapper (its state_dict has no ``module.`` prefix)."""
    return getattr(model, "module", model)
