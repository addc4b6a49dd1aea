"""String commands: GET, SET (NX, XX, GET; no expiry), MGET, MSET.

GET, MGET and plain SET normally never reach their handlers: the server batches runs of them
(server.py). The handlers are the reference the batched path must agree with, and serve when
batching is off.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from ....errors import TableFull
from ....keys import tagged_rows
from .. import errors as E
from ..protocol import OK, ErrorReply, string2ll
from .base import (BATCH_GET, BATCH_MGET, BATCH_MSET, BATCH_SET, Client, Command, Server, key_error,
                   value_in, value_out)


def cmd_get(srv: Server, conn: Client, args: list[bytes]) -> Any:
    error = key_error(srv, args[1])
    if error is not None:
        return error
    value = srv.engine.get(args[1])
    srv.count_lookups(1, value is not None)
    return value_out(value)


def cmd_mget(srv: Server, conn: Client, args: list[bytes]) -> Any:
    keys = args[1:]
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    values = srv.engine.mget(tagged_rows(keys, srv.engine.geometry.key_bytes))
    srv.count_lookups(len(values), sum(v is not None for v in values))
    return [value_out(v) for v in values]


_SET_NX, _SET_XX, _SET_GET, _SET_KEEPTTL = 1, 2, 4, 8
_SET_EX, _SET_PX, _SET_EXAT, _SET_PXAT = 16, 32, 64, 128
_EXPIRE_FLAGS = {b"EX": _SET_EX, b"PX": _SET_PX, b"EXAT": _SET_EXAT, b"PXAT": _SET_PXAT}
_UNITS = _SET_EX | _SET_PX | _SET_EXAT | _SET_PXAT


def _set_options(args: list[bytes]) -> Any:
    """(flags, expire argument) of SET's options, parsed the way Redis parses them."""
    flags = 0
    expire: Optional[bytes] = None
    j = 3
    while j < len(args):
        nul = args[j].find(b"\0")
        opt = (args[j] if nul < 0 else args[j][:nul]).upper()
        has_next = j + 1 < len(args)
        if opt == b"NX" and not flags & _SET_XX:
            flags |= _SET_NX
        elif opt == b"XX" and not flags & _SET_NX:
            flags |= _SET_XX
        elif opt == b"GET":
            flags |= _SET_GET
        elif opt == b"KEEPTTL" and not flags & _UNITS:
            flags |= _SET_KEEPTTL
        elif opt in _EXPIRE_FLAGS and has_next and not flags & _SET_KEEPTTL and not (
                flags & (_UNITS & ~_EXPIRE_FLAGS[opt])):
            flags |= _EXPIRE_FLAGS[opt]
            expire = args[j + 1]
            j += 1
        else:
            return None
        j += 1
    return flags, expire


def _expire_error(flags: int, expire: bytes) -> Optional[bytes]:
    """Redis' checks of an expire argument (getExpireMillisecondsOrReply), else None."""
    value = string2ll(expire)
    if value is None:
        return E.NOT_INTEGER
    seconds = flags & (_SET_EX | _SET_EXAT)
    if value <= 0 or (seconds and value > ((1 << 63) - 1) // 1000):
        return E.INVALID_EXPIRE_SET
    millis = value * 1000 if seconds else value
    if flags & (_SET_EX | _SET_PX):
        millis += int(time.time() * 1000)
    if millis > (1 << 63) - 1:
        return E.INVALID_EXPIRE_SET
    return None


def cmd_set(srv: Server, conn: Client, args: list[bytes]) -> Any:
    parsed = _set_options(args)
    if parsed is None:
        return ErrorReply(E.SYNTAX)
    flags, expire = parsed
    if expire is not None:
        return ErrorReply(_expire_error(flags, expire) or E.NO_EXPIRY)
    key = args[1]
    error = key_error(srv, key)
    if error is not None:
        return error
    value = value_in(srv, args[2])
    if type(value) is ErrorReply:
        return value
    eng = srv.engine
    if flags & _SET_GET:
        old = eng.get(key)
        srv.count_lookups(1, old is not None)
        found = old is not None
    elif flags & (_SET_NX | _SET_XX):
        found = eng.exists(key)
    if (flags & _SET_NX and found) or (flags & _SET_XX and not found):
        return value_out(old) if flags & _SET_GET else None
    try:
        eng.set(key, value)
    except TableFull:
        return ErrorReply(E.OOM)
    return value_out(old) if flags & _SET_GET else OK


def cmd_mset(srv: Server, conn: Client, args: list[bytes]) -> Any:
    """All pairs or none: formats are checked first, and a table-full MSET is undone."""
    if len(args) % 2 == 0:
        return ErrorReply(E.wrong_arity("mset"))
    keys, values = args[1::2], []
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    for raw in args[2::2]:
        value = value_in(srv, raw)
        if type(value) is ErrorReply:
            return value
        values.append(value)
    eng = srv.engine
    g = eng.geometry
    key_rows = tagged_rows(keys, g.key_bytes)
    if len(keys) == 1:  # a single SET either happens or not
        report = eng.mset(key_rows, values)
        return ErrorReply(E.OOM) if report.failed else OK
    had, old = eng.get_batch(key_rows)
    report = eng.mset(key_rows, values)
    if report.failed:
        _undo_mset(srv, keys, key_rows, had, old)
        return ErrorReply(E.OOM)
    return OK


def _undo_mset(srv: Server, keys: list[bytes], key_rows: Any, had: Any, old: Any) -> None:
    """Put back what a failed MSET changed: remove the keys it added, restore older values."""
    eng = srv.engine
    first: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    new = [i for i in first.values() if not had[i]]
    kept = [i for i in first.values() if had[i]]
    if new:
        eng.delete_batch(key_rows[new])
    if kept:
        eng.set_batch(key_rows[kept], old[kept])


def commands() -> list[Command]:
    """GET, SET, MGET, MSET."""
    rw = ("readonly", "fast")
    return [
        Command("get", 2, rw, cmd_get, "Returns the string value of a key", "string", (1, 1, 1),
                BATCH_GET),
        Command("set", -3, ("write", "denyoom"), cmd_set,
                "Sets the string value of a key (NX, XX, GET; no expiry)", "string", (1, 1, 1),
                BATCH_SET),
        Command("mget", -2, rw, cmd_mget, "Atomically returns the string values of one or more keys",
                "string", (1, -1, 1), BATCH_MGET),
        Command("mset", -3, ("write", "denyoom"), cmd_mset,
                "Atomically creates or modifies the string values of one or more keys", "string",
                (1, -1, 2), BATCH_MSET),
    ]
