"""Redis front-end of the appliance: RESP2/RESP3 over TCP (docs/resp.md).

    server = await start_resp_server(appliance, "127.0.0.1", 6380, config=RespConfig())
    ...
    await server.close()

protocol.py frames requests and encodes replies, commands.py (and kv.py, info.py) holds the
command table and handlers, errors.py Redis' exact error texts, server.py the asyncio server,
per-connection state and the batching dispatcher.
"""

from .server import Connection, RespConfig, RespServer, start_resp_server

__all__ = ["Connection", "RespConfig", "RespServer", "start_resp_server"]
