"""Connection commands: PING, ECHO, QUIT, AUTH, HELLO, SELECT and the CLIENT container."""

from __future__ import annotations

from typing import Any, Optional

from .. import errors as E
from ..protocol import OK, PONG, ErrorReply, Verbatim, string2ll
from .base import Client, Command, Handler, Server, help_reply


def _c_eq(arg: bytes, word: bytes) -> bool:
    """Case-insensitive compare of a C string (Redis' strcasecmp stops at a NUL)."""
    nul = arg.find(b"\0")
    return (arg if nul < 0 else arg[:nul]).upper() == word


def cmd_ping(srv: Server, conn: Client, args: list[bytes]) -> Any:
    if len(args) > 2:
        return ErrorReply(E.wrong_arity("ping"))
    return PONG if len(args) == 1 else args[1]


def cmd_echo(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return args[1]


def cmd_quit(srv: Server, conn: Client, args: list[bytes]) -> Any:
    conn.closing = True
    return OK


def cmd_select(srv: Server, conn: Client, args: list[bytes]) -> Any:
    index = string2ll(args[1])
    if index is None or not -(1 << 31) <= index < 1 << 31:
        return ErrorReply(E.NOT_INTEGER)
    if index != 0:  # one database: the engine's table
        return ErrorReply(E.DB_OUT_OF_RANGE)
    return OK


def _authenticate(srv: Server, conn: Client, user: bytes, password: bytes) -> bool:
    ok = user == b"default" and (srv.requirepass is None or password == srv.requirepass)
    if ok:
        conn.set_authenticated()
    return ok


def cmd_auth(srv: Server, conn: Client, args: list[bytes]) -> Any:
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


def cmd_hello(srv: Server, conn: Client, args: list[bytes]) -> Any:
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


def _set_name(conn: Client, name: bytes) -> Optional[ErrorReply]:
    if any(byte < 0x21 or byte > 0x7E for byte in name):
        return ErrorReply(E.CLIENT_NAME_CHARS)
    conn.name = name or None
    return None


def cmd_client_id(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return conn.id


def cmd_client_getname(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return conn.name


def cmd_client_setname(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return _set_name(conn, args[2]) or OK


def cmd_client_setinfo(srv: Server, conn: Client, args: list[bytes]) -> Any:
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


def cmd_client_info(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return Verbatim(conn.describe() + "\n")


def cmd_client_list(srv: Server, conn: Client, args: list[bytes]) -> Any:
    if len(args) == 4 and args[2].upper() == b"TYPE":
        if args[3].upper() != b"NORMAL":
            return Verbatim("")
    elif len(args) != 2:
        return ErrorReply(E.SYNTAX)
    return Verbatim("".join(c.describe() + "\n" for c in list(srv.conns.values())))


def cmd_client_help(srv: Server, conn: Client, args: list[bytes]) -> Any:
    return help_reply("CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", [
        "GETNAME", "    Return the name of the current connection.",
        "ID", "    Return the ID of the current connection.",
        "INFO", "    Return information about the current client connection.",
        "LIST [TYPE NORMAL]", "    Return information about client connections.",
        "SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client library name or version.",
        "SETNAME <name>", "    Assign the name <name> to the current connection.",
        "HELP", "    Prints this help."])


def commands() -> list[Command]:
    """PING, ECHO, QUIT, AUTH, HELLO, SELECT, CLIENT (in COMMAND's order)."""
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
        client,
    ]
