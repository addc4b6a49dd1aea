"""pynq_kv.net.addr.is_loopback: the one test of "only this machine can reach it"."""

from __future__ import annotations

import pytest

from pynq_kv.net.addr import is_loopback


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "127.255.255.254", "::1", "[::1]",
                                  " ::1 ", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost",
                                  "LocalHost"])
def test_loopback(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "", "10.0.0.1", "192.168.1.5",
                                  "::ffff:10.0.0.1", "128.0.0.1", "example.org", "localhost.evil",
                                  "[127.0.0.1", "::1]"])
def test_not_loopback(host: str) -> None:
    assert not is_loopback(host)
