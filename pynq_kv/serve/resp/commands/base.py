"""What every RESP command module shares: the Command record, dispatch lookup, the view of the
server and client that handlers get, and the key/value checks (serve.batch.Limits) as replies.

Dispatch is Redis' order: the command must exist (or the subcommand of a container such as
CLIENT), then its arity must fit, then the client must be authenticated. Handlers take
(server, client, args) and return a reply value that the connection encodes in its protocol
(protocol.encode); errors are `ErrorReply`s with Redis' own wording (errors.py). Handlers see
the server and the client through the `Server` and `Client` protocols below, so no command
module imports the server that calls it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from ....appliance import Appliance
from ....engine import KVEngine
from ....limits import Limits
from .. import errors as E
from ..protocol import ErrorReply, Simple


class Client(Protocol):
    """One connection as the handlers see it (server.Connection)."""

    id: int
    closing: bool
    authenticated: bool
    resp3: bool
    name: Optional[bytes]
    lib_name: bytes
    lib_ver: bytes
    parser: Any

    def set_authenticated(self) -> None: ...

    def set_protocol(self, version: int) -> None: ...

    def describe(self) -> str: ...


class Server(Protocol):
    """The RESP server as the handlers see it (server.RespServer)."""

    appliance: Appliance
    config: Any  # server.RespConfig
    requirepass: Optional[bytes]
    redis_version: str
    host: str
    port: int
    started: float
    conns: dict[int, Any]  # id -> Client
    commands: dict[bytes, "Command"]
    command_list: list["Command"]

    @property
    def engine(self) -> KVEngine: ...

    @property
    def limits(self) -> Limits: ...

    @property
    def key_too_long(self) -> bytes: ...

    @property
    def value_too_long(self) -> bytes: ...

    def count_lookups(self, n: int, hits: int) -> None: ...

    def reset_stats(self) -> None: ...

    def stats(self) -> dict[str, Any]: ...


Handler = Callable[[Server, Client, list[bytes]], Any]

# How the dispatcher may fold a command into an engine batch (server.py); BATCH_MSET only with a
# host tier (forward.py), where Redis makes the MSET atomic.
BATCH_NONE, BATCH_GET, BATCH_MGET, BATCH_EXISTS, BATCH_SET, BATCH_MSET = 0, 1, 2, 3, 4, 5
# The dispatcher's items for a block of pipelined GETs / SETs / MSETs (one item, several keys).
GET_BLOCK, SET_BLOCK, MSET_BLOCK = 10, 11, 12


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


def key_error(srv: Server, key: bytes) -> Optional[ErrorReply]:
    """Redis' reply for a key the engine's key format cannot hold, else None."""
    if srv.limits.key_fits(key):
        return None
    return ErrorReply(srv.key_too_long)


def value_in(srv: Server, value: bytes) -> Any:
    """The engine value for a RESP value, or an ErrorReply when it does not fit the format."""
    limits = srv.limits
    number = limits.value(value)
    if number is not None:
        return number
    if limits.ints:
        return ErrorReply(E.value_not_integer(limits.value_bits))
    return ErrorReply(srv.value_too_long)


def value_out(value: Any) -> Any:
    """A stored value as a RESP bulk string (integers in decimal, as Redis shows them)."""
    if value is None or isinstance(value, bytes):
        return value
    return str(int(value)).encode()


def help_reply(title: str, lines: list[str]) -> Any:
    return [Simple(title)] + [Simple(line) for line in lines]

