"""One actor of ``sweeps.predict``'s pool: the model loaded once, then batch after batch.

    predictor = Predictor(resolve_source("outputs/digits", "predict"), column="x")
    predictor({"x": features})      # the batch with prediction, score (and label) added

Runs in a Ray Data actor (``map_batches``) and, in the unit tests, in-process: nothing here
needs Ray. The input column becomes the model's input by what came with the model: a tokenizer
(texts, padded and cut to the model's positions), an image processor (HxW arrays get a channel
axis, repeated for an RGB model; HxWxC as they are), or nothing (a torch module: the column's
arrays stacked into one float32 tensor).
"""

from __future__ import annotations

from typing import Any

from sweeps.inference.bundle import ModelSource
from sweeps.inference.hf import Pretrained

__all__ = ["Predictor", "readable_labels"]


class Predictor:
    """One actor of the pool: loads the model once, then predicts batch after batch."""

    def __init__(self, source: ModelSource, column: str, use_gpu: bool = False) -> None:
        import torch

        loaded = source.load()
        self.model, self.processor = (loaded if isinstance(loaded, Pretrained) else (loaded, None))
        self.kind = source.processor if source.transformers else None
        self.column = column
        self.device = torch.device("cuda" if use_gpu and torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.labels = readable_labels(self.model)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        import torch

        forward = {"tokenizer": self._texts, "image_processor": self._images}.get(self.kind,
                                                                                 self._features)
        with torch.inference_mode():
            out = forward(batch[self.column])
        out = out.float().cpu()
        if out.ndim == 2 and out.shape[1] > 1:  # class scores
            score, index = torch.softmax(out, dim=1).max(dim=1)
            batch["prediction"] = index.numpy()
            if self.labels is not None:
                batch["label"] = np.array([self.labels.get(i, str(i)) for i in index.tolist()],
                                          dtype=object)
            batch["score"] = score.numpy()
        else:  # one value per row
            batch["prediction"] = out.reshape(len(out), -1)[:, 0].numpy()
        return batch

    def _features(self, values: Any) -> Any:
        import numpy as np
        import torch

        array = np.stack(list(values)) if values.dtype == object else np.asarray(values)
        x = torch.as_tensor(array.astype(np.float32))
        if x.ndim == 1:
            x = x.unsqueeze(1)
        return _logits(self.model(x.to(self.device)))

    def _texts(self, values: Any) -> Any:
        limit = getattr(self.model.config, "max_position_embeddings", None)
        limit = min(limit or 10**9, getattr(self.processor, "model_max_length", 10**9) or 10**9)
        enc = self.processor([str(v) for v in values], padding=True, truncation=True,
                             max_length=limit, return_tensors="pt")
        return _logits(self.model(**enc.to(self.device)))

    def _images(self, values: Any) -> Any:
        import numpy as np

        channels = getattr(self.model.config, "num_channels", 3)
        arrays = [np.asarray(value) for value in values]  # HxW: one channel, repeated for RGB
        images = [np.repeat(a[..., None], channels, axis=2) if a.ndim == 2 else a for a in arrays]
        enc = self.processor(images=images, return_tensors="pt", input_data_format="channels_last")
        return _logits(self.model(**enc.to(self.device)))


def _logits(out: Any) -> Any:
    """The scores tensor of a model's output (a tensor, a Transformers output, a tuple)."""
    if hasattr(out, "logits"):
        return out.logits
    return out[0] if isinstance(out, tuple | list) else out


def readable_labels(model: Any) -> dict[int, str] | None:
    """The class names of a model's ``config.id2label``, unless they are the ``LABEL_i``
    placeholders Transformers fills in; None for a model without any.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> readable_labels(NS(config=NS(id2label={0: "neg", 1: "pos"})))
        {0: 'neg', 1: 'pos'}
        >>> readable_labels(NS(config=NS(id2label={0: "LABEL_0", 1: "LABEL_1"})))
    """
    names = getattr(getattr(model, "config", None), "id2label", None)
    if not names:
        return None
    labels = {int(k): str(v) for k, v in names.items()}
    return None if all(v == f"LABEL_{k}" for k, v in labels.items()) else labels

