"""handle_datagram against docs/frontend.md, rule by rule, and the server end to end.

Expected replies are written out as bytes here (not produced by the server's own helpers), so a
wrong encoding in pynq_kv.net cannot agree with itself. The loopback tests run the asyncio
server in a thread and talk to it with MemcacheUDPClient.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections import Counter
from typing import Iterator, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.engine import KVEngine
from pynq_kv.net import MemcacheError, MemcacheTimeout, MemcacheUDPClient
from pynq_kv.serve.memcached.server import DATAGRAM_COUNTERS, handle_datagram, start_udp_server
from pynq_kv.rules import Rule
from pynq_kv.appliance import Appliance

RID = 0x1234
HDR = struct.pack(">HHHH", RID, 0, 1, 0)


def req(opcode: int, key: bytes = b"", extras: bytes = b"", value: bytes = b"", opaque: int = 0,
        cas: int = 0, magic: int = 0x80, body_len: Optional[int] = None) -> bytes:
    body = extras + key + value
    total = len(body) if body_len is None else body_len
    return struct.pack(">BBHBBHIIQ", magic, opcode, len(key), len(extras), 0, 0, total, opaque,
                       cas) + body


def rsp(opcode: int, status: int = 0, key: bytes = b"", extras: bytes = b"", value: bytes = b"",
        opaque: int = 0) -> bytes:
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x81, opcode, len(key), len(extras), 0, status, len(body),
                       opaque, 0) + body


SETX = struct.pack(">II", 0, 0)
FLAGS0 = b"\x00" * 4
NOT_FOUND = b"Not found"
EINVAL = (4, b"Invalid arguments")


def err(opcode: int, status: int, message: bytes, opaque: int = 0) -> bytes:
    return rsp(opcode, status, value=message, opaque=opaque)


def serve(engine: KVEngine, body: bytes, counters: Optional[Counter] = None,
          header: bytes = HDR) -> list[bytes]:
    return handle_datagram(engine, header + body, counters)


def bodies(datagrams: list[bytes]) -> bytes:
    """The concatenated reply bodies, after checking every datagram's header."""
    for d in datagrams:
        assert d[:8] == HDR and len(d) <= 1400
    return b"".join(d[8:] for d in datagrams)


@pytest.fixture
def engine() -> Iterator[KVEngine]:
    with KVEngine("model", rows=64) as e:  # 288-bit keys (35 bytes), 256-bit values (31 bytes)
        yield e


# -- binary, frontend.md §4-§5 ------------------------------------------------------------
def test_get_set_delete_noop_version(engine: KVEngine) -> None:
    assert bodies(serve(engine, req(1, b"k", SETX, b"v1", opaque=1))) == rsp(1, opaque=1)
    assert engine.get(b"k") == b"v1"
    assert bodies(serve(engine, req(0, b"k", opaque=2))) == rsp(0, extras=FLAGS0, value=b"v1", opaque=2)
    assert bodies(serve(engine, req(0x0C, b"k", opaque=3))) == rsp(0x0C, key=b"k", extras=FLAGS0,
                                                                   value=b"v1", opaque=3)
    assert bodies(serve(engine, req(0x0A, opaque=4))) == rsp(0x0A, opaque=4)
    assert bodies(serve(engine, req(0x0B))) == rsp(0x0B, value=b"pynq-kv-1")
    assert bodies(serve(engine, req(4, b"k", opaque=5))) == rsp(4, opaque=5)
    assert bodies(serve(engine, req(4, b"k", opaque=6))) == err(4, 1, NOT_FOUND, 6)
    assert bodies(serve(engine, req(0, b"k", opaque=7))) == err(0, 1, NOT_FOUND, 7)
    # GETK's miss carries the key, not a message (as memcached)
    assert bodies(serve(engine, req(0x0C, b"k", opaque=8))) == rsp(0x0C, 1, key=b"k", opaque=8)


