"""Running out of file descriptors (issue 16 item 6): counted, logged a few times, survived.

Before: asyncio's accept loop logged a traceback for every failed accept() and kept trying, at
a 256-descriptor limit with 400 clients 1.7 M tracebacks in 105 s (here, at 64 descriptors and
150 clients, ~50,000 log lines in 3 s and a 300 ms stall of a PING client).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path

import pytest

from abuse_scenarios import fd_exhaustion
from abuse_support import Scenario, run_scenario
from pynq_kv.serve.accept import LogLimiter

pytestmark = pytest.mark.timeout(180)


def test_log_limiter_says_how_many_it_suppressed(caplog) -> None:
    limiter = LogLimiter(logging.getLogger("test.limiter"), interval=3600)
    with caplog.at_level(logging.WARNING, logger="test.limiter"):
        for i in range(1000):
            limiter.warning("accept failed: %d", i)
    assert [r.getMessage() for r in caplog.records] == ["accept failed: 0"]
    assert limiter.suppressed == 999
    limiter.interval = 0
    with caplog.at_level(logging.WARNING, logger="test.limiter"):
        limiter.warning("accept failed: %d", 1000)
    assert "999 similar messages suppressed" in caplog.records[-1].getMessage()


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("frontend", ["resp", "admin"])
def test_more_clients_than_descriptors(frontend: str, event_loop: str, tmp_path: Path) -> None:
    """Both front-ends accept through pynq_kv's Listener on both event loops (before: uvicorn on
    asyncio's accept loop wrote 200,000 log lines in 4 s; on uvloop the admin service no longer
    logged nor counted running out of descriptors: libuv closes the waiting clients itself)."""
    scenario = Scenario(f"fd_exhaustion_{frontend}",
                        fd_exhaustion(clients=150, hold_seconds=(3.0, 3.0), frontend=frontend),
                        serve_args=("--event-loop", event_loop), nofile=64, probes=("ping",))
    result = run_scenario(scenario, small=True, workdir=tmp_path)
    assert "error" not in result and result["crashes"] == 0 and result["keys_lost"] == 0, result
    assert result["log_accept_warnings"] >= 1, result  # it did run out of descriptors
    assert result["accept_errors"] > 0, result  # and counted it
    assert result["log_lines"] < 50, result
    assert result["served_again"], result  # once the clients went, new ones are served
    assert result["control"]["ping_failures"] == 0, result
    assert result["max_control_stall_ms"] < 250, result


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_accepted_clients_have_nagle_off(event_loop: str) -> None:
    """Both listeners (RESP's, and the admin service's: a Listener with uvicorn's protocol) hand
    out clients with TCP_NODELAY on both loops: with Nagle on, a keep-alive reply waited ~40 ms
    for the delayed ACK."""
    from pynq_kv import KVEngine
    from pynq_kv.appliance import Appliance
    from pynq_kv.serve import eventloop
    from pynq_kv.serve.accept import Listener
    from pynq_kv.serve.resp import start_resp_server

    async def nodelay_of_accepted() -> tuple[int, int]:
        server = await start_resp_server(Appliance(lambda: KVEngine(rows=64)), "127.0.0.1", 0)
        accepted: list[asyncio.BaseTransport] = []

        class Keep(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted.append(transport)

        plain = Listener.bind(Keep, "127.0.0.1", 0, 8, logging.getLogger("test"), "plain")
        try:
            _, w1 = await asyncio.open_connection("127.0.0.1", server.port)
            _, w2 = await asyncio.open_connection("127.0.0.1", plain.getsockname()[1])
            for _ in range(200):
                if server.conns and accepted:
                    break
                await asyncio.sleep(0.01)
            resp_sock = next(iter(server.conns.values())).transport.get_extra_info("socket")
            plain_sock = accepted[0].get_extra_info("socket")
            result = (resp_sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
                      plain_sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            w1.close()
            w2.close()
            return result
        finally:
            plain.close()
            await server.close()

    resp_nodelay, admin_nodelay = eventloop.run(nodelay_of_accepted(), event_loop)
    assert resp_nodelay and admin_nodelay
