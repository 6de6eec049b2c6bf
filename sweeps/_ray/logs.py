"""Ray's logger names that the sweep routes to ``<sweep dir>/ray.log``, and its raylet notices.

    for name in RAY_LOGGERS: logging.getLogger(name)
    with raylet_notices_logged(): ...          # "(raylet) WARNING: ..." to the "ray" logger

``raylet_notices_logged`` swaps ``ray._private.worker.print_to_stdstream`` (private), which the
driver's error-listener thread calls with every notice the raylet pushes to the job (for
instance "N PYTHON worker processes have been started ... 4x the maximum expected startup
concurrency", printed whenever workers hold fractions of a CPU), for one that logs them to the
``ray.raylet`` logger instead of printing them over the sweep's progress lines. Public route:
none at 2.60 (``log_to_driver=False`` silences worker output, not these notices).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator
from typing import Any

__all__ = ["RAY_LOGGERS", "STDSTREAM_MODULE", "raylet_notices_logged"]

# "ray._private.authentication" logs its token-auth notice from inside ray.init and does not
# propagate to "ray" (Ray 2.60). Public alternative: none; ray.init(logging_config=...) only
# configures the "ray" logger itself.
RAY_LOGGERS = ("ray", "ray._private.authentication")
STDSTREAM_MODULE = "ray._private.worker"


@contextlib.contextmanager
def raylet_notices_logged() -> Iterator[None]:
    """Within the block, notices from the raylet go to the ``ray.raylet`` logger (which the
    sweep routes to ``ray.log``); worker output is printed as before. A Ray without that
    function: nothing changes.

    Example:
        >>> import ray._private.worker as w
        >>> with raylet_notices_logged():
        ...     w.print_to_stdstream({"lines": ["WARNING: x"], "pid": "raylet",
        ...                           "is_err": False}, ignore_prefix=False)   # prints nothing
    """
    try:
        module = importlib.import_module(STDSTREAM_MODULE)
        original = module.print_to_stdstream
    except (ImportError, AttributeError):
        yield
        return
    log = logging.getLogger("ray.raylet")

    def print_or_log(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if data.get("pid") == "raylet":
            for line in data.get("lines", []):
                log.warning("%s", line)
            return
        original(data, *args, **kwargs)

    module.print_to_stdstream = print_or_log
    try:
        yield
    finally:
        module.print_to_stdstream = original
