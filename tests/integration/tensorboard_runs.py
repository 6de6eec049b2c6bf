"""A sweep's TensorBoard runs as TensorBoard itself reads them (its event multiplexer), for the
integration tests: run names, scalar steps, each run's HParams session."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_runs(sweep_dir: Path) -> Any:
    """TensorBoard's multiplexer over ``tensorboard --logdir <sweep dir>``, loaded."""
    from tensorboard.backend.event_processing.plugin_event_multiplexer import EventMultiplexer

    multiplexer = EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(sweep_dir))
    multiplexer.Reload()
    return multiplexer


def scalar_steps(multiplexer: Any, run: str, tag: str) -> list[int]:
    """Steps of a scalar tag in ``run``, in the order TensorBoard plots them."""
    return [e.step for e in multiplexer.Tensors(run, tag)]


def session(multiplexer: Any, run: str) -> tuple[dict[str, Any], str | None]:
    """(hparams, end status name or None) of the run's HParams session."""
    from tensorboard.plugins.hparams import api_pb2, metadata

    content = multiplexer.PluginRunToTagToContent(metadata.PLUGIN_NAME)[run]
    start = metadata.parse_session_start_info_plugin_data(
        content[metadata.SESSION_START_INFO_TAG])
    hparams = {k: getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()}
    end = content.get(metadata.SESSION_END_INFO_TAG)
    status = (api_pb2.Status.Name(metadata.parse_session_end_info_plugin_data(end).status)
              if end is not None else None)
    return hparams, status


def assert_steps_are_epochs(sweep_dir: Path, trial_ids: set[str], tag: str = "val_acc",
                            epochs: dict[str, int] | None = None) -> None:
    """One TensorBoard run per trial (``tensorboard/<trial id>``, nothing of Tune's), each
    ``tag`` at steps 1, 2, ... with none twice (up to the trial's ``epochs`` when given)."""
    multiplexer = read_runs(sweep_dir)
    assert sorted(multiplexer.Runs()) == sorted(f"tensorboard/{t}" for t in trial_ids)
    for trial in trial_ids:
        steps = scalar_steps(multiplexer, f"tensorboard/{trial}", tag)
        last = epochs[trial] if epochs else len(steps)
        assert steps == list(range(1, last + 1)), (trial, steps, last)
