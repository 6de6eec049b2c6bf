"""Ray's logger names that the sweep routes to ``<sweep dir>/ray.log``.

    for name in RAY_LOGGERS: logging.getLogger(name)
"""

from __future__ import annotations

__all__ = ["RAY_LOGGERS"]

# "ray._private.authentication" logs its token-auth notice from inside ray.init and does not
# propagate to "ray" (Ray 2.60). Public alternative: none; ray.init(logging_config=...) only
# configures the "ray" logger itself.
RAY_LOGGERS = ("ray", "ray._private.authentication")
