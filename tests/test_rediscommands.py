"""Which keys a command may change, read from a real redis-server's COMMAND reply."""

from __future__ import annotations

import socket

import hiredis
import pytest

from pynq_kv.rediscommands import ALL, CommandSpecs
from resp_helpers import HAVE_REDIS, HOST, RedisServer, encode_command

pytestmark = pytest.mark.skipif(not HAVE_REDIS, reason="needs Debian's redis-server")


@pytest.fixture(scope="module")
def specs() -> CommandSpecs:
    server = RedisServer()
    try:
        with socket.create_connection((HOST, server.port), timeout=5) as sock:
            sock.sendall(encode_command("COMMAND"))
            reader = hiredis.Reader()
            reply = False
            while reply is False:
                reader.feed(sock.recv(1 << 20))
                reply = reader.gets()
    finally:
        server.stop()
    return CommandSpecs(reply)


@pytest.mark.parametrize("args, written", [
    (["SET", "k", "v"], ["k"]),
    (["set", "k", "v", "EX", "10"], ["k"]),
    (["INCR", "n"], ["n"]),
    (["MSET", "a", "1", "b", "2"], ["a", "b"]),
    (["DEL", "a", "b", "c"], ["a", "b", "c"]),
    (["ZUNIONSTORE", "dst", "2", "s1", "s2"], ["dst"]),  # the sources are only read
    (["LMPOP", "2", "l1", "l2", "LEFT"], ["l1", "l2"]),
    (["BLPOP", "q1", "q2", "0"], ["q1", "q2"]),
    (["COPY", "src", "dst"], ["dst"]),
    (["MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"], ALL),  # a spec Redis calls incomplete
    (["XGROUP", "CREATE", "stream", "g", "$"], ["stream"]),
    (["EVAL", "return 1", "0"], ALL),
    (["FCALL", "f", "1", "k"], ALL),
    (["FLUSHALL"], ALL),
    (["SWAPDB", "0", "1"], ALL),
    (["GET", "k"], None),
    (["XREAD", "STREAMS", "s", "0"], None),
    (["EVAL_RO", "return 1", "0"], None),
    (["NOSUCHCOMMAND", "k"], None),
])
def test_written_keys(specs: CommandSpecs, args: list[str], written: object) -> None:
    got = specs.written([a.encode() for a in args])
    want = [w.encode() for w in written] if isinstance(written, list) else written
    assert got == want


def test_blocking(specs: CommandSpecs) -> None:
    assert specs.blocking([b"BLPOP", b"q", b"0"]) and specs.blocking([b"xread", b"BLOCK", b"0"])
    assert not specs.blocking([b"LPOP", b"q"])


def test_plain_key(specs: CommandSpecs) -> None:
    """What a block of pipelined commands may go to Redis whole with (forward.py)."""
    assert specs.plain_key(b"INCR") == 1 and specs.plain_key(b"lpush") == 1
    assert specs.plain_key(b"GET") == 0 and specs.plain_key(b"LRANGE") == 0
    for name in (b"MSET", b"DEL", b"EVAL", b"FLUSHALL", b"XGROUP", b"OBJECT", b"NOSUCH"):
        assert specs.plain_key(name) is None, name
