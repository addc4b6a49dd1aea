"""Malformed and mutated RESP inputs for the fuzz tests, and an in-process harness.

Inputs start from well-formed requests (multibulk or inline) of commands that only read, then
get protocol-level mutations: flipped and inserted bytes, CR/LF/NUL/quote/'*'/'$' injections,
odd numbers in headers, cut, repeated and deleted ranges. `Harness` drives the real
Connection/RespServer code with a fake transport and runs each tick by hand, so thousands of
inputs take seconds.
"""

from __future__ import annotations

import random
import re
from typing import Any, Optional

from pynq_kv.serve.resp.server import Connection, RespConfig, RespServer

READ_COMMANDS: list[list[bytes]] = [
    [b"PING"], [b"PING", b"hi"], [b"ECHO", b"hello world"], [b"ECHO", b""], [b"GET", b"k1"],
    [b"GET", b"nope"], [b"MGET", b"k1", b"k2", b"nope"], [b"EXISTS", b"k1", b"k1", b"x"],
    [b"DBSIZE"], [b"SELECT", b"0"], [b"NOSUCH", b"a", b"b"], [b"GET"], [b"ECHO", b"a", b"b"],
    [b"KV.MATCH", b"k1"], [b"KV.MATCH", b"user:7"], [b"KV.RULE.LIST"], [b"KV.STATS"],
    [b"INFO", b"keyspace"], [b"CLIENT", b"GETNAME"], [b"CLIENT", b"ID"], [b"HELLO", b"3"],
    [b"HELLO", b"2"], [b"COMMAND", b"COUNT"], [b"CONFIG", b"GET", b"save"], [b"QUIT"],
    [b"AUTH", b"pw"],
]
# what the differential test against redis-server may use: replies that do not depend on the
# server's identity, connection ids or command set
PORTABLE_COMMANDS = [c for c in READ_COMMANDS if c[0] in (
    b"PING", b"ECHO", b"GET", b"MGET", b"EXISTS", b"DBSIZE", b"SELECT", b"NOSUCH", b"QUIT")]

SPECIAL = [b"\r", b"\n", b"\r\n", b"\x00", b'"', b"'", b"\\", b"*", b"$", b"-", b"0", b" ", b"\t",
           b"*-1\r\n", b"$-1\r\n", b"*0\r\n", b"+OK\r\n", b":1\r\n", b"\xff", b"\\x4"]
NUMBERS = [b"-1", b"0", b"01", b"-0", b"+3", b"2147483647", b"2147483648", b"99999999999999999999",
           b"1048577", b"16385", b"", b"x", b"3 ", b"1_0"]
WRITE_WORDS = re.compile(rb"(?i)set|del|flush|rule\.|config|\\")


def render(commands: list[list[bytes]], inline: list[bool]) -> bytes:
    parts = []
    for cmd, as_inline in zip(commands, inline):
        if as_inline and all(re.fullmatch(rb"[!-~]+", arg) for arg in cmd):
            parts.append(b" ".join(cmd) + b"\r\n")
        else:
            parts.append(b"*%d\r\n" % len(cmd) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in cmd))
    return b"".join(parts)


def mutate(data: bytes, ops: list[tuple[int, int, int]]) -> bytes:
    """Apply (kind, position, amount) mutations; positions wrap around the current length."""
    buf = bytearray(data)
    for kind, pos, amount in ops:
        n = len(buf)
        at = pos % (n + 1)
        if kind == 0 and n:  # flip a byte
            buf[at % n] ^= 1 << (amount % 8)
        elif kind == 1:  # insert a special token
            buf[at:at] = SPECIAL[amount % len(SPECIAL)]
        elif kind == 2 and n:  # delete a range
            del buf[at:at + 1 + amount % 8]
        elif kind == 3 and n:  # repeat a range
            buf[at:at] = buf[at:at + 1 + amount % 16]
        elif kind == 4:  # replace the next header number
            match = re.compile(rb"[*$]-?\d+").search(bytes(buf), at % (n + 1) if n else 0)
            if match:
                buf[match.start() + 1:match.end()] = NUMBERS[amount % len(NUMBERS)]
        elif kind == 5:  # cut the end
            del buf[at:]
        elif kind == 6:  # random byte
            buf[at:at] = bytes([amount % 256])
    return bytes(buf)


def random_input(rng: random.Random, portable: bool = False) -> bytes:
    pool = PORTABLE_COMMANDS if portable else READ_COMMANDS
    commands = [rng.choice(pool) for _ in range(rng.randint(1, 5))]
    data = render(commands, [rng.random() < 0.3 for _ in commands])
    ops = [(rng.randrange(7), rng.randrange(1 << 16), rng.randrange(1 << 16))
           for _ in range(rng.randint(0, 5))]
    return mutate(data, ops)


def may_write(data: bytes) -> bool:
    """True when the bytes might spell a command that changes the tables (then they may)."""
    return WRITE_WORDS.search(data) is not None


class FakeTransport:
    """Enough of an asyncio transport for Connection: collects writes, records closing."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False
        self.reading = True

    def write(self, data: bytes) -> None:
        if not self.closed:
            self.data += data

    def write_eof(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def set_write_buffer_limits(self, high: Optional[int] = None, low: Optional[int] = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 6380)}.get(name, default)


class _ManualLoop:
    """Stands in for the event loop: ticks are run by Harness itself."""

    def call_soon(self, fn: Any, *args: Any) -> None:
        pass

    def call_later(self, delay: float, fn: Any, *args: Any) -> None:
        pass


class Harness:
    """A RespServer without sockets: feed bytes to a fresh Connection, run ticks, collect output."""

    def __init__(self, appliance: Any, config: Optional[RespConfig] = None) -> None:
        self.server = RespServer(appliance, config or RespConfig())
        self.server.loop = _ManualLoop()

    def run(self, chunks: list[bytes]) -> tuple[bytes, bool]:
        """(everything written, whether the connection was closed) for one client's input."""
        srv = self.server
        conn = Connection(srv)
        transport = FakeTransport()
        conn.connection_made(transport)
        for chunk in chunks:
            if transport.closed or not transport.reading:
                break
            conn.data_received(chunk)
            srv.tick()
        if not transport.closed:
            conn.eof_received()
            srv.tick()
        conn.connection_lost(None)
        srv.tick()
        return bytes(transport.data), transport.closed
