"""Every front-end writes through the host tier (issue 15 item 6): the Tier's awaitable API,
the memcached UDP server and the admin REST API, each against a real redis-server on loopback.

For each: a write through it is visible to a plain redis-py client on Redis; a key written
straight into Redis is read through it (and filled into the engine); a key changed in Redis
after it was filled is read anew (invalidation); with Redis down the request fails clearly and
nothing is acknowledged. Keys and values longer than the engine holds, up to memcached's and
REST's own limits, are written to and served from Redis alone, readable by every client; beyond
those limits they are refused and nothing is stored.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any, Callable

import pytest

from resp_helpers import HAVE_REDIS, PynqServer, RedisServer

pytestmark = pytest.mark.skipif(not HAVE_REDIS, reason="needs Debian's redis-server")

WAIT = 5.0


def eventually(check: Callable[[], Any], timeout: float = WAIT) -> Any:
    """check() until it is truthy (fills and invalidations arrive a round trip later)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.01)


@pytest.fixture(scope="module")
def redis_server():
    server = RedisServer()
    yield server
    server.stop()


@pytest.fixture
def tiered(redis_server):
    import redis

    direct = redis.Redis(port=redis_server.port)
    direct.flushall()
    srv = PynqServer(redis=redis_server)
    yield srv, direct
    srv.stop()
    direct.close()


def engine_get(srv: PynqServer, key: bytes) -> Any:
    return srv.on_loop(lambda: srv.appliance.engine.get(key))


# -- the Tier's awaitable API -------------------------------------------------------------------

def test_tier_set_many_writes_redis_then_fills_the_engine(tiered):
    srv, direct = tiered
    srv.run(srv.tier.set_many([(b"k1", b"v1"), (b"k2", b"v2")]))
    assert direct.mget("k1", "k2") == [b"v1", b"v2"]
    assert eventually(lambda: engine_get(srv, b"k1") == b"v1" and engine_get(srv, b"k2") == b"v2")
    long_key, long_value = b"x" * 100, b"y" * 100  # more than the engine holds: Redis only
    srv.run(srv.tier.set_many([(long_key, b"v"), (b"k3", long_value)]))
    assert direct.get(long_key) == b"v" and direct.get("k3") == long_value
    assert srv.run(srv.tier.get_many([long_key, b"k3"])) == [b"v", long_value]
    assert engine_get(srv, b"k3") is None


def test_tier_get_many_reads_redis_fills_and_follows_changes(tiered):
    srv, direct = tiered
    direct.set("r1", "from-redis")
    assert srv.run(srv.tier.get_many([b"r1", b"nope"])) == [b"from-redis", None]
    assert eventually(lambda: engine_get(srv, b"r1") == b"from-redis")
    direct.set("r1", "changed")  # behind pynq-kv's back: the invalidation takes it out
    assert eventually(lambda: srv.run(srv.tier.get_many([b"r1"])) == [b"changed"])
    direct.rpush("alist", "x")  # another type reads as missing
    assert srv.run(srv.tier.get_many([b"alist"])) == [None]


def test_tier_delete_and_put_many_report_what_redis_held(tiered):
    srv, direct = tiered
    direct.set("d1", "x")
    assert srv.run(srv.tier.put_many([(b"d1", b"y"), (b"d2", b"z")])) == [False, True]
    assert eventually(lambda: engine_get(srv, b"d2") == b"z")
    assert srv.run(srv.tier.delete_many([b"d1", b"d2", b"d3"])) == 2
    assert direct.exists("d1", "d2") == 0
    assert engine_get(srv, b"d2") is None


def test_tier_refusals_and_redis_down(tiered):
    from pynq_kv.tier import RedisRefused

    srv, direct = tiered
    direct.config_set("maxmemory", "1")  # every write refused with OOM
    try:
        with pytest.raises(RedisRefused, match="OOM"):
            srv.run(srv.tier.set_many([(b"m", b"1")]))
    finally:
        direct.config_set("maxmemory", "0")
    assert direct.get("m") is None and engine_get(srv, b"m") is None


@pytest.fixture
def doomed():
    """A pynq-kv tier whose redis-server the test stops."""
    server = RedisServer()
    srv = PynqServer(redis=server)
    yield srv, server
    srv.stop()
    server.stop()


def test_tier_with_redis_down_raises(doomed):
    from pynq_kv.tier import HostTierUnavailable

    srv, server = doomed
    srv.run(srv.tier.set_many([(b"a", b"1")]))
    server.proc.kill()
    server.proc.wait()
    assert eventually(lambda: not srv.tier.up)
    for call in (srv.tier.set_many([(b"a", b"2")]), srv.tier.get_many([b"a"]),
                 srv.tier.delete_many([b"a"])):
        with pytest.raises(HostTierUnavailable, match="Redis cannot be reached"):
            srv.run(call)
    assert engine_get(srv, b"a") is None  # the engine was emptied when Redis went away


