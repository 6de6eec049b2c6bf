"""The entry point of every Train worker of a trial: the user's loop, called as Ray calls it.

    train_loop_per_worker = loop_entry(user_train_func, context)  # sweeps.trial.driver
    loop_entry(objective, context, "tune")  # a Ray Tune function trainable (inline)

The user's function receives the trial's flat hyperparameter dict, exactly what it would get
from ``TorchTrainer(train_loop_config=...)``, as a ``TrackedConfig``: a ``dict`` subclass that
notes which keys the loop reads. Rank 0 writes the keys read so far to ``config_reads.json`` in
the trial's run directory each time a new one is read (reads happen before the first report, so
the file is complete when the driver checks it after that report; see ``sweeps.driver.unread``).
``sweeps.trial_context()`` is set before the loop starts. A ``TrackedConfig`` pickles as a plain
``dict``, so a loop that saves its config in a checkpoint does not need sweeps to load it. A CUDA
out-of-memory error that escapes the loop is noted in the run directory, and a restarted worker
of the same attempt raises it again at once (``sweeps.loop.gpu_memory``).
"""

from __future__ import annotations

import copy
import functools
import inspect
import json
import numbers
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sweeps._ray.tune_fn import tune_api
from sweeps.config.usercode import takes_config
from sweeps.files import write_atomic
from sweeps.loop import gpu_memory, system_metrics
from sweeps.loop.context import TrialContext, _set
from sweeps.protocol import CONFIG_READS_FILE, run_file

__all__ = ["TrackedConfig", "ReadLog", "loop_entry", "run_loop"]


class ReadLog:
    """The dotted keys a loop read, saved to a file whenever a new one is read."""

    def __init__(self, path: Path | None) -> None:
        self.path, self.keys = path, set[str]()

    def add(self, key: str) -> None:
        if key in self.keys:
            return
        self.keys.add(key)
        if self.path is not None:
            write_atomic(self.path, json.dumps(sorted(self.keys)))


class TrackedConfig(dict):
    """A ``dict`` that tells a ``ReadLog`` which keys are read (nested dicts too, by dotted
    path). Iterating or copying it counts as reading every key under it.

    Example:
        >>> log = ReadLog(None)
        >>> cfg = TrackedConfig({"lr": 0.1, "opt": {"beta": 0.9}, "unused": 1}, log)
        >>> cfg.get("lr"), cfg["opt"]["beta"], sorted(log.keys)
        (0.1, 0.9, ['lr', 'opt', 'opt.beta'])
    """

    def __init__(self, data: dict[str, Any], log: ReadLog, prefix: str = "") -> None:
        super().__init__({k: TrackedConfig(v, log, f"{prefix}{k}.") if isinstance(v, dict)
                          else v for k, v in data.items()})
        self._log, self._prefix = log, prefix

    def _read(self, key: Any) -> None:
        self._log.add(f"{self._prefix}{key}")

    def _read_all(self) -> None:
        for key, value in dict.items(self):
            self._read(key)
            if isinstance(value, TrackedConfig):
                value._read_all()

    def __getitem__(self, key: Any) -> Any:
        self._read(key)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._read(key)
        return super().__contains__(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return super().setdefault(key, default)

    def pop(self, key: Any, *default: Any) -> Any:
        self._read(key)
        return super().pop(key, *default)

    def __iter__(self) -> Iterator[Any]:
        self._read_all()
        return super().__iter__()

    def keys(self) -> Any:
        self._read_all()
        return super().keys()

    def items(self) -> Any:
        self._read_all()
        return super().items()

    def values(self) -> Any:
        self._read_all()
        return super().values()

    def copy(self) -> dict[str, Any]:
        self._read_all()
        return _plain(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (_plain(self),)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        self._read_all()
        return copy.deepcopy(_plain(self), memo)


def _plain(value: Any) -> Any:
    """A plain-dict copy of a (nested) ``TrackedConfig``, without counting reads."""
    return {k: _plain(v) for k, v in dict.items(value)} if isinstance(value, dict) else value


def run_loop(config: dict[str, Any], *, loop: Callable[..., Any], context: TrialContext,
             api: str = "train") -> None:
    """Call ``loop`` the way Ray Train (``api="train"``) or Ray Tune (``"tune"``: a function
    trainable, in its Tune trial's process) would, with the sweep's context set."""
    import ray.train

    rank = ray.train.get_context().get_world_rank()
    gpu_memory.raise_noted(context.run_dir)  # a restart after this attempt ran out: not again
    log = ReadLog(run_file(context.run_dir, CONFIG_READS_FILE) if rank == 0 else None)
    _set(context)
    try:
        with tune_api(api), system_metrics.sampled(rank, context.system_metrics, context.run_dir):
            args = (TrackedConfig(config, log),) if takes_config(loop) else ()
            if api != "tune":
                loop(*args)
            elif inspect.isgeneratorfunction(loop):
                for output in loop(*args):
                    _report_output(output)
            else:
                _report_output(loop(*args))
    except Exception as exc:
        if gpu_memory.is_out_of_memory(exc):
            gpu_memory.note(context.run_dir, rank, exc)
        raise
    finally:
        _set(None)


def _report_output(output: Any) -> None:
    """A Tune function's returned or yielded value, as Tune takes it: a dict is reported,
    a number as Tune's ``_metric``, nothing is nothing, anything else refused in Tune's words."""
    from ray import tune

    if not output:
        return
    if isinstance(output, dict):
        tune.report(output)
    elif isinstance(output, numbers.Number):
        tune.report({"_metric": output})
    else:
        raise ValueError("Invalid return or yield value. Either return/yield a single number "
                         "or a dictionary object in your trainable function.")


def loop_entry(loop: Callable[..., Any], context: TrialContext,
               api: str = "train") -> Callable[[dict], None]:
    """``train_loop_per_worker`` for a trial: ``run_loop`` bound to the user's loop."""
    entry = functools.partial(run_loop, loop=loop, context=context, api=api)
    functools.update_wrapper(entry, loop, assigned=("__module__", "__name__", "__qualname__",
                                                    "__doc__"), updated=())
    del entry.__wrapped__  # Ray reads the signature: it must stay (config), not the loop's
    return entry
