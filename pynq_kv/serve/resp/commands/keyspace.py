"""Keyspace commands: DEL, EXISTS, DBSIZE, FLUSHDB, FLUSHALL.

EXISTS normally never reaches its handler: the server batches runs of it (server.py).
"""

from __future__ import annotations

from typing import Any

from ....keys import tagged_rows
from .. import errors as E
from ..protocol import OK, ErrorReply
from .base import BATCH_EXISTS, Client, Command, Server, key_error


def cmd_exists(srv: Server, conn: Client, args: list[bytes]) -> Any:
    keys = args[1:]
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    hit, _ = srv.engine.get_batch(tagged_rows(keys, srv.engine.geometry.key_bytes))
    found = int(hit.sum())
    srv.count_lookups(len(keys), found)
    return found


def cmd_del(srv: Server, conn: Client, args: list[bytes]) -> Any:
    keys = args[1:]
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    eng = srv.engine
    return int(eng.delete_batch(tagged_rows(keys, eng.geometry.key_bytes)).sum())


def cmd_dbsize(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return srv.engine.occupancy().used


def _flush(args: list[bytes], rules: bool, srv: Server) -> Any:
    if len(args) > 2 or (len(args) == 2 and args[1].upper() not in (b"SYNC", b"ASYNC")):
        return ErrorReply(E.SYNTAX)
    srv.engine.clear(rules=rules)
    return OK


def cmd_flushdb(srv: Server, conn: Client, args: list[bytes]) -> Any:
    """The exact table only: wildcard rules are configuration and stay."""
    return _flush(args, False, srv)


def cmd_flushall(srv: Server, conn: Client, args: list[bytes]) -> Any:
    """The exact table and the wildcard rules."""
    return _flush(args, True, srv)


def commands() -> list[Command]:
    """DEL, EXISTS, DBSIZE, FLUSHDB, FLUSHALL."""
    rw = ("readonly", "fast")
    return [
        Command("del", -2, ("write",), cmd_del, "Deletes one or more keys", "generic", (1, -1, 1)),
        Command("exists", -2, rw, cmd_exists, "Determines whether one or more keys exist", "generic",
                (1, -1, 1), BATCH_EXISTS),
        Command("dbsize", 1, rw, cmd_dbsize, "Returns the number of keys in the table", "server"),
        Command("flushdb", -1, ("write",), cmd_flushdb, "Removes all keys (rules stay)", "server"),
        Command("flushall", -1, ("write",), cmd_flushall, "Removes all keys and all rules", "server"),
    ]
