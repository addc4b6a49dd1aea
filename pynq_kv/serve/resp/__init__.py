"""Redis front-end of the appliance: RESP2/RESP3 over TCP (docs/resp.md).

    server = await start_resp_server(appliance, "127.0.0.1", 6380, config=RespConfig())
    ...
    await server.close()

protocol.py frames requests and encodes replies, commands/ holds the handlers by family and
the command table (commands/table.py), errors.py Redis' exact error texts, server.py the asyncio
server, per-connection state and the batching dispatcher (serve.batch's design).
"""

from .server import Connection, RespConfig, RespServer, start_resp_server

__all__ = ["Connection", "RespConfig", "RespServer", "start_resp_server"]
