"""What goes into a trial's TensorBoard event files, and what a run directory already holds.

    scalars_of(result), hparams_of(trial.config, params), session_end(failed=False)
    written = read_run(Path("outputs/digits/tensorboard/9a6685fe"))
    written.steps["val_acc"], written.best("val_acc", "max"), written.last_step
    "_hparams_/session_start_info" in written.plugin_tags

``sweeps.tracking.tensorboard`` reads a trial's run back, so that what it writes next continues
the curves (docs/running.md#tracking-in-detail).

Event files are TFRecord files of ``Event`` protos (tensorboardX's own protos parse them; no
TensorFlow, no ``tensorboard`` package needed): per record a little-endian uint64 length, its
CRC, the data, the data's CRC. A file the killed driver left with a torn last record is read up
to that record. CRCs are not checked (TensorBoard's own reader checks them, this one only has to
know which steps exist).
"""

from __future__ import annotations

import json
import numbers
import re
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweeps.protocol import NOT_METRICS
from sweeps.search.space import flatten

__all__ = ["EVENT_FILE_PREFIX", "Written", "read_run", "records", "tag_of", "scalars_of",
           "hparams_of", "session_end"]

EVENT_FILE_PREFIX = "events.out.tfevents."
_INVALID_TAG = re.compile(r"[^-/\w.]")  # what tensorboardX replaces in a tag (with "_")
_HEADER = struct.Struct("<QI")  # length, masked CRC-32C of the length


@dataclass
class Written:
    """Scalars in a run: the last step of each tag, each tag's last, lowest and highest value
    (NaN left out: constant memory however long the trial); the tags of plugin summaries
    (TensorBoard keeps the first summary of such a tag in a run)."""

    steps: dict[str, int] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    low: dict[str, float] = field(default_factory=dict)
    high: dict[str, float] = field(default_factory=dict)
    plugin_tags: set[str] = field(default_factory=set)

    def note(self, tag: str, value: float) -> None:
        """A value written under ``tag`` (in file order)."""
        if value != value:  # NaN: neither final nor best
            return
        self.last[tag] = value
        self.low[tag] = min(self.low.get(tag, value), value)
        self.high[tag] = max(self.high.get(tag, value), value)

    def best(self, tag: str, mode: str) -> float | None:
        """The tag's best value for ``mode`` (max or min); None when it has none.

        Example:
            >>> w = Written(); w.note("acc", 0.5); w.note("acc", 0.9); w.note("acc", 0.7)
            >>> w.best("acc", "max"), w.best("acc", "min"), w.last["acc"]
            (0.9, 0.5, 0.7)
        """
        return (self.high if mode == "max" else self.low).get(tag)

    @property
    def last_step(self) -> int | None:
        """The highest step of any scalar (None: no scalar yet)."""
        return max(self.steps.values(), default=None)


def records(data: bytes) -> Iterator[bytes]:
    """The records of one TFRecord file's bytes, up to a torn last one.

    Example:
        >>> frame = _HEADER.pack(3, 0) + b"abc" + b"crc!"
        >>> list(records(frame + frame[:9]))
        [b'abc']
    """
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, _ = _HEADER.unpack_from(data, pos)
        start, end = pos + _HEADER.size, pos + _HEADER.size + length + 4
        if end > len(data):
            return
        yield data[start:start + length]
        pos = end


def read_run(run_dir: str | Path) -> Written:
    """Scalars of every event file in the local directory ``run_dir`` (nothing when missing).

    Example:
        >>> read_run("/nonexistent").last_step is None
        True
    """
    from tensorboardX.proto.event_pb2 import Event

    written = Written()
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return written
    for path in sorted(run_dir.glob(f"{EVENT_FILE_PREFIX}*")):  # TensorBoard's order too
        for data in records(path.read_bytes()):
            try:
                event = Event.FromString(data)
            except Exception:  # a record torn in a way the length did not show
                break
            for value in event.summary.value:
                if value.metadata.plugin_data.plugin_name:
                    written.plugin_tags.add(value.tag)
                if value.WhichOneof("value") != "simple_value":
                    continue
                tag = value.tag
                written.steps[tag] = max(written.steps.get(tag, event.step), event.step)
                written.note(tag, value.simple_value)
    return written


def tag_of(key: str) -> str:
    """The tag a metric key is written under (tensorboardX's own cleaning, done first so
    what is read back matches what was asked for).

    Example:
        >>> tag_of("val acc"), tag_of("/eval/loss")
        ('val_acc', 'eval/loss')
    """
    return _INVALID_TAG.sub("_", key).lstrip("/")


def scalars_of(result: dict[str, Any]) -> dict[str, float]:
    """The TensorBoard scalars of a Tune result: its numbers minus Tune's bookkeeping.

    Example:
        >>> scalars_of({"val_acc": 0.9, "epoch": 2, "training_iteration": 5, "ok": True,
        ...             "eval": {"loss": 0.3}, "note": "x", "lr at 1": 1})
        {'val_acc': 0.9, 'eval/loss': 0.3, 'lr_at_1': 1.0}
    """
    out: dict[str, float] = {}
    for key, value in result.items():
        if key in NOT_METRICS:
            continue
        if isinstance(value, dict):
            out.update({f"{key}/{k}": v for k, v in scalars_of(value).items()})
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            out[str(key)] = float(value)
    return {tag_of(k): v for k, v in out.items()}


def hparams_of(config: dict[str, Any] | None, params: tuple[str, ...]) -> dict[str, Any]:
    """A trial's HParams: its searched values (``params``; all of ``config`` when empty),
    flattened; numbers as floats, lists and other values as JSON text, absent ones left out.

    Example:
        >>> hparams_of({"lr": 0.1, "model": {"hidden": 64, "act": "relu"}, "seed": 0},
        ...            ("lr", "model.hidden", "model.act", "model.dropout"))
        {'lr': 0.1, 'model.hidden': 64.0, 'model.act': 'relu'}
    """
    flat = flatten(config or {})
    given = {path: flat[path] for path in params or flat if flat.get(path) is not None}
    return {path: v if isinstance(v, bool | str) else float(v) if isinstance(v, numbers.Real)
            else json.dumps(v, default=str) for path, v in given.items()}


def session_end(failed: bool) -> Any:
    """The HParams plugin's session-end summary (tensorboardX's ``hparams`` always says success)."""
    from tensorboardX.proto.api_pb2 import Status
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData, SessionEndInfo
    from tensorboardX.proto.summary_pb2 import Summary, SummaryMetadata

    info = SessionEndInfo(status=Status.Value("STATUS_FAILURE" if failed else "STATUS_SUCCESS"),
                          end_time_secs=time.time())
    content = HParamsPluginData(session_end_info=info, version=0).SerializeToString()
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="hparams",
                                                                      content=content))
    return Summary(value=[Summary.Value(tag="_hparams_/session_end_info", metadata=metadata)])