def test_tier_write_in_flight_when_redis_dies_is_not_acknowledged(doomed):
    import asyncio

    import redis

    from pynq_kv.tier import HostTierUnavailable

    srv, server = doomed
    pauser = redis.Redis(port=server.port)
    pauser.execute_command("CLIENT", "PAUSE", "5000", "WRITE")  # the SET waits in Redis
    pending = asyncio.run_coroutine_threadsafe(srv.tier.set_many([(b"w", b"1")]), srv.loop)
    time.sleep(0.2)
    assert not pending.done()
    server.proc.kill()
    server.proc.wait()
    with pytest.raises(HostTierUnavailable, match="connection lost"):
        pending.result(WAIT)
    assert engine_get(srv, b"w") is None
    pauser.close()


# -- the memcached UDP server -------------------------------------------------------------------

MC_HDR = struct.pack(">HHHH", 7, 0, 1, 0)


def mc_req(opcode: int, key: bytes = b"", extras: bytes = b"", value: bytes = b"",
           opaque: int = 0) -> bytes:
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body),
                       opaque, 0) + body


SETX = struct.pack(">II", 0, 0)
# A session of binary and text datagrams: sets, gets (hits, misses, multi), deletes, errors.
SESSION = [
    mc_req(0x01, b"a", SETX, b"one", 1) + mc_req(0x00, b"a", opaque=2) + mc_req(0x0C, b"a", opaque=3),
    mc_req(0x00, b"missing", opaque=4) + mc_req(0x0C, b"missing", opaque=5),
    mc_req(0x09, b"a") + mc_req(0x0D, b"b") + mc_req(0x0A),  # GETQ hit, GETKQ miss, NOOP
    mc_req(0x11, b"a", SETX, b"quiet") + mc_req(0x00, b"a"),  # SETQ then GET
    mc_req(0x04, b"a", opaque=6) + mc_req(0x04, b"a", opaque=7) + mc_req(0x00, b"a", opaque=8),
    # keys longer than memcached's 250 bytes: refused alike (with a tier, memcached's limits)
    mc_req(0x01, b"k" * 251, SETX, b"v") + mc_req(0x00, b"k" * 251, opaque=9),
    mc_req(0x01, b"b", struct.pack(">II", 1, 0), b"v"),  # flags: refused
    mc_req(0x0B) + mc_req(0x0A),  # VERSION, NOOP
    b"set t 0 0 3\r\nabc\r\nget t nope t\r\n",
    b"set u 0 0 2 noreply\r\nxy\r\nget u\r\ndelete u\r\ndelete u\r\nget u\r\n",
    b"set v 1 0 1\r\nx\r\nset w 0 0 3\r\nxyz\r\nget " + b"k" * 251 + b"\r\ndelete " + b"k" * 251
    + b"\r\n",
]


def test_memcached_replies_are_the_same_bytes_with_a_tier(tiered):
    from pynq_kv import KVEngine
    from pynq_kv.rules import Rule
    from pynq_kv.serve.memcached.server import handle_datagram, handle_datagram_tiered

    srv, direct = tiered
    geometry = srv.appliance.engine.geometry
    with KVEngine("model", geometry) as alone:
        for datagram in SESSION:
            expected = handle_datagram(alone, MC_HDR + datagram)
            assert srv.run(handle_datagram_tiered(srv.tier, MC_HDR + datagram)) == expected, datagram
        # MATCH: the same rule in both; a key only Redis holds is an exact hit, as in the engine
        prefix = b"user:"
        match = int.from_bytes(b"\x00" + prefix + bytes(30), "big")
        mask = int.from_bytes(b"\x00" + b"\xff" * 5 + bytes(30), "big")
        for engine in (alone, srv.appliance.engine):
            srv.on_loop(lambda engine=engine: engine.add_rule(Rule.ternary(match, mask, 5, b"users")))
        alone.set(b"user:9", b"redis")
        direct.set("user:9", "redis")
        datagram = b"".join(mc_req(0xC0, key, opaque=i)
                            for i, key in enumerate((b"user:9", b"user:77", b"other", b"t")))
        expected = handle_datagram(alone, MC_HDR + datagram)
        assert srv.run(handle_datagram_tiered(srv.tier, MC_HDR + datagram)) == expected
        assert b"redis" in expected[0] and b"users" in expected[0]
    assert direct.get("t") == b"abc" and direct.get("a") is None and direct.get("u") is None


