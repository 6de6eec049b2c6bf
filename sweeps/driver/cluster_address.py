"""Whether ``ray.address`` answers, before ``ray.init`` is asked to join it.

    python -m sweeps +experiment=digits ray.address=10.0.0.5:6379
    # ConfigError: ray.address: '10.0.0.5:6379' does not answer (nothing listens on
    # 10.0.0.5:6379: connection refused); start a cluster at that address (ray start --head)...

``ray.init`` does not fail fast on a dead address: on Ray 2.60 a GCS address where nothing
listens waits about two minutes and then exits the process, a ``ray://`` address times out
after 30 s with "ray client connection timeout". A TCP connect to the address's host and port
(``connect_timeout_s``, 10 s) tells the two cases apart from a running cluster in under a
second (refused) or at most the timeout (unroutable, filtered); what Ray itself then raises
while joining (``ConnectionError``) becomes the same one line by ``join_error``.
``ray.address=auto`` is left to Ray, which fails at once when it finds no cluster, unless
``RAY_ADDRESS`` names one (then that address is checked).
"""

from __future__ import annotations

import os
import socket

from sweeps.errors import ConfigError

__all__ = ["check_reachable", "join_error", "host_port"]

CONNECT_TIMEOUT_S = 10.0
DEFAULT_GCS_PORT = 6379
DEFAULT_CLIENT_PORT = 10001
FIX = ("start a cluster at that address (ray start --head) or set ray.address to a running "
       "one; ray.address=null runs a private local Ray instead")


def host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` that ``address`` (``host:port``, ``ray://host[:port]``, ``auto``)
    dials, or None when Ray finds it itself (``auto`` without ``RAY_ADDRESS``, ``local``).

    Example:
        >>> host_port("ray://head:10001"), host_port("10.0.0.5"), host_port("[::1]:6380")
        (('head', 10001), ('10.0.0.5', 6379), ('::1', 6380))
    """
    address = address.strip()
    if address in ("auto", "local"):
        env = os.environ.get("RAY_ADDRESS", "").strip()
        return host_port(env) if env and env not in ("auto", "local") else None
    default = DEFAULT_GCS_PORT
    if address.startswith("ray://"):
        address, default = address[len("ray://"):], DEFAULT_CLIENT_PORT
    address = address.split("/", 1)[0]
    if address.startswith("["):  # [IPv6]:port
        host, _, rest = address[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
    if not port.isdigit():
        if port:
            raise ConfigError("ray.address", address, f"has port {port!r}, not a number",
                              "write host:port, e.g. ray.address=10.0.0.5:6379, or "
                              "ray://host:10001 for Ray Client")
        port = str(default)
    return host, int(port)


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise ``ConfigError`` unless something accepts a TCP connection at ``address``."""
    target = host_port(address)
    if target is None:
        return
    host, port = target
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except socket.gaierror as exc:
        why = f"the host name {host!r} does not resolve: {exc.strerror or exc}"
    except TimeoutError:
        why = f"no answer from {host}:{port} within {timeout_s:g} s"
    except OSError as exc:
        why = f"nothing listens on {host}:{port}: {(exc.strerror or str(exc)).lower()}"
    raise ConfigError("ray.address", address, f"does not answer ({why})", FIX)


def join_error(address: str, exc: BaseException) -> ConfigError:
    """The one line for a ``ray.init(address=...)`` that raised ``exc``."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    token = os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.expanduser("~/.ray/auth_token")
    if address != "auto" and "RAY_AUTH_MODE" not in os.environ and os.path.exists(token):
        text += (f"; if that cluster uses token authentication (a head started where {token} "
                 "exists does), set RAY_AUTH_MODE=token: Ray uses the token for 'auto' only")
    return ConfigError("ray.address", address, f"could not be joined ({text})", FIX)
