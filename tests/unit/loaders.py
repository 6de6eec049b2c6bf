"""A model loader an experiment can name (``experiment.model_loader``), for the sink tests."""

from __future__ import annotations

from pathlib import Path

import torch


def linear_from_checkpoint(checkpoint_dir: str) -> torch.nn.Module:
    """Rebuild the ``Linear(3, 2)`` whose weights a loop saved as ``weights.pt``."""
    model = torch.nn.Linear(3, 2)
    model.load_state_dict(torch.load(Path(checkpoint_dir) / "weights.pt"))
    return model
