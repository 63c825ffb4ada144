"""The port's lock where abstract socket names do not exist (a file lock in the temporary folder)."""

from __future__ import annotations

import socket

import pytest

from reginamq import server


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_a_second_claim_on_a_claimed_port_is_refused_and_a_released_one_is_free(monkeypatch, platform):
    monkeypatch.setattr(server.sys, "platform", platform)
    port = free_port()
    first = server.PortClaim("127.0.0.1", port)
    try:
        with pytest.raises(server.PortUnavailable, match="another reginamq broker"):
            server.PortClaim("127.0.0.1", port)
    finally:
        first.close()
    server.PortClaim("127.0.0.1", port).close()