def test_quiet_commands_and_multi_get(engine: KVEngine) -> None:
    engine.set(b"a", b"1")
    body = (req(0x11, b"b", SETX, b"2", opaque=1) + req(0x09, b"a", opaque=2)
            + req(0x09, b"zz", opaque=3) + req(0x0D, b"b", opaque=4) + req(0x0D, b"zz", opaque=5)
            + req(0x14, b"zz", opaque=6) + req(0x14, b"a", opaque=7) + req(0x0A, opaque=8))
    assert bodies(serve(engine, body)) == (
        rsp(0x09, extras=FLAGS0, value=b"1", opaque=2)
        + rsp(0x0D, key=b"b", extras=FLAGS0, value=b"2", opaque=4)
        + err(0x14, 1, NOT_FOUND, 6)  # a quiet delete still reports the miss
        + rsp(0x0A, opaque=8))
    assert engine.get(b"a") is None and engine.get(b"b") == b"2"
    assert serve(engine, req(0x11, b"c", SETX, b"3")) == []  # nothing to say: no datagram


@pytest.mark.parametrize("request_bytes, status_message", [
    (req(0x3C), (0x81, b"Unknown command")),
    (req(0xC1, b"k", b"xx", b"v"), (0x81, b"Unknown command")),
    (req(0, b"k", b"abcd"), EINVAL),  # GET with extras
    (req(0, b"k", value=b"v"), EINVAL),  # GET with a value
    (req(0, b""), EINVAL),  # empty key
    (req(0, b"x" * 36), EINVAL),  # longer than MAX_KEY = 35
    (req(1, b"k", b"", b"v"), EINVAL),  # SET without extras
    (req(1, b"k", struct.pack(">II", 1, 0), b"v"), EINVAL),  # flags
    (req(1, b"k", struct.pack(">II", 0, 60), b"v"), EINVAL),  # expiration
    (req(1, b"k", SETX, b"v", cas=5), EINVAL),
    (req(4, b"k", cas=5), EINVAL),
    (req(0x0A, b"k"), EINVAL),  # NOOP with a key
    (req(0x0B, b"", b"abcd"), EINVAL),
    (req(0xC0, b"k", b"e"), EINVAL),  # MATCH with extras
    (req(1, b"k", SETX, b"x" * 32), (3, b"Too large.")),  # longer than MAX_VALUE = 31
])
def test_refused_requests(engine: KVEngine, request_bytes: bytes, status_message: tuple) -> None:
    engine.set(b"k", b"old")
    status, message = status_message
    opcode = request_bytes[1]
    counters: Counter = Counter()
    assert bodies(serve(engine, request_bytes, counters)) == err(opcode, status, message)
    assert counters["errors"] == 1
    assert engine.get(b"k") == b"old"  # a refused SET changes nothing (memcached drops the key)


def test_longest_key_and_value_are_accepted(engine: KVEngine) -> None:
    key, value = b"K" * 35, b"V" * 31
    assert bodies(serve(engine, req(1, key, SETX, value) + req(0x0C, key))) == (
        rsp(1) + rsp(0x0C, key=key, extras=FLAGS0, value=value))
    assert bodies(serve(engine, req(1, b"e", SETX, b"") + req(0, b"e"))) == rsp(1) + rsp(0, extras=FLAGS0)


def test_table_full() -> None:
    with KVEngine("model", ways=2, rows=2, stash=0) as small:  # room for 4 at most
        body = b"".join(req(1, b"key%d" % i, SETX, b"v", opaque=i) for i in range(6))
        replies = bodies(serve(small, body))
        stored = [i for i in range(6) if small.get(b"key%d" % i) == b"v"]
        assert 2 <= len(stored) <= 4
        assert replies == b"".join(rsp(1, opaque=i) if i in stored
                                   else err(1, 0x82, b"Out of memory", i) for i in range(6))


def test_framing_rules(engine: KVEngine) -> None:
    noop1, noop2 = req(0x0A, opaque=1), req(0x0A, opaque=2)
    c: Counter = Counter()
    # a bad magic ends the datagram; what came before is answered
    assert bodies(serve(engine, noop1 + req(0x0A, magic=0x81) + noop2, c)) == rsp(0x0A, opaque=1)
    # extras + key > body: invalid arguments, and the next request is still read
    bad_lengths = struct.pack(">BBHBBHIIQ", 0x80, 0, 5, 0, 0, 0, 2, 3, 0) + b"ab"  # key 5 > body 2
    assert bodies(serve(engine, bad_lengths + noop2, c)) == (
        err(0, *EINVAL, opaque=3) + rsp(0x0A, opaque=2))
    # body shorter than announced: invalid arguments, nothing after it
    assert bodies(serve(engine, noop1 + req(0, b"k", body_len=9, opaque=4), c)) == (
        rsp(0x0A, opaque=1) + err(0, *EINVAL, opaque=4))
    # a tail shorter than a header is dropped silently
    assert bodies(serve(engine, noop1 + b"\x80\x0a\x00", c)) == rsp(0x0A, opaque=1)
    assert (c["drop_bad_magic"], c["req_truncated"], c["requests_binary"]) == (1, 2, 6)


