"""The command table and the handlers of the Redis commands pynq-kv answers.

One table says, for every command, its arity and flags (as COMMAND reports them), whether it
may run before AUTH, and whether the dispatcher may fold it into an engine batch. Dispatch is
Redis' order: the command must exist (or the subcommand of a container such as CLIENT), then
its arity must fit, then the client must be authenticated.

Handlers take (server, connection, args) and return a reply value that the connection encodes
in its protocol (see protocol.encode); errors are `ErrorReply`s with Redis' own wording
(errors.py). GET, MGET, EXISTS and plain SET normally never reach their handlers here: the
server batches runs of them (server.py). The handlers are the reference the batched path must
agree with, and serve when batching is off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from ...errors import TableFull
from . import errors as E
from ..codec import parse_uint, tagged_rows
from .protocol import OK, PONG, ErrorReply, Raw, RespSet, Simple, Verbatim, string2ll

if TYPE_CHECKING:  # pragma: no cover
    from .server import Connection, RespServer

Handler = Callable[["RespServer", "Connection", list[bytes]], Any]

# How the dispatcher may fold a command into an engine batch (server.py).
BATCH_NONE, BATCH_GET, BATCH_MGET, BATCH_EXISTS, BATCH_SET = 0, 1, 2, 3, 4


@dataclass
class Command:
    """One command (or subcommand) as Redis describes it, and how pynq-kv runs it."""

    name: str  # lower-case full name: "get", "client|setname", "kv.match"
    arity: int  # n: exactly n arguments (with the name); -n: at least n
    flags: tuple[str, ...]
    handler: Optional[Handler]
    summary: str = ""
    group: str = "generic"
    keys: tuple[int, int, int] = (0, 0, 0)  # first key, last key, step (COMMAND INFO)
    batch: int = BATCH_NONE
    subcommands: dict[bytes, "Command"] = field(default_factory=dict)

    @property
    def noauth(self) -> bool:
        return "no_auth" in self.flags

    def arity_ok(self, argc: int) -> bool:
        return argc == self.arity if self.arity > 0 else argc >= -self.arity


def lookup(table: dict[bytes, Command], args: list[bytes]) -> Any:
    """The Command for args, or the ErrorReply Redis gives (unknown command/subcommand, arity)."""
    cmd = table.get(args[0])
    if cmd is None:
        cmd = table.get(args[0].upper())
        if cmd is None:
            return ErrorReply(E.unknown_command(args))
    if cmd.subcommands and len(args) >= 2:
        sub = cmd.subcommands.get(args[1].upper())
        if sub is None:
            return ErrorReply(E.unknown_subcommand(args[0], args[1]))
        cmd = sub
    if not cmd.arity_ok(len(args)):
        return ErrorReply(E.wrong_arity(cmd.name))
    return cmd


# -- helpers shared with the batched path -------------------------------------------------------
def key_error(srv: "RespServer", key: bytes) -> Optional[ErrorReply]:
    if len(key) > srv.engine.key_format.max_bytes:
        return ErrorReply(srv.key_too_long)
    return None


def value_in(srv: "RespServer", value: bytes) -> Any:
    """The engine value for a RESP value, or an ErrorReply when it does not fit the format."""
    eng = srv.engine
    if eng.value_kind == "int":
        number = parse_uint(value, eng.geometry.value_width)
        return ErrorReply(E.value_not_integer(eng.geometry.value_width)) if number is None else number
    if len(value) > eng.value_format.max_bytes:
        return ErrorReply(srv.value_too_long)
    return value


def value_out(value: Any) -> Any:
    """A stored value as a RESP bulk string (integers in decimal, as Redis shows them)."""
    if value is None or isinstance(value, bytes):
        return value
    return str(int(value)).encode()


def _c_eq(arg: bytes, word: bytes) -> bool:
    """Case-insensitive compare of a C string (Redis' strcasecmp stops at a NUL)."""
    nul = arg.find(b"\0")
    return (arg if nul < 0 else arg[:nul]).upper() == word


# -- connection and server commands ------------------------------------------------------------
def cmd_ping(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    if len(args) > 2:
        return ErrorReply(E.wrong_arity("ping"))
    return PONG if len(args) == 1 else args[1]


def cmd_echo(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return args[1]


def cmd_quit(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    conn.closing = True
    return OK


def cmd_select(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    index = string2ll(args[1])
    if index is None or not -(1 << 31) <= index < 1 << 31:
        return ErrorReply(E.NOT_INTEGER)
    if index != 0:  # one database: the engine's table
        return ErrorReply(E.DB_OUT_OF_RANGE)
    return OK


def _authenticate(srv: "RespServer", conn: "Connection", user: bytes, password: bytes) -> bool:
    ok = user == b"default" and (srv.requirepass is None or password == srv.requirepass)
    if ok:
        conn.set_authenticated()
    return ok


def cmd_auth(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    if len(args) > 3:
        return ErrorReply(E.SYNTAX)
    if len(args) == 2:
        if srv.requirepass is None:
            return ErrorReply(E.AUTH_NOT_CONFIGURED)
        user, password = b"default", args[1]
    else:
        user, password = args[1], args[2]
    if not _authenticate(srv, conn, user, password):
        return ErrorReply(E.WRONGPASS)
    return OK


def cmd_hello(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    version = 0
    if len(args) >= 2:
        version = string2ll(args[1])
        if version is None:
            return ErrorReply(E.HELLO_PROTO_NOT_INTEGER)
        if version not in (2, 3):
            return ErrorReply(E.NOPROTO)
    auth: Optional[tuple[bytes, bytes]] = None
    name: Optional[bytes] = None
    j = 2
    while j < len(args):
        more = len(args) - 1 - j
        if _c_eq(args[j], b"AUTH") and more >= 2:
            auth = (args[j + 1], args[j + 2])
            j += 3
        elif _c_eq(args[j], b"SETNAME") and more:
            name = args[j + 1]
            j += 2
        else:
            return ErrorReply(E.hello_syntax(args[j]))
    if auth is not None and not _authenticate(srv, conn, *auth):
        return ErrorReply(E.WRONGPASS)
    if not conn.authenticated:
        return ErrorReply(E.NOAUTH_HELLO)
    if name is not None:
        error = _set_name(conn, name)
        if error is not None:
            return error
    if version:
        conn.set_protocol(version)
    return {
        b"server": b"pynq-kv",
        b"version": srv.redis_version.encode(),
        b"proto": 3 if conn.resp3 else 2,
        b"id": conn.id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
    }


def _set_name(conn: "Connection", name: bytes) -> Optional[ErrorReply]:
    if any(byte < 0x21 or byte > 0x7E for byte in name):
        return ErrorReply(E.CLIENT_NAME_CHARS)
    conn.name = name or None
    return None


def cmd_client_id(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return conn.id


def cmd_client_getname(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return conn.name


def cmd_client_setname(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return _set_name(conn, args[2]) or OK


def cmd_client_setinfo(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    attr, value = args[2].upper(), args[3]
    if attr not in (b"LIB-NAME", b"LIB-VER"):
        return ErrorReply(b"ERR Unrecognized option '" + args[2] + b"'")
    if any(byte < 0x21 or byte > 0x7E for byte in value):
        return ErrorReply(b"ERR " + attr + b" cannot contain spaces, newlines or special characters.")
    if attr == b"LIB-NAME":
        conn.lib_name = value
    else:
        conn.lib_ver = value
    return OK


def cmd_client_info(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return Verbatim(conn.describe() + "\n")


def cmd_client_list(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    if len(args) == 4 and args[2].upper() == b"TYPE":
        if args[3].upper() != b"NORMAL":
            return Verbatim("")
    elif len(args) != 2:
        return ErrorReply(E.SYNTAX)
    return Verbatim("".join(c.describe() + "\n" for c in list(srv.conns.values())))


def _help(title: str, lines: list[str]) -> Any:
    return [Simple(title)] + [Simple(line) for line in lines]


def cmd_client_help(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return _help("CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", [
        "GETNAME", "    Return the name of the current connection.",
        "ID", "    Return the ID of the current connection.",
        "INFO", "    Return information about the current client connection.",
        "LIST [TYPE NORMAL]", "    Return information about client connections.",
        "SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client library name or version.",
        "SETNAME <name>", "    Assign the name <name> to the current connection.",
        "HELP", "    Prints this help."])


# CONFIG GET answers what clients and tools ask; the values come from the server's settings.
def _config_values(srv: "RespServer") -> dict[bytes, bytes]:
    cfg = srv.config
    return {
        b"appendonly": b"no",
        b"save": b"",
        b"databases": b"1",
        b"maxclients": str(cfg.max_clients).encode(),
        b"timeout": str(int(cfg.idle_timeout)).encode(),
        b"proto-max-bulk-len": str(cfg.max_bulk_len).encode(),
        b"client-query-buffer-limit": str(cfg.max_query_buffer).encode(),
        b"requirepass": srv.requirepass or b"",
        b"maxmemory": b"0",
        b"maxmemory-policy": b"noeviction",
        b"port": str(srv.port).encode(),
        b"bind": srv.host.encode(),
        b"protected-mode": b"no",
        b"cluster-enabled": b"no",
    }


def _glob(pattern: bytes, text: bytes) -> bool:
    """Redis' stringmatchlen with nocase: * ? [set] [^set] [a-z] and \\ escapes."""
    return _glob_at(pattern.lower(), 0, text.lower(), 0)


def _glob_at(pat: bytes, p: int, text: bytes, t: int) -> bool:
    while p < len(pat):
        c = pat[p]
        if c == 42:  # '*'
            while p + 1 < len(pat) and pat[p + 1] == 42:
                p += 1
            if p + 1 == len(pat):
                return True
            return any(_glob_at(pat, p + 1, text, k) for k in range(t, len(text) + 1))
        if t >= len(text):
            return False
        if c == 63:  # '?'
            t += 1
        elif c == 91:  # '['
            p += 1
            negate = p < len(pat) and pat[p] == 94
            if negate:
                p += 1
            matched = False
            while p < len(pat) and pat[p] != 93:
                if pat[p] == 92 and p + 1 < len(pat):
                    p += 1
                    matched |= pat[p] == text[t]
                elif p + 2 < len(pat) and pat[p + 1] == 45:
                    lo, hi = sorted((pat[p], pat[p + 2]))
                    matched |= lo <= text[t] <= hi
                    p += 2
                else:
                    matched |= pat[p] == text[t]
                p += 1
            if matched == negate:
                return False
            t += 1
        else:
            if c == 92 and p + 1 < len(pat):
                p += 1
                c = pat[p]
            if c != text[t]:
                return False
            t += 1
        p += 1
    return t == len(text)


def cmd_config_get(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    values = _config_values(srv)
    found: dict[bytes, bytes] = {}
    for pattern in args[2:]:
        if not any(ch in pattern for ch in b"[*?"):
            if pattern.lower() in values and pattern not in found:
                found[pattern] = values[pattern.lower()]
            continue
        for name, value in values.items():
            if _glob(pattern, name):
                found[name] = value
    return found


def cmd_config_set(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    if len(args) % 2:
        return ErrorReply(E.wrong_arity("config|set"))
    name = args[2]
    if name.lower() in _config_values(srv):
        return ErrorReply(E.config_set_immutable(name))
    return ErrorReply(E.config_set_unknown(name))


def cmd_config_resetstat(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    srv.reset_stats()
    return OK


def cmd_config_help(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return _help("CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", [
        "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>", "    pynq-kv's settings are fixed when the server starts.",
        "RESETSTAT", "    Reset the RESP front-end's statistics reported by INFO.",
        "HELP", "    Prints this help."])


# -- COMMAND ------------------------------------------------------------------------------------
_CATEGORIES = {"readonly": "@read", "write": "@write", "fast": "@fast", "admin": "@admin",
               "no_auth": "@connection"}


def _command_info(cmd: Command) -> list[Any]:
    first, last, step = cmd.keys
    categories = RespSet(Simple(c) for f, c in _CATEGORIES.items() if f in cmd.flags)
    return [cmd.name.encode(), cmd.arity, RespSet(Simple(f) for f in cmd.flags), first, last, step,
            categories, [], [], [_command_info(s) for s in cmd.subcommands.values()]]


def _find(srv: "RespServer", name: bytes) -> Optional[Command]:
    base, _, sub = name.upper().partition(b"|")
    cmd = srv.commands.get(base)
    if cmd is not None and sub:
        cmd = cmd.subcommands.get(sub)
    return cmd


def cmd_command(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return [_command_info(cmd) for cmd in srv.command_list]


def cmd_command_count(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return len(srv.command_list)


def cmd_command_list(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    if len(args) != 2:
        return ErrorReply(E.SYNTAX)
    names = []
    for cmd in srv.command_list:
        names.append(cmd.name.encode())
        names.extend(sub.name.encode() for sub in cmd.subcommands.values())
    return names


def cmd_command_info(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    if len(args) == 2:
        return cmd_command(srv, conn, args)
    found = [_find(srv, name) for name in args[2:]]
    return [None if cmd is None else _command_info(cmd) for cmd in found]


def _docs(cmd: Command) -> dict[bytes, Any]:
    doc: dict[bytes, Any] = {b"summary": cmd.summary.encode(), b"since": b"1.0.0",
                             b"group": cmd.group.encode()}
    if cmd.subcommands:
        doc[b"subcommands"] = {s.name.encode(): _docs(s) for s in cmd.subcommands.values()}
    return doc


def cmd_command_docs(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    chosen = srv.command_list if len(args) == 2 else [_find(srv, name) for name in args[2:]]
    return {cmd.name.encode(): _docs(cmd) for cmd in chosen if cmd is not None}


def cmd_command_help(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return _help("COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", [
        "(no subcommand)", "    Return details about all commands.",
        "COUNT", "    Return the total number of commands in this server.",
        "LIST", "    Return a list of all commands in this server.",
        "INFO [<command-name> ...]", "    Return details about multiple commands.",
        "DOCS [<command-name> ...]", "    Return documentation details about multiple commands.",
        "HELP", "    Prints this help."])


# -- the key-value commands ---------------------------------------------------------------------
def cmd_get(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    error = key_error(srv, args[1])
    if error is not None:
        return error
    value = srv.engine.get(args[1])
    srv.count_lookups(1, value is not None)
    return value_out(value)


def cmd_mget(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    keys = args[1:]
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    values = srv.engine.mget(tagged_rows(keys, srv.engine.geometry.key_bytes))
    srv.count_lookups(len(values), sum(v is not None for v in values))
    return [value_out(v) for v in values]


def cmd_exists(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    keys = args[1:]
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    hit, _ = srv.engine.get_batch(tagged_rows(keys, srv.engine.geometry.key_bytes))
    found = int(hit.sum())
    srv.count_lookups(len(keys), found)
    return found


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


def cmd_set(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
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


def cmd_mset(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
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


def _undo_mset(srv: "RespServer", keys: list[bytes], key_rows: Any, had: Any, old: Any) -> None:
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


def cmd_del(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    keys = args[1:]
    for key in keys:
        error = key_error(srv, key)
        if error is not None:
            return error
    eng = srv.engine
    return int(eng.delete_batch(tagged_rows(keys, eng.geometry.key_bytes)).sum())


def cmd_dbsize(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    return srv.engine.occupancy().used


def _flush(args: list[bytes], rules: bool, srv: "RespServer") -> Any:
    if len(args) > 2 or (len(args) == 2 and args[1].upper() not in (b"SYNC", b"ASYNC")):
        return ErrorReply(E.SYNTAX)
    srv.engine.clear(rules=rules)
    return OK


def cmd_flushdb(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    """The exact table only: wildcard rules are configuration and stay."""
    return _flush(args, False, srv)


def cmd_flushall(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    """The exact table and the wildcard rules."""
    return _flush(args, True, srv)


def cmd_info(srv: "RespServer", conn: "Connection", args: list[bytes]) -> Any:
    from .info import info_text

    return Verbatim(info_text(srv, [a.decode("latin-1").lower() for a in args[1:]]))


# -- the table ----------------------------------------------------------------------------------
def _table() -> list[Command]:
    from . import kv

    def sub(name: str, arity: int, flags: tuple[str, ...], handler: Handler, summary: str) -> Command:
        return Command(name, arity, flags, handler, summary)

    client = Command("client", -2, ("sentinel",), None, "A container for client connection commands",
                     "connection")
    client.subcommands = {s.name.split("|")[1].upper().encode(): s for s in [
        sub("client|id", 2, ("noscript", "loading", "stale"), cmd_client_id,
            "Returns the client ID for the current connection"),
        sub("client|getname", 2, ("noscript", "loading", "stale"), cmd_client_getname,
            "Returns the name of the connection"),
        sub("client|setname", 3, ("noscript", "loading", "stale"), cmd_client_setname,
            "Sets the connection name"),
        sub("client|setinfo", 4, ("noscript", "loading", "stale"), cmd_client_setinfo,
            "Sets information specific to the client or connection"),
        sub("client|info", 2, ("noscript", "loading", "stale"), cmd_client_info,
            "Returns information about the connection"),
        sub("client|list", -2, ("admin", "noscript", "loading", "stale"), cmd_client_list,
            "Lists open connections"),
        sub("client|help", 2, ("loading", "stale"), cmd_client_help, "Returns helpful text"),
    ]}
    config = Command("config", -2, (), None, "A container for server configuration commands", "server")
    config.subcommands = {s.name.split("|")[1].upper().encode(): s for s in [
        sub("config|get", -3, ("admin", "noscript", "loading", "stale"), cmd_config_get,
            "Returns the effective values of configuration parameters"),
        sub("config|set", -4, ("admin", "noscript", "loading", "stale"), cmd_config_set,
            "Sets configuration parameters (none can change at run time)"),
        sub("config|resetstat", 2, ("admin", "noscript", "loading", "stale"), cmd_config_resetstat,
            "Resets the server's statistics"),
        sub("config|help", 2, ("loading", "stale"), cmd_config_help, "Returns helpful text"),
    ]}
    command = Command("command", -1, ("loading", "stale"), cmd_command,
                      "Returns detailed information about all commands", "server")
    command.subcommands = {s.name.split("|")[1].upper().encode(): s for s in [
        sub("command|count", 2, ("loading", "stale"), cmd_command_count,
            "Returns a count of commands"),
        sub("command|list", -2, ("loading", "stale"), cmd_command_list,
            "Returns a list of command names"),
        sub("command|info", -2, ("loading", "stale"), cmd_command_info,
            "Returns information about one, multiple or all commands"),
        sub("command|docs", -2, ("loading", "stale"), cmd_command_docs,
            "Returns documentary information about one, multiple or all commands"),
        sub("command|help", 2, ("loading", "stale"), cmd_command_help, "Returns helpful text"),
    ]}
    rw = ("readonly", "fast")
    return [
        Command("ping", -1, ("fast", "sentinel"), cmd_ping, "Returns the server's liveliness response",
                "connection"),
        Command("echo", 2, ("fast",), cmd_echo, "Returns the given string", "connection"),
        Command("quit", -1, ("allow_busy", "noscript", "loading", "stale", "fast", "no_auth"), cmd_quit,
                "Closes the connection", "connection"),
        Command("auth", -2, ("noscript", "loading", "stale", "fast", "no_auth", "allow_busy"), cmd_auth,
                "Authenticates the connection", "connection"),
        Command("hello", -1, ("noscript", "loading", "stale", "fast", "no_auth", "allow_busy"),
                cmd_hello, "Handshakes with the server", "connection"),
        Command("select", 2, ("loading", "stale", "fast"), cmd_select,
                "Changes the selected database (only 0 exists)", "connection"),
        client, config, command,
        Command("get", 2, rw, cmd_get, "Returns the string value of a key", "string", (1, 1, 1),
                BATCH_GET),
        Command("set", -3, ("write", "denyoom"), cmd_set,
                "Sets the string value of a key (NX, XX, GET; no expiry)", "string", (1, 1, 1),
                BATCH_SET),
        Command("mget", -2, rw, cmd_mget, "Atomically returns the string values of one or more keys",
                "string", (1, -1, 1), BATCH_MGET),
        Command("mset", -3, ("write", "denyoom"), cmd_mset,
                "Atomically creates or modifies the string values of one or more keys", "string",
                (1, -1, 2)),
        Command("del", -2, ("write",), cmd_del, "Deletes one or more keys", "generic", (1, -1, 1)),
        Command("exists", -2, rw, cmd_exists, "Determines whether one or more keys exist", "generic",
                (1, -1, 1), BATCH_EXISTS),
        Command("dbsize", 1, rw, cmd_dbsize, "Returns the number of keys in the table", "server"),
        Command("flushdb", -1, ("write",), cmd_flushdb, "Removes all keys (rules stay)", "server"),
        Command("flushall", -1, ("write",), cmd_flushall, "Removes all keys and all rules", "server"),
        Command("info", -1, ("loading", "stale"), cmd_info,
                "Returns information and statistics about the server and the engine", "server"),
        *kv.commands(Command),
    ]


def build_table() -> tuple[dict[bytes, Command], list[Command]]:
    """Lookup table (upper- and lower-case names) and the command list in COMMAND order."""
    commands = _table()
    table: dict[bytes, Command] = {}
    for cmd in commands:
        name = cmd.name.encode()
        table[name.upper()] = cmd
        table[name.lower()] = cmd
    return table, commands


__all__ = ["Command", "lookup", "build_table", "BATCH_NONE", "BATCH_GET", "BATCH_MGET",
           "BATCH_EXISTS", "BATCH_SET", "Raw", "RespSet"]
