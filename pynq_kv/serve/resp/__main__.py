"""Run the RESP front-end alone on a fresh in-memory engine: `python -m pynq_kv.serve.resp`.

For benchmarks and experiments; `pynq-kv serve` is the appliance proper (state file, admin
service, all front-ends). Prints "ready <port>" on stdout once listening (port 0 picks one).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from ...engine import KVEngine
from ...geometry import Geometry
from ...appliance import Appliance
from ..eventloop import EVENT_LOOPS, run, unavailable
from .server import RespConfig, start_resp_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pynq_kv.serve.resp", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6380)
    parser.add_argument("--backend", default="model")
    parser.add_argument("--rows", type=int, default=Geometry().rows)
    parser.add_argument("--value-width", type=int, default=Geometry().value_width)
    parser.add_argument("--requirepass")
    parser.add_argument("--max-clients", type=int, default=RespConfig.max_clients)
    parser.add_argument("--idle-timeout", type=float, default=0.0)
    parser.add_argument("--no-batching", action="store_true")
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto")
    args = parser.parse_args(argv)
    reason = unavailable(args.event_loop)
    if reason is not None:
        parser.error(reason)

    geometry = Geometry(rows=args.rows, value_width=args.value_width)
    appliance = Appliance(lambda: KVEngine(args.backend, geometry))
    config = RespConfig(requirepass=args.requirepass, max_clients=args.max_clients,
                        idle_timeout=args.idle_timeout, batching=not args.no_batching)

    async def serve() -> None:
        server = await start_resp_server(appliance, args.host, args.port, config=config)
        print(f"ready {server.port}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await server.close()

    run(serve(), args.event_loop)
    appliance.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