@pytest.fixture
def udp(tiered):
    """The memcached UDP server on the tiered appliance's loop, and a socket to talk to it."""
    from pynq_kv.serve.memcached.server import start_udp_server

    srv, direct = tiered
    server = srv.run(start_udp_server(srv.appliance, "127.0.0.1", 0))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(WAIT)

    def ask(body: bytes) -> bytes:
        sock.sendto(MC_HDR + body, ("127.0.0.1", server.port))
        reply = sock.recv(2048)
        assert reply[:8] == MC_HDR
        return reply[8:]

    yield srv, direct, ask, server.port
    sock.close()
    srv.run(server.close())


def test_memcached_writes_and_reads_through_redis(udp):
    srv, direct, ask, _ = udp
    assert ask(b"set m1 0 0 5\r\nhello\r\n") == b"STORED\r\n"
    assert direct.get("m1") == b"hello"  # in Redis when STORED came back
    assert eventually(lambda: engine_get(srv, b"m1") == b"hello")
    direct.set("m2", "from-redis")
    assert ask(b"get m2\r\n") == b"VALUE m2 0 10\r\nfrom-redis\r\nEND\r\n"
    assert eventually(lambda: engine_get(srv, b"m2") == b"from-redis")
    direct.set("m2", "changed")  # after the fill: the invalidation takes it out of the engine
    assert eventually(lambda: ask(b"get m2\r\n") == b"VALUE m2 0 7\r\nchanged\r\nEND\r\n")
    assert ask(b"delete m1\r\n") == b"DELETED\r\n" and direct.exists("m1") == 0
    assert ask(b"delete m1\r\n") == b"NOT_FOUND\r\n"
    direct.set("big", "x" * ((1 << 20) + 1))  # longer than memcached's items (1 MiB)
    assert ask(b"get big\r\n") == b"SERVER_ERROR object too large for cache\r\nEND\r\n"
    direct.set("m3", "bin")
    reply = ask(mc_req(0x00, b"m3", opaque=9))
    assert reply[6:8] == b"\x00\x00" and reply.endswith(b"bin")


def test_memcached_datagrams_waiting_for_redis_are_bounded(udp, monkeypatch):
    from pynq_kv.serve.memcached import server as memcached

    srv, direct, _, port = udp
    monkeypatch.setattr(memcached, "TIER_MAX_PENDING", 2)
    stats = srv.appliance.frontend_stats
    direct.execute_command("CLIENT", "PAUSE", "10000", "WRITE")  # SETs wait in Redis
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(WAIT)
            for i in range(4):
                sock.sendto(MC_HDR + b"set p%d 0 0 1\r\nx\r\n" % i, ("127.0.0.1", port))
            assert eventually(lambda: srv.on_loop(stats)["udp"]["drop_tier_busy"] == 2)
            direct.execute_command("CLIENT", "UNPAUSE")
            assert [sock.recv(2048) for _ in range(2)] == [MC_HDR + b"STORED\r\n"] * 2
    finally:
        direct.execute_command("CLIENT", "UNPAUSE")
    assert direct.exists("p0", "p1", "p2", "p3") == 2


def test_memcached_with_redis_down_acknowledges_nothing(doomed):
    from pynq_kv.serve.memcached.server import handle_datagram_tiered

    srv, server = doomed
    server.proc.kill()
    server.proc.wait()
    assert eventually(lambda: not srv.tier.up)
    reply = srv.run(handle_datagram_tiered(srv.tier, MC_HDR + b"set a 0 0 1\r\nx\r\nget a\r\n"))
    assert reply == [MC_HDR + b"SERVER_ERROR host tier unavailable: Redis cannot be reached\r\n"
                     b"SERVER_ERROR host tier unavailable: Redis cannot be reached\r\nEND\r\n"]
    reply = srv.run(handle_datagram_tiered(srv.tier, MC_HDR + mc_req(0x01, b"a", SETX, b"x", 5)))
    status, opaque = struct.unpack(">H", reply[0][14:16])[0], reply[0][20:24]
    assert status == 0x0086 and opaque == b"\x00\x00\x00\x05"
    assert engine_get(srv, b"a") is None


# -- memcached: keys and values longer than the engine holds live in Redis only ------------------

KEY200 = b"long:" + b"k" * 195  # memcached allows 250 bytes; this engine's keys hold 35
KEY250 = b"K" * 250
KEY251 = b"K" * 251
LONG_VALUE = bytes(range(256)) * 20  # 5,120 bytes: the engine holds 31, a reply datagram 1,392
MIB = 1 << 20


