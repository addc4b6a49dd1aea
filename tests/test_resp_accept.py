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


@pytest.mark.parametrize("frontend", ["resp", "admin"])
def test_more_clients_than_descriptors(frontend: str, loop_name: str, tmp_path: Path) -> None:
    """Both front-ends accept through pynq_kv's Listener on both event loops (before: uvicorn on
    asyncio's accept loop wrote 200,000 log lines in 4 s; on uvloop the admin service no longer
    logged nor counted running out of descriptors: libuv closes the waiting clients itself)."""
    scenario = Scenario(f"fd_exhaustion_{frontend}",
                        fd_exhaustion(clients=150, hold_seconds=(3.0, 3.0), frontend=frontend),
                        serve_args=("--event-loop", loop_name), nofile=64, probes=("ping",))
    result = run_scenario(scenario, small=True, workdir=tmp_path)
    assert "error" not in result and result["crashes"] == 0 and result["keys_lost"] == 0, result
    assert result["log_accept_warnings"] >= 1, result  # it did run out of descriptors
    assert result["accept_errors"] > 0, result  # and counted it
    assert result["log_lines"] < 50, result
    assert result["served_again"], result  # once the clients went, new ones are served
    assert result["control"]["ping_failures"] == 0, result
    assert result["max_control_stall_ms"] < 250, result


def test_accepted_clients_have_nagle_off(loop_name: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Both listeners, RESP's and serve's admin service (uvicorn's protocol on a Listener, which
    this records: were it accepted elsewhere, nothing would be), hand out clients with
    TCP_NODELAY on both loops: with Nagle on, a keep-alive reply waited ~40 ms for the delayed
    ACK."""
    from pynq_kv import KVEngine
    from pynq_kv.appliance import Appliance
    from pynq_kv.serve import eventloop, runner
    from pynq_kv.serve.config import ServeConfig
    from pynq_kv.serve.resp import start_resp_server

    admin_accepted: list[socket.socket] = []

    class Recording(runner.Listener):
        async def _connect(self, conn: socket.socket) -> None:
            admin_accepted.append(conn)
            await super()._connect(conn)

    monkeypatch.setattr(runner, "Listener", Recording)
    config = ServeConfig(backend="model", store="none", resp_port=0, admin_port=0,
                         disable=["udp", "resp"], geometry={"rows": 64, "rules": 8})

    async def nodelay_of_accepted() -> tuple[int, int]:
        server = await start_resp_server(Appliance(lambda: KVEngine(rows=64)), "127.0.0.1", 0)
        running = await runner.start(config)
        try:
            _, w1 = await asyncio.open_connection("127.0.0.1", server.port)
            r2, w2 = await asyncio.open_connection(*running.addresses["admin"])
            w2.write(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            assert (await r2.readuntil(b"\r\n")).startswith(b"HTTP/1.1 200")
            for _ in range(200):
                if server.conns:
                    break
                await asyncio.sleep(0.01)
            resp_sock = next(iter(server.conns.values())).transport.get_extra_info("socket")
            assert len(admin_accepted) == 1
            result = (resp_sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY),
                      admin_accepted[0].getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            w1.close()
            w2.close()
            return result
        finally:
            await running.close()
            await server.close()

    resp_nodelay, admin_nodelay = eventloop.run(nodelay_of_accepted(), loop_name)
    assert resp_nodelay and admin_nodelay