def test_udp_header_rules(engine: KVEngine) -> None:
    c: Counter = Counter()
    noop = req(0x0A)
    assert handle_datagram(engine, b"\x00\x01\x00", c) == []
    assert handle_datagram(engine, struct.pack(">HHHH", 1, 0, 2, 0) + noop, c) == []
    assert handle_datagram(engine, struct.pack(">HHHH", 1, 0, 0, 0) + noop, c) == []
    assert handle_datagram(engine, struct.pack(">HHHH", 1, 0, 1, 0), c) == []  # empty body
    # sequence number and reserved field are not checked (as memcached); the reply is (id,0,1,0)
    assert handle_datagram(engine, struct.pack(">HHHH", 9, 3, 1, 7) + noop, c) == [
        struct.pack(">HHHH", 9, 0, 1, 0) + rsp(0x0A)]
    assert (c["rx_datagrams"], c["drop_short"], c["drop_multi_datagram"], c["served"]) == (5, 1, 2, 2)


def test_replies_are_packed_whole(engine: KVEngine) -> None:
    keys = [b"key-%03d" % i for i in range(60)]
    engine.mset({k: b"v" * 31 for k in keys})
    body = b"".join(req(0x0D, k, opaque=i) for i, k in enumerate(keys)) + req(0x0A, opaque=999)
    c: Counter = Counter()
    datagrams = serve(engine, body, c)
    unit = len(rsp(0x0D, key=keys[0], extras=FLAGS0, value=b"v" * 31))  # 66 bytes
    per_datagram = (1400 - 8) // unit
    assert [len(d) for d in datagrams[:-1]] == [8 + per_datagram * unit] * (len(datagrams) - 1)
    assert len(datagrams) == -(-(60 * unit + 24) // (per_datagram * unit))
    expected = b"".join(rsp(0x0D, key=k, extras=FLAGS0, value=b"v" * 31, opaque=i)
                        for i, k in enumerate(keys)) + rsp(0x0A, opaque=999)
    assert bodies(datagrams) == expected  # every datagram starts with a whole response
    assert all(d[8] == 0x81 for d in datagrams)
    assert (c["responses"], c["tx_datagrams"]) == (61, len(datagrams))


def test_match(engine: KVEngine) -> None:
    prefix = b"user:"
    match = int.from_bytes(b"\x00" + prefix + bytes(30), "big")
    mask = int.from_bytes(b"\x00" + b"\xff" * 5 + bytes(30), "big")
    engine.add_rule(Rule.ternary(1, 1, 1, b"unused"))  # occupies entry 0
    rule = engine.add_rule(Rule.ternary(match, mask, 5, b"users"))
    entry = engine.rule_entries(rule)[0]
    engine.set(b"user:1", b"exact")
    replies = bodies(serve(engine, req(0xC0, b"user:1", opaque=1) + req(0xC0, b"user:77", opaque=2)
                           + req(0xC0, b"other", opaque=3)))
    assert replies == (
        rsp(0xC0, extras=bytes([1, 0, 0, 0]) + b"\xff" * 4, value=b"exact", opaque=1)
        + rsp(0xC0, extras=bytes([2, 0, 0, 0]) + entry.to_bytes(4, "big"), value=b"users", opaque=2)
        + err(0xC0, 1, NOT_FOUND, 3))
    assert engine.stats()["rule_hits"] == 1


def test_values_of_an_integer_table() -> None:
    with KVEngine("model", rows=64, value_width=64, value_kind="int") as e:
        e.set(b"tagged", 0x0261620000000000)  # reads as the 2-byte string "ab"
        e.set(b"wide", 0xFF00000000000001)  # first byte > MAX_VALUE: all 8 bytes
        replies = bodies(serve(e, req(0, b"tagged") + req(0, b"wide")))
        assert replies == (rsp(0, extras=FLAGS0, value=b"ab")
                           + rsp(0, extras=FLAGS0, value=bytes.fromhex("ff00000000000001")))


# -- text, frontend.md §6 -----------------------------------------------------------------
def test_text_commands(engine: KVEngine) -> None:
    body = (b"set k 0 0 2\r\nab\r\nget k zz k\r\nset q 0 0 1 noreply\r\nx\r\n"
            b"delete q\r\ndelete q\r\ndelete k noreply\r\nget k\r\nversion\r\n")
    assert bodies(serve(engine, body)) == (
        b"STORED\r\nVALUE k 0 2\r\nab\r\nVALUE k 0 2\r\nab\r\nEND\r\n"
        b"DELETED\r\nNOT_FOUND\r\nEND\r\nVERSION pynq-kv-1\r\n")


@pytest.mark.parametrize("body, reply", [
    (b"get a " + b"x" * 36 + b"\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"set " + b"x" * 36 + b" 0 0 1\r\na\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"delete " + b"x" * 36 + b"\r\n", b"CLIENT_ERROR bad command line format\r\n"),
    (b"set k 1 0 1\r\na\r\n", b"CLIENT_ERROR nonzero flags or exptime not supported\r\n"),
    (b"set k 0 9 1 noreply\r\na\r\n", b"CLIENT_ERROR nonzero flags or exptime not supported\r\n"),
    (b"set k 0 0 32\r\n" + b"a" * 32 + b"\r\n", b"SERVER_ERROR object too large for cache\r\n"),
    (b"set k 0 0 1\r\nab\r\n", b"CLIENT_ERROR bad data chunk\r\nERROR\r\n"),
    (b"set k 0 0 x\r\na\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n"),
    (b"delete k 1\r\n", b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"),
    (b"\r\nbogus\r\n", b"ERROR\r\nERROR\r\n"),
])
def test_text_errors(engine: KVEngine, body: bytes, reply: bytes) -> None:
    engine.set(b"k", b"old")
    c: Counter = Counter()
    assert bodies(serve(engine, body, c)) == reply
    assert c["errors"] == reply.count(b"ERROR")
    assert engine.get(b"k") == b"old"


def test_text_truncation_and_full_table() -> None:
    with KVEngine("model", ways=2, rows=2, stash=0) as small:
        c: Counter = Counter()
        body = b"".join(b"set k%d 0 0 1\r\nv\r\n" % i for i in range(6)) + b"set z 0 0 5\r\nab"
        replies = bodies(serve(small, body, c))
        stored = [i for i in range(6) if small.get(b"k%d" % i) == b"v"]
        assert replies == b"".join(b"STORED\r\n" if i in stored
                                   else b"SERVER_ERROR out of memory storing object\r\n"
                                   for i in range(6))
        assert len(stored) < 6 and small.get(b"z") is None
        assert (c["req_truncated"], c["requests_text"], c["errors"]) == (1, 6, 6 - len(stored))


# -- batching does not change anything (engine.md §7) --------------------------------------
KEYS = [b"a", b"b", b"c", b"d", b"e", b"f", b"g"]
binary_requests = st.one_of(
    st.builds(lambda k, v: req(1, k, SETX, v), st.sampled_from(KEYS), st.binary(max_size=4)),
    st.builds(lambda k, v: req(0x11, k, SETX, v), st.sampled_from(KEYS), st.binary(max_size=4)),
    st.builds(lambda op, k: req(op, k), st.sampled_from([0, 0x09, 0x0C, 0x0D, 4, 0x14, 0xC0]),
              st.sampled_from(KEYS)),
    st.just(req(0x0A)),
    st.just(req(1, b"k", b"", b"v")),  # refused: no extras
)


@settings(max_examples=60, deadline=None)
@given(st.lists(binary_requests, min_size=1, max_size=25))
def test_one_datagram_equals_one_request_at_a_time(requests: list[bytes]) -> None:
    # A tiny table without relocation, so FULL happens and batch = sequence exactly (§7).
    with KVEngine("model", ways=2, rows=2, stash=1, relocation=False) as one, \
            KVEngine("model", ways=2, rows=2, stash=1, relocation=False) as many:
        together = bodies(serve(one, b"".join(requests)))
        apart = b"".join(bodies(serve(many, r)) for r in requests)
        assert together == apart
        assert list(one.items()) == list(many.items())
        assert one.stats() == many.stats()


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=120))
def test_any_payload_is_handled(payload: bytes) -> None:
    with KVEngine("model", rows=16) as e:
        c: Counter = Counter()
        for datagram in handle_datagram(e, payload, c):
            assert datagram[:2] == payload[:2] and datagram[2:8] == b"\x00\x00\x00\x01\x00\x00"
        for datagram in handle_datagram(e, HDR + payload, c):
            assert datagram[:8] == HDR and len(datagram) <= 1400
        assert c["rx_datagrams"] == c["drop_short"] + c["drop_multi_datagram"] + c["served"]
        assert c["responses"] >= c["tx_datagrams"]