def mc_rsp(opcode: int, status: int = 0, extras: bytes = b"", value: bytes = b"",
           opaque: int = 0) -> bytes:
    body = extras + value
    return struct.pack(">BBHBBHIIQ", 0x81, opcode, 0, len(extras), 0, status, len(body),
                       opaque, 0) + body


def joined(datagrams: list[bytes]) -> bytes:
    """The reply bodies in order, each train of numbered datagrams (request id, i, n, 0)
    checked and joined."""
    out = b""
    train: list[bytes] = []
    for datagram in datagrams:
        request_id, sequence, total, reserved = struct.unpack(">HHHH", datagram[:8])
        assert len(datagram) <= 1400 and request_id == 7 and reserved == 0
        if total == 1:
            assert sequence == 0 and not train
            out += datagram[8:]
            continue
        assert sequence == len(train)
        train.append(datagram[8:])
        if len(train) == total:
            out += b"".join(train)
            train = []
    assert not train
    return out


def mc_text(port: int, body: bytes, end: bytes) -> bytes:
    """A text request datagram's whole reply (trains joined), read until it ends with end."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.settimeout(WAIT)
        sock.sendto(MC_HDR + body, ("127.0.0.1", port))
        datagrams = [sock.recv(2048)]
        while True:
            total = struct.unpack(">H", datagrams[-1][4:6])[0]
            done = total == 1 or struct.unpack(">H", datagrams[-1][2:4])[0] == total - 1
            if done and joined(datagrams).endswith(end):
                return joined(datagrams)
            datagrams.append(sock.recv(2048))


def text_set(key: bytes, value: bytes) -> bytes:
    return b"set %s 0 0 %d\r\n%s\r\n" % (key, len(value), value)


def settled(srv: PynqServer, port: int) -> dict:
    """The engine's entries once every fill asked for so far is settled: a short SET through
    memcached after them, whose own fill comes after theirs (fills are applied in order)."""
    assert mc_text(port, text_set(b"sentinel", b"s"), b"\r\n") == b"STORED\r\n"
    assert eventually(lambda: engine_get(srv, b"sentinel") == b"s")
    return srv.items()


def test_memcached_long_keys_and_values_live_in_redis_only(udp):
    import redis

    from pynq_kv.net import MemcacheUDPClient

    srv, direct, _, port = udp
    resp = redis.Redis(port=srv.port)
    assert mc_text(port, text_set(KEY200, b"hi"), b"\r\n") == b"STORED\r\n"
    assert mc_text(port, text_set(b"lv", LONG_VALUE), b"\r\n") == b"STORED\r\n"
    with MemcacheUDPClient("127.0.0.1", port, timeout=WAIT) as client:
        client.set(KEY250, LONG_VALUE + b"!")  # binary: both longer than the engine holds
        for key, value in ((KEY200, b"hi"), (b"lv", LONG_VALUE), (KEY250, LONG_VALUE + b"!")):
            assert direct.get(key) == value  # in Redis itself
            assert resp.get(key) == value  # through pynq-kv's RESP front-end
            assert client.get(key) == value  # back through memcached (a train of datagrams)
        assert client.get_multi([KEY200, b"lv", b"nope"]) == {KEY200: b"hi", b"lv": LONG_VALUE}
        direct.set(KEY200 + b"x", "rule-less")
        match = client.match(KEY200 + b"x")  # a long key matches no rule: Redis' exact hit
        assert match is not None and (match.kind, match.value) == ("exact", b"rule-less")
        assert client.match(KEY200 + b"y") is None
    got = mc_text(port, b"get %s lv %s\r\n" % (KEY200, KEY250), b"END\r\n")
    assert got == (b"VALUE %s 0 2\r\nhi\r\n" % KEY200
                   + b"VALUE lv 0 %d\r\n%s\r\n" % (len(LONG_VALUE), LONG_VALUE)
                   + b"VALUE %s 0 %d\r\n%s!\r\nEND\r\n" % (KEY250, len(LONG_VALUE) + 1,
                                                             LONG_VALUE))
    items = settled(srv, port)  # after every read above asked Redis: nothing long was filled
    assert b"lv" not in items and all(len(key) <= 35 for key in items)
    assert items[b"sentinel"] == b"s"
    assert mc_text(port, b"delete %s\r\n" % KEY200, b"\r\n") == b"DELETED\r\n"
    assert direct.exists(KEY200) == 0 and resp.get(KEY200) is None
    resp.close()


def test_memcached_long_and_short_values_of_one_key_stay_coherent(udp):
    import redis

    srv, direct, _, port = udp
    resp = redis.Redis(port=srv.port)
    values = (b"short", LONG_VALUE, b"tiny", LONG_VALUE + b"!", b"end", LONG_VALUE + b"?")
    for i, value in enumerate(values):
        if i % 4 in (2, 3):  # memcached writes two, RESP two, ...: long after short and back
            assert resp.set("flip", value) is True
        else:
            assert mc_text(port, text_set(b"flip", value), b"\r\n") == b"STORED\r\n"
        unit = b"VALUE flip 0 %d\r\n%s\r\nEND\r\n" % (len(value), value)
        assert mc_text(port, b"get flip\r\n", b"END\r\n") == unit  # never the older value
        assert resp.get("flip") == value and direct.get("flip") == value
        if len(value) <= 31:  # fits: filled again
            assert eventually(lambda value=value: engine_get(srv, b"flip") == value)
        else:
            assert settled(srv, port).get(b"flip") is None
    resp.close()


def test_memcached_beyond_its_limits_is_refused_and_stores_nothing(udp):
    from pynq_kv import KVEngine
    from pynq_kv.net import MemcacheUDPClient
    from pynq_kv.net.client import MemcacheError
    from pynq_kv.serve.memcached.server import handle_datagram, handle_datagram_tiered

    srv, direct, _, port = udp
    bad = b"CLIENT_ERROR bad command line format\r\n"
    assert mc_text(port, text_set(KEY251, b"x"), b"\r\n") == bad
    assert mc_text(port, b"get %s\r\n" % KEY251, b"\r\n") == bad
    assert mc_text(port, b"delete %s\r\n" % KEY251, b"\r\n") == bad
    with MemcacheUDPClient("127.0.0.1", port, timeout=WAIT) as client:
        for call in (lambda: client.set(KEY251, b"x"), lambda: client.get(KEY251)):
            with pytest.raises(MemcacheError) as refused:
                call()
            assert refused.value.status == 0x0004
    # A value over 1 MiB cannot travel in one request datagram; the check is still the handler's.
    huge = MC_HDR + mc_req(0x01, b"huge", SETX, b"h" * (MIB + 1), opaque=3)
    assert srv.run(handle_datagram_tiered(srv.tier, huge)) == [
        MC_HDR + mc_rsp(0x01, 0x0003, value=b"Too large.", opaque=3)]
    assert direct.exists(KEY251, "huge") == 0
    direct.set("huge", b"h" * (MIB + 1))  # written by a Redis client: too large to show
    reply = srv.run(handle_datagram_tiered(srv.tier, MC_HDR + mc_req(0x00, b"huge", opaque=4)))
    assert reply == [MC_HDR + mc_rsp(0x00, 0x0003, value=b"Too large.", opaque=4)]
    # exactly 1 MiB is a memcached item: stored, and read back as a train of datagrams
    whole = (MC_HDR + mc_req(0x01, b"mib", SETX, b"m" * MIB, opaque=5)
             + mc_req(0x00, b"mib", opaque=6))
    reply = srv.run(handle_datagram_tiered(srv.tier, whole))
    assert joined(reply) == (mc_rsp(0x01, opaque=5)
                             + mc_rsp(0x00, extras=bytes(4), value=b"m" * MIB, opaque=6))
    assert direct.strlen("mib") == MIB
    # without a host tier the engine's widths are the limits, as before
    with KVEngine("model", srv.appliance.engine.geometry) as alone:
        assert handle_datagram(alone, MC_HDR + mc_req(0x01, KEY200, SETX, b"v", opaque=1)) == [
            MC_HDR + mc_rsp(0x01, 0x0004, value=b"Invalid arguments", opaque=1)]
        assert handle_datagram(alone, MC_HDR + text_set(b"lv", LONG_VALUE)) == [
            MC_HDR + b"SERVER_ERROR object too large for cache\r\n"]
        assert len(alone) == 0


def test_memcached_long_replies_are_trains_within_the_budget(tiered):
    from pynq_kv.serve.memcached.server import handle_datagram_tiered

    srv, direct = tiered
    direct.set("lv", LONG_VALUE)
    request = MC_HDR + mc_req(0x00, b"lv", opaque=1) + mc_req(0x0A, opaque=2)
    reply = srv.run(handle_datagram_tiered(srv.tier, request))
    response = mc_rsp(0x00, extras=bytes(4), value=LONG_VALUE, opaque=1)  # 5,148 bytes
    count = -(-len(response) // 1392)
    assert [struct.unpack(">HHHH", d[:8]) for d in reply] == [
        (7, i, count, 0) for i in range(count)] + [(7, 0, 1, 0)]
    assert b"".join(d[8:] for d in reply[:count]) == response
    assert reply[count] == MC_HDR + mc_rsp(0x0A, opaque=2)  # the next response opens its own
    # from a source allowed at M = 2 the long first response is held to the budget
    reply = srv.run(handle_datagram_tiered(srv.tier, request, budget=2))
    assert reply == [MC_HDR + mc_rsp(0x00, 0x0085, value=b"Use TCP", opaque=1)]


# -- the admin REST API -------------------------------------------------------------------------

@pytest.fixture
def rest(tiered):
    """The admin app over the tiered appliance, called on its loop (httpx, no socket)."""
    import httpx

    from pynq_kv_api.main import create_app

    srv, direct = tiered
    app = create_app(srv.appliance)

    def call(method: str, url: str, **kwargs: Any) -> Any:
        async def go() -> Any:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
                return await client.request(method, url, **kwargs)
        return srv.run(go())

    yield srv, direct, call
    srv.appliance.unregister_frontend("admin")


def test_rest_writes_and_reads_through_redis(rest):
    srv, direct, call = rest
    r = call("PUT", "/v1/entries/user:1", json={"value": "alice"})
    assert r.status_code == 201 and r.json()["created"] is True
    assert direct.get("user:1") == b"alice"
    assert call("PUT", "/v1/entries/user:1", json={"value": "alicia"}).status_code == 200
    assert direct.get("user:1") == b"alicia"
    assert eventually(lambda: engine_get(srv, b"user:1") == b"alicia")
    direct.set(b"\x00\xff", "raw")  # any bytes: the Redis key is the key's bytes
    r = call("GET", "/v1/entries/00ff?encoding=hex")
    assert r.status_code == 200 and r.json()["value"] == "raw"
    assert eventually(lambda: engine_get(srv, b"\x00\xff") == b"raw")
    direct.set(b"\x00\xff", "changed")
    assert eventually(lambda: call("GET", "/v1/entries/00ff?encoding=hex").json()["value"] == "changed")
    direct.set("only-redis", "v")
    r = call("GET", "/v1/lookup/only-redis")
    assert r.json()["kind"] == "exact" and r.json()["value"] == "v"
    assert call("DELETE", "/v1/entries/user:1").status_code == 204
    assert direct.exists("user:1") == 0 and engine_get(srv, b"user:1") is None
    assert call("DELETE", "/v1/entries/user:1").status_code == 404
    assert call("GET", "/v1/entries/user:1").status_code == 404
    r = call("PUT", "/v1/entries/5?encoding=int", json={"value": "x"})
    assert r.status_code == 422 and "Redis string keys" in r.text


def test_rest_integer_values_are_redis_decimals(redis_server):
    import httpx
    import redis

    from pynq_kv_api.main import create_app

    direct = redis.Redis(port=redis_server.port)
    direct.flushall()
    srv = PynqServer(redis=redis_server, value_kind="int")
    try:
        app = create_app(srv.appliance)

        async def go() -> list[Any]:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
                return [await client.put("/v1/entries/n", json={"value": 42}),
                        await client.put("/v1/entries/s", json={"value": "text"}),
                        await client.get("/v1/entries/n")]

        put, refused, got = srv.run(go())
        assert put.status_code == 201 and direct.get("n") == b"42"
        assert refused.status_code == 422 and direct.get("s") is None
        assert got.json()["value"] == 42
        assert eventually(lambda: engine_get(srv, b"n") == 42)
    finally:
        srv.stop()
        direct.close()


def test_rest_import_writes_through(rest):
    srv, direct, call = rest
    direct.set("i0", "old")
    body = "".join(f'{{"key": "i{i}", "value": "v{i}"}}\n' for i in range(300))
    r = call("POST", "/v1/entries?chunk_size=100", content=body,
             headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 202
    job = eventually(lambda: (lambda j: j if j["state"] != "running" else None)(
        call("GET", r.headers["location"]).json()))
    assert job["state"] == "done" and job["inserted"] == 299 and job["updated"] == 1
    assert direct.mget([f"i{i}" for i in range(300)]) == [f"v{i}".encode() for i in range(300)]
    r = call("POST", "/v1/entries?int_keys=true", content='{"key": 7, "value": "x"}\n',
             headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 422 and "byte strings" in r.text


def test_rest_with_redis_down_acknowledges_nothing(doomed):
    import httpx

    from pynq_kv_api.main import create_app

    srv, server = doomed
    app = create_app(srv.appliance)
    server.proc.kill()
    server.proc.wait()
    assert eventually(lambda: not srv.tier.up)

    async def go() -> list[Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
            return [await client.put("/v1/entries/k", json={"value": "v"}),
                    await client.get("/v1/entries/k"), await client.delete("/v1/entries/k")]

    for r in srv.run(go()):
        assert r.status_code == 503 and "Redis cannot be reached" in r.json()["detail"]
    assert engine_get(srv, b"k") is None


# -- REST: keys and values longer than the engine holds live in Redis only ----------------------

def asgi_calls(srv: PynqServer, app: Any, requests: list[tuple[str, str, dict]]) -> list[Any]:
    """The app's answers to requests (method, url, httpx keywords), in order, on srv's loop."""
    import httpx

    async def go() -> list[Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://admin") as client:
            return [await client.request(method, url, **kwargs) for method, url, kwargs in requests]

    return srv.run(go())


def rest_settled(srv: PynqServer, call: Callable[..., Any]) -> dict:
    """The engine's entries once every fill asked for so far is settled (a short PUT after them
    is filled after theirs)."""
    assert call("PUT", "/v1/entries/sentinel", json={"value": "s"}).status_code in (200, 201)
    assert eventually(lambda: engine_get(srv, b"sentinel") == b"s")
    return srv.items()


def test_rest_long_keys_and_values_live_in_redis_only(rest):
    import redis

    srv, direct, call = rest
    resp = redis.Redis(port=srv.port)
    text_key, text_value = "user/" + "u" * 295, "v" * 20_000  # the engine: 35 and 31 bytes
    raw_key, raw_value = bytes(range(256)) * 2, bytes(range(255, -1, -1)) * 80
    r = call("PUT", f"/v1/entries/{text_key}", json={"value": text_value})
    assert r.status_code == 201 and r.json()["key"] == text_key
    r = call("PUT", f"/v1/entries/{raw_key.hex()}?encoding=hex",
             json={"value": {"hex": raw_value.hex()}})
    assert r.status_code == 201
    assert call("PUT", "/v1/entries/short-key", json={"value": text_value}).status_code == 201
    for key, value in ((text_key.encode(), text_value.encode()), (raw_key, raw_value),
                       (b"short-key", text_value.encode())):
        assert direct.get(key) == value  # in Redis itself
        assert resp.get(key) == value  # through pynq-kv's RESP front-end
    assert call("GET", f"/v1/entries/{text_key}").json()["value"] == text_value
    assert call("GET", f"/v1/entries/{raw_key.hex()}?encoding=hex").json()["value"] == {
        "hex": raw_value.hex()}
    assert call("GET", "/v1/entries/short-key").json()["value"] == text_value
    r = call("GET", f"/v1/lookup/{text_key}")  # explains the engine's answer: its key width
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "key"]
    items = rest_settled(srv, call)  # nothing long was filled, by the PUTs or the GETs
    assert b"short-key" not in items and all(len(key) <= 35 for key in items)
    # listing and export show the engine's table: the Redis-only entries are not in it
    listed = call("GET", "/v1/entries").json()["entries"]
    assert [e["key"] for e in listed] == ["sentinel"]
    assert call("GET", "/v1/entries?format=ndjson").text == '{"key": "sentinel", "value": "s"}\n'
    assert call("DELETE", f"/v1/entries/{text_key}").status_code == 204
    assert direct.exists(text_key) == 0 and resp.get(text_key) is None
    assert call("GET", f"/v1/entries/{text_key}").status_code == 404
    resp.close()


def test_rest_long_and_short_values_of_one_key_stay_coherent(rest):
    import redis

    srv, direct, call = rest
    resp = redis.Redis(port=srv.port)
    for i, value in enumerate(("short", "L" * 3000, "tiny", "M" * 3000, "end", "N" * 3000)):
        if i % 4 in (2, 3):  # REST writes two, RESP two, ...: long after short and back
            assert resp.set("flip", value) is True
        else:
            assert call("PUT", "/v1/entries/flip", json={"value": value}).status_code in (200, 201)
        assert call("GET", "/v1/entries/flip").json()["value"] == value  # never the older one
        assert resp.get("flip") == value.encode() and direct.get("flip") == value.encode()
        if len(value) <= 31:
            assert eventually(lambda value=value: engine_get(srv, b"flip") == value.encode())
        else:
            assert rest_settled(srv, call).get(b"flip") is None
    resp.close()


def test_rest_import_of_long_records_writes_redis_only_for_them(rest):
    srv, direct, call = rest
    records = {f"k{i}": f"v{i}" for i in range(50)}
    records.update({"K" * (300 + i): "w" * (2000 + i) for i in range(20)})
    records["short-key"] = "x" * 40
    body = "".join(f'{{"key": "{k}", "value": "{v}"}}\n' for k, v in records.items())
    r = call("POST", "/v1/entries?chunk_size=16", content=body,
             headers={"content-type": "application/x-ndjson"})
    assert r.status_code == 202
    job = eventually(lambda: (lambda j: j if j["state"] != "running" else None)(
        call("GET", r.headers["location"]).json()))
    assert job["state"] == "done" and job["inserted"] == len(records) == 71
    keys = list(records)
    assert direct.mget(keys) == [records[k].encode() for k in keys]
    items = rest_settled(srv, call)
    assert {k.decode() for k in items} == {f"k{i}" for i in range(50)} | {"sentinel"}


def test_rest_beyond_its_limits_is_refused_and_stores_nothing(rest):
    from pynq_kv import KVEngine
    from pynq_kv.appliance import Appliance
    from pynq_kv_api.main import create_app

    srv, direct, call = rest
    r = call("PUT", "/v1/entries/big", json={"value": "b" * (1 << 20)})  # over the 1 MiB body
    assert r.status_code == 413 and direct.exists("big") == 0
    small = create_app(srv.appliance, max_import_bytes=10_000)
    body = '{"key": "%s", "value": "x"}\n' % ("K" * 10_000)
    try:
        [r] = asgi_calls(srv, small, [("POST", "/v1/entries", {
            "content": body, "headers": {"content-type": "application/x-ndjson"}})])
    finally:
        srv.appliance.unregister_frontend("admin")
    assert r.status_code == 413 and direct.dbsize() == 0
    # without a host tier the engine's widths are the limits, as before
    alone = Appliance(lambda: KVEngine("model", srv.appliance.engine.geometry))
    try:
        answers = asgi_calls(srv, create_app(alone), [
            ("PUT", "/v1/entries/" + "k" * 36, {"json": {"value": "v"}}),
            ("PUT", "/v1/entries/k", {"json": {"value": "v" * 32}}),
            ("POST", "/v1/entries", {"content": '{"key": "k", "value": "%s"}\n' % ("v" * 32),
                                     "headers": {"content-type": "application/x-ndjson"}})])
        assert [r.status_code for r in answers] == [422, 422, 422]
        assert [r.json()["detail"][0]["loc"] for r in answers] == [
            ["path", "key"], ["body", "value"], ["body", 1, "value"]]
        assert len(alone.engine) == 0
    finally:
        alone.close()


# -- end to end: pynq-kv serve --store private -------------------------------------------------

def test_serve_with_a_private_redis_writes_every_front_end_through(tmp_path):
    """The runner's wiring: memcached and the admin API of a serve write into its redis-server,
    and what a Redis client wrote there is served by both."""
    import asyncio
    import json
    import urllib.request

    from pynq_kv.serve.config import ServeConfig
    from pynq_kv.serve.runner import start

    config = ServeConfig(backend="model", store="private", data_dir=tmp_path / "data",
                         resp_port=0, udp_port=0, admin_port=0,
                         geometry={"rows": 256, "rules": 16})

    def clients(udp: tuple[str, int], admin: tuple[str, int], redis: Any) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(WAIT)
            sock.sendto(MC_HDR + b"set from-udp 0 0 3\r\nabc\r\n", udp)
            assert sock.recv(2048) == MC_HDR + b"STORED\r\n"
            redis.set("from-redis", "xyz")
            sock.sendto(MC_HDR + b"get from-redis\r\n", udp)
            assert sock.recv(2048) == MC_HDR + b"VALUE from-redis 0 3\r\nxyz\r\nEND\r\n"
        base = f"http://{admin[0]}:{admin[1]}/v1/entries/"
        put = urllib.request.Request(base + "from-rest", method="PUT",
                                     data=json.dumps({"value": "rest"}).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(put, timeout=WAIT) as reply:
            assert reply.status == 201
        with urllib.request.urlopen(base + "from-udp", timeout=WAIT) as reply:
            assert json.load(reply)["value"] == "abc"
        assert redis.mget("from-udp", "from-rest") == [b"abc", b"rest"]

    async def scenario() -> None:
        running = await start(config)
        try:
            assert running.appliance.host_tier is not None
            redis = running.appliance.host_tier.client()
            try:
                await asyncio.to_thread(clients, running.addresses["udp"],
                                        running.addresses["admin"], redis)
            finally:
                redis.close()
        finally:
            await running.close()

    asyncio.run(asyncio.wait_for(scenario(), 30))
