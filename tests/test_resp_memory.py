"""Client memory (issue 16 item 5): a pending command counted at its real cost, and a total
limit over all clients (Redis 7's maxmemory-clients) that evicts the biggest client.

Before: 900,000 two-byte arguments were counted as ~17 MB against the 16 MiB per-client limit
while they cost ~47 MB, and nothing bounded the sum: 20 clients took RSS to 1,019 MB.
"""

from __future__ import annotations

import random
import socket
import time
import tracemalloc
from pathlib import Path

import pytest

from pynq_kv.serve.resp import RespConfig
from pynq_kv.serve.resp import protocol
from pynq_kv.serve.resp.protocol import RequestParser, commands_of
from abuse_scenarios import client_memory
from abuse_support import Scenario, run_scenario
from resp_helpers import HOST, PynqServer, encode_command

pytestmark = pytest.mark.timeout(180)


def partial_exists(n: int, size: int = 2) -> bytes:
    """All but the last argument of EXISTS with n arguments of `size` bytes."""
    return b"*%d\r\n$6\r\nEXISTS\r\n" % (n + 1) + (b"$%d\r\n%s\r\n" % (size, b"k" * size)) * (n - 1)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 8, 30, 100])
def test_pending_arguments_are_counted_near_their_real_cost(size: int) -> None:
    data = partial_exists(100_000, size)
    parser = RequestParser(1 << 20)
    out: list = []
    tracemalloc.start()
    try:
        for i in range(0, len(data), 65536):
            parser.feed(data[i:i + 65536], out)
        real, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not out and parser.pending()
    counted = parser.buffered()
    # never below the real cost, and at most a size class (8 bytes) per argument above it
    assert real * 0.98 <= counted <= real + 8 * 100_000, (size, real, counted)


def send_partial(port: int, n: int) -> socket.socket:
    sock = socket.create_connection((HOST, port), timeout=10)
    sock.sendall(partial_exists(n))
    return sock


def wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def is_closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_total_limit_evicts_the_biggest_client_and_the_others_keep_working() -> None:
    per_arg = 2 + 9 + 40  # bytes + list slot + object (protocol.ARG_SLOT, ARG_OBJECT)
    srv = PynqServer(RespConfig(max_query_buffer=4 << 20, maxmemory_clients=6 << 20))
    socks = []
    try:
        sizes = [30_000, 50_000, 30_000]  # about 1.5, 2.5 and 1.5 MB: 5.5 MB together
        for n in sizes:
            socks.append(send_partial(srv.port, n))
        wait_for(lambda: srv.stats()["client_memory"] >= sum(sizes) * per_arg * 0.95)
        assert srv.stats()["evicted_clients"] == 0
        socks.append(send_partial(srv.port, 20_000))  # 1 MB more: over the 6 MiB total
        wait_for(lambda: srv.stats()["evicted_clients"] == 1)
        assert is_closed(socks[1])  # the biggest, not the newest
        stats = srv.stats()
        assert stats["connected_clients"] == 3
        assert stats["client_memory"] < 6 << 20
        for sock in (socks[0], socks[2], socks[3]):  # they finish their commands and are answered
            sock.sendall(b"$2\r\nkk\r\n")
            sock.settimeout(10)
            assert sock.recv(100) == b":0\r\n"
        wait_for(lambda: srv.stats()["client_memory"] == 0)
        with socket.create_connection((HOST, srv.port), timeout=10) as probe:
            probe.sendall(encode_command("INFO", "stats"))
            time.sleep(0.2)
            assert b"evicted_clients:1\r\n" in probe.recv(65536)
    finally:
        for sock in socks:
            sock.close()
        srv.stop()


def test_no_total_limit_when_zero() -> None:
    srv = PynqServer(RespConfig(max_query_buffer=4 << 20, maxmemory_clients=0))
    socks = []
    try:
        for _ in range(4):
            socks.append(send_partial(srv.port, 50_000))
        wait_for(lambda: srv.stats()["client_memory"] >= 4 * 50_000 * 50 * 0.95)
        assert srv.stats()["evicted_clients"] == 0
    finally:
        for sock in socks:
            sock.close()
        srv.stop()


def test_real_server_rss_stays_bounded_by_the_total_limit(tmp_path: Path) -> None:
    """10 clients of 200,000 pending arguments (~10 MB each, under the 16 MiB per-client limit)
    against `pynq-kv serve` with maxmemory_clients 16 MiB: RSS grows by tens of MB, not 100+."""
    limit = 16 << 20
    scenario = Scenario("client_memory_16mib",
                        client_memory(clients=(10, 10), args_per_command=(200_000, 200_000),
                                      hold_seconds=0.5),
                        resp_limits={"maxmemory_clients": limit})
    result = run_scenario(scenario, small=True, workdir=tmp_path)
    assert result["client_memory_mb"] == 16 and "error" not in result, result
    assert result["crashes"] == 0 and result["keys_lost"] == 0, result
    assert result["evicted_clients"] >= 8, result  # one 10 MB client fits under 16 MiB at a time
    assert result["control"]["ping_failures"] == result["control"]["healthz_failures"] == 0
    assert result["peak_rss_mb"] - result["idle_rss_mb"] < 2 * limit / 2**20 + 8, result
    assert result["log_lines"] < 30, result


@pytest.mark.parametrize("window", [None, 5, 37, 1000])
def test_many_argument_commands_parse_exactly_in_any_chunking(monkeypatch, window) -> None:
    """The split-based run for many small arguments (RequestParser._small_bulks) gives the
    arguments sent, whatever they hold (CRLF, '$', empty), however the bytes arrive and
    wherever its split windows cut them."""
    if window is not None:
        monkeypatch.setattr(protocol, "SMALL_WINDOW", window)
    rng = random.Random(5)
    alphabet = [b"\r\n", b"$", b"*", b"a", b"\r", b"\n", b"0", b"\x00"]
    for _ in range(60):
        commands = [[b"MGET"] + [b"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))
                                 for _ in range(rng.randint(1, 3000))]
                    for _ in range(rng.randint(1, 3))]
        data = b"".join(encode_command(*args) for args in commands)
        parser = RequestParser(1 << 20)
        out: list = []
        pos = 0
        while pos < len(data):
            step = rng.choice([1, 7, 100, 4096, 65536])
            parser.feed(data[pos:pos + step], out)
            pos += step
        assert parser.error is None and not parser.pending()
        assert [args for item in out for args in commands_of(item)] == commands
        assert parser.buffered() == 0