# -- the asyncio server over loopback ------------------------------------------------------
class Running:
    """start_udp_server on its own event loop thread."""

    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(start_udp_server(appliance, "127.0.0.1", 0))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, fn, *args):  # type: ignore[no-untyped-def]
        """fn(*args) on the loop's thread (the engine belongs to it)."""
        async def run():  # type: ignore[no-untyped-def]
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def running() -> Iterator[Running]:
    appliance = Appliance(lambda: KVEngine("model", rows=256))
    r = Running(appliance)
    yield r
    r.stop()
    appliance.close()


def test_client_against_the_server(running: Running) -> None:
    with MemcacheUDPClient(port=running.server.port, timeout=2) as client:
        assert client.version() == "pynq-kv-1"
        client.noop()
        client.set("alpha", "one")
        client.set(b"beta", b"\x00\xff")
        assert client.get("alpha") == b"one" and client.get("nope") is None
        keys = [b"m%04d" % i for i in range(150)]
        for k in keys[::3]:
            client.set(k, k[::-1])
        found = client.get_multi(keys + [b"alpha", b"alpha"])
        assert found == {**{k: k[::-1] for k in keys[::3]}, b"alpha": b"one"}
        assert client.delete("alpha") and not client.delete("alpha")
        assert client.match("beta").value == b"\x00\xff" and client.match("nope") is None
        with pytest.raises(MemcacheError) as info:
            client.set("k", b"x" * 32)
        assert info.value.status == 3
        with pytest.raises(MemcacheError):
            client.get(b"x" * 36)
    stats = running.call(running.appliance.frontend_stats)["udp"]
    assert set(DATAGRAM_COUNTERS) <= set(stats) and stats["internal_errors"] == 0
    assert stats["served"] == stats["rx_datagrams"] and stats["errors"] == 2
    # get_multi of 152 keys needed more than one request datagram
    assert stats["requests_binary"] > stats["rx_datagrams"]


