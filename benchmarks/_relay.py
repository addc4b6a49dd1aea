"""A bare byte relay in front of a Redis: a scale for the host tier's ratios (benchmarks/resp.py
--relay), not part of pynq-kv.

Each client gets a connection of its own to the upstream port, and bytes are copied both ways
as they come: no parsing, no batching, nothing shared between clients. What it costs is what
any front-end in that place costs at least (an extra hop: a read and a write per side, and
their wake-ups), so the relay's ratio to a direct redis-server is the ceiling a front-end here
can reach without batching across clients.

    python benchmarks/_relay.py LISTEN_PORT UPSTREAM_PORT   # on 127.0.0.1, until killed
"""

from __future__ import annotations

import asyncio
import sys

HOST = "127.0.0.1"


class _Upstream(asyncio.Protocol):
    def __init__(self, client: _Client) -> None:
        self.client = client

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.client.transport.close()


class _Client(asyncio.Protocol):
    """One client; what it sends before its upstream connection is up waits in `early`."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.upstream: _Upstream | None = None
        self.early: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        asyncio.ensure_future(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, self.upstream = await loop.create_connection(lambda: _Upstream(self), HOST,
                                                            self.upstream_port)
        except OSError:
            self.transport.close()
            return
        for data in self.early:
            self.upstream.transport.write(data)
        self.early = []

    def data_received(self, data: bytes) -> None:
        if self.upstream is None:
            self.early.append(data)
        else:
            self.upstream.transport.write(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.upstream is not None:
            self.upstream.transport.close()


async def _serve(listen_port: int, upstream_port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(upstream_port), HOST, listen_port)
    await server.serve_forever()


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    try:
        import uvloop  # the loop pynq-kv serve uses by default
        run = uvloop.run
    except ImportError:
        run = asyncio.run
    run(_serve(int(sys.argv[1]), int(sys.argv[2])))


if __name__ == "__main__":
    main()
