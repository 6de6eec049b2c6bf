"""``ray.address`` is checked with a TCP connect before ``ray.init`` waits minutes on it."""

from __future__ import annotations

import socket

import pytest

from sweeps.driver.cluster_address import check_reachable, host_port, join_error
from sweeps.errors import ConfigError


@pytest.mark.parametrize(("address", "expected"), [
    ("10.0.0.5:6379", ("10.0.0.5", 6379)),
    ("10.0.0.5", ("10.0.0.5", 6379)),
    ("head-node:6380", ("head-node", 6380)),
    ("ray://head:10001", ("head", 10001)),
    ("ray://head", ("head", 10001)),
    ("[::1]:6380", ("::1", 6380)),
])
def test_the_address_ray_would_dial(address, expected) -> None:
    assert host_port(address) == expected


def test_auto_is_left_to_ray_unless_ray_address_names_one(monkeypatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert host_port("auto") is None
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert host_port("auto") == ("10.1.2.3", 6379)


def test_a_port_that_is_no_number_is_named() -> None:
    with pytest.raises(ConfigError, match="has port 'x', not a number"):
        host_port("head:x")


def test_a_listening_address_passes_and_a_closed_one_fails_at_once() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        check_reachable(f"127.0.0.1:{port}")
    # The same port, closed now: refused, named with the fix.
    with pytest.raises(ConfigError) as info:
        check_reachable(f"127.0.0.1:{port}", timeout_s=5)
    message = str(info.value)
    assert message.startswith(f"ray.address: '127.0.0.1:{port}' does not answer (nothing listens")
    assert "ray start --head" in message and "ray.address=null" in message


def test_a_host_that_does_not_resolve_is_named() -> None:
    with pytest.raises(ConfigError, match="the host name 'no-such-host.invalid' does not resolve"):
        check_reachable("no-such-host.invalid:6379", timeout_s=5)


def test_what_ray_raises_while_joining_becomes_one_line() -> None:
    error = join_error("auto", ConnectionError("Could not find any running Ray instance.\n"
                                               "Please specify the one to connect to."))
    assert str(error).count("\n") == 0
    assert str(error).startswith("ray.address: 'auto' could not be joined (Could not find")


def test_a_refused_join_where_a_ray_token_exists_names_ray_auth_mode(tmp_path,
                                                                     monkeypatch) -> None:
    """Ray 2.60 turns token authentication on for a head started where a token exists, but a
    driver given the head's address does not send it (only ``auto`` does)."""
    token = tmp_path / "auth_token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    refused = ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379")
    assert "RAY_AUTH_MODE" not in str(join_error("10.0.0.1:6379", refused))  # no token here
    token.write_text("t" * 64)
    assert "set RAY_AUTH_MODE=token" in str(join_error("10.0.0.1:6379", refused))
    assert "RAY_AUTH_MODE" not in str(join_error("auto", refused))
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # said already: the refusal is something else
    assert "RAY_AUTH_MODE" not in str(join_error("10.0.0.1:6379", refused))