def test_server_follows_appliance_reload(running: Running) -> None:
    with MemcacheUDPClient(port=running.server.port, timeout=2) as client:
        client.set("kept", "v")
        old = running.appliance.engine
        assert running.call(running.appliance.reload) == 1
        assert running.appliance.engine is not old
        assert client.get("kept") == b"v"


def test_close_unregisters(running: Running) -> None:
    assert "udp" in running.call(running.appliance.frontend_stats)
    asyncio.run_coroutine_threadsafe(running.server.close(), running.loop).result(10)
    assert "udp" not in running.call(running.appliance.frontend_stats)


# -- client timeouts and retries -----------------------------------------------------------
def test_timeout_without_a_server() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))  # a port that never answers
    with MemcacheUDPClient(port=sock.getsockname()[1], timeout=0.05, retries=2) as client:
        with pytest.raises(MemcacheTimeout):
            client.noop()
        assert client.timeouts == 3
    assert len([sock.recv(100) for _ in range(3)]) == 3  # one send per attempt
    sock.close()


def test_retry_and_stale_replies() -> None:
    """A server that loses the first datagram and sends junk first still gets an answer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    engine = KVEngine("model", rows=16)
    engine.set(b"k", b"v")
    seen: list[bytes] = []

    def lossy() -> None:
        first, _ = sock.recvfrom(2048)  # lost
        second, addr = sock.recvfrom(2048)
        seen.extend([first, second])
        stale = struct.pack(">HHHH", (struct.unpack(">H", second[:2])[0] + 1) & 0xFFFF, 0, 1, 0)
        sock.sendto(stale + rsp(0, extras=FLAGS0, value=b"wrong"), addr)
        for reply in handle_datagram(engine, second):
            sock.sendto(reply, addr)

    thread = threading.Thread(target=lossy)
    thread.start()
    with MemcacheUDPClient(port=sock.getsockname()[1], timeout=0.3, retries=1) as client:
        assert client.get("k") == b"v"
        assert client.timeouts == 1
    thread.join(5)
    assert seen[0] == seen[1]  # the retry is the same datagram, same request id
    sock.close()
    engine.close()
