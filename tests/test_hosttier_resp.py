"""pynq-kv with a Redis behind the engine, against a plain redis-server: the same replies.

Every scenario runs twice with redis-py — once against pynq-kv's RESP server whose host tier is
one redis-server, once against another redis-server directly — and the results must be equal.
Raw-byte tests compare the exact reply bytes. Coherence tests change keys behind pynq-kv's back
(a second client on the backing Redis) and check that the engine never answers an old value.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator

import pytest
import redis

from pynq_kv import redislink
from resp_helpers import HAVE_REDIS, HOST, PynqServer, RawClient, RedisServer, encode_command

pytestmark = pytest.mark.skipif(not HAVE_REDIS, reason="needs Debian's redis-server")

Scenario = Callable[[redis.Redis], list]


@pytest.fixture(scope="module")
def servers() -> Any:
    behind = RedisServer()
    reference = RedisServer()
    pynq = PynqServer(redis=behind)
    try:
        yield pynq, behind, reference
    finally:
        pynq.stop()
        behind.stop()
        reference.stop()


@pytest.fixture
def clients(servers: Any) -> Any:
    pynq, behind, reference = servers
    made: list[redis.Redis] = []

    def make(port: int, **kw: Any) -> redis.Redis:
        client = redis.Redis(host=HOST, port=port, socket_timeout=5, **kw)
        made.append(client)
        return client

    redis.Redis(host=HOST, port=behind.port).flushall()
    redis.Redis(host=HOST, port=reference.port).flushall()
    yield make
    for client in made:
        client.close()


def both(servers: Any, clients: Any, scenario: Scenario, **kw: Any) -> tuple[list, list]:
    pynq, _, reference = servers
    return scenario(clients(pynq.port, **kw)), scenario(clients(reference.port, **kw))


def strings(r: redis.Redis) -> list:
    out: list = [r.set("s", "v1"), r.get("s"), r.get("s"), r.append("s", "+"), r.get("s"),
                 r.incr("n"), r.incrby("n", 41), r.get("n"), r.decr("n"), r.getdel("n"),
                 r.get("n"), r.setnx("s", "no"), r.set("s", "x", xx=True, get=True), r.get("s"),
                 r.set("fresh", "1", nx=True), r.mset({"m1": "a", "m2": "b"}),
                 r.mget("m1", "missing", "m2"), r.strlen("m1"), r.setrange("m1", 3, "zz"),
                 r.get("m1"), r.getrange("m1", 0, 2), r.exists("m1", "m2", "missing"),
                 r.delete("m1", "missing"), r.exists("m1")]
    try:
        r.incr("s")
    except redis.ResponseError as exc:
        out.append(str(exc))
    return out


def data_types(r: redis.Redis) -> list:
    return [r.lpush("l", 1, 2, 3), r.rpop("l"), r.lrange("l", 0, -1),
            r.hset("h", mapping={"a": "1", "b": "2"}), r.hgetall("h"), r.hincrby("h", "a", 5),
            sorted(r.smembers("nosuch")), r.sadd("st", "x", "y"), sorted(r.smembers("st")),
            r.zadd("z", {"a": 1, "b": 2}), r.zrange("z", 0, -1, withscores=True),
            r.xadd("x", {"f": "v"}, id="1-1"), r.xrange("x"), r.setbit("bits", 7, 1),
            r.bitcount("bits"), r.pfadd("hll", "a", "b"), r.pfcount("hll"), r.type("h"),
            r.type("s-none")]


def wrong_type_get(r: redis.Redis) -> list:
    r.lpush("list", "a")
    out: list = []
    for _ in range(2):
        try:
            out.append(r.get("list"))
        except redis.ResponseError as exc:
            out.append(str(exc))
    return out


def transactions(r: redis.Redis) -> list:
    out: list = []
    pipe = r.pipeline()  # redis-py's default: MULTI ... EXEC
    pipe.set("t", "1").incr("t").get("t").lpush("tl", "a")
    out.append(pipe.execute())
    pipe = r.pipeline()
    pipe.set("t", "2").lpush("t", "x").get("t")  # a runtime error inside EXEC
    out.append([str(x) if isinstance(x, Exception) else x
                for x in pipe.execute(raise_on_error=False)])
    with r.pipeline() as pipe:
        pipe.watch("w")
        pipe.multi()
        pipe.set("w", "mine")
        out.append(pipe.execute())
    out.append(r.get("w"))
    out.append(r.execute_command("MULTI"))
    out.append(r.execute_command("SET", "d", "1"))
    out.append(r.execute_command("DISCARD"))
    out.append(r.get("d"))
    try:  # a command refused while queuing aborts the transaction
        r.execute_command("MULTI")
        r.execute_command("NOSUCHCOMMAND")
    except redis.ResponseError as exc:
        out.append(str(exc).split(",")[0])
    try:
        r.execute_command("EXEC")
    except redis.ResponseError as exc:
        out.append(str(exc))
    return out


def watch_abort(r: redis.Redis, other: redis.Redis) -> list:
    r.set("wk", "0")
    r.get("wk")  # (pynq-kv: now in the engine)
    with r.pipeline() as pipe:
        pipe.watch("wk")
        other.set("wk", "changed")
        pipe.multi()
        pipe.set("wk", "mine")
        try:
            pipe.execute()
            aborted = False
        except redis.WatchError:
            aborted = True
    return [aborted, r.get("wk")]


def expiry(r: redis.Redis) -> list:
    # (1.5 s: long enough that a loaded machine reads both keys before they expire)
    out = [r.set("e", "v", px=1500), r.get("e"), r.ttl("e") in (1, 2), r.set("p", "v"),
           r.get("p"), r.pexpire("p", 1500), r.get("p")]
    time.sleep(1.7)
    out += [r.get("e"), r.get("p"), r.exists("e", "p"), r.set("q", "v", ex=100), r.persist("q"),
            r.ttl("q")]
    return out


def keyspace(r: redis.Redis) -> list:
    for i in range(30):
        r.set(f"k:{i}", i)
    r.hset("k:h", "f", "v")
    return [sorted(r.scan_iter(match="k:*", count=7)), sorted(r.keys("k:1*")), r.dbsize(),
            r.rename("k:1", "k:one"), r.get("k:one"), r.get("k:1"), r.copy("k:2", "k:two"),
            r.get("k:two"), r.randomkey() is not None]


def scripts(r: redis.Redis) -> list:
    r.set("sk", "old")
    first = r.get("sk")  # pynq-kv: filled into the engine
    out = [first, r.eval("redis.call('SET', KEYS[1], ARGV[1]); return redis.call('GET', KEYS[1])",
                         1, "sk", "new"), r.get("sk"),
           r.eval("return redis.call('SET', 'undeclared', 'x')", 0), r.get("undeclared")]
    sha = r.script_load("return redis.call('INCR', KEYS[1])")
    out += [r.evalsha(sha, 1, "cnt"), r.evalsha(sha, 1, "cnt"), r.get("cnt")]
    return out


def flushes(r: redis.Redis) -> list:
    r.set("f1", "a")
    return [r.get("f1"), r.flushall(), r.get("f1"), r.dbsize(), r.set("f1", "b"), r.get("f1"),
            r.flushdb(), r.get("f1")]


def select_db(r: redis.Redis) -> list:
    r.set("db", "zero")
    r.get("db")
    return [r.execute_command("SELECT", 1), r.get("db"), r.set("db", "one"), r.get("db"),
            r.execute_command("SELECT", 0), r.get("db")]


def long_keys(r: redis.Redis) -> list:
    key, value = "k" * 200, "v" * 500  # longer than the engine's key and value widths
    return [r.set(key, value), r.get(key), r.mget(key, "short"), r.exists(key), r.delete(key),
            r.get(key), r.set("short", value), r.get("short"), r.set("short", "s"), r.get("short"),
            r.mset({"short": "t", key: "x"}), r.get("short"), r.get(key),  # (an MSET Redis alone
            r.mset({"short": value}), r.get("short")]                      # takes)


def pipelined_blocks(r: redis.Redis) -> list:
    """Runs of one command, pipelined: they reach the server as blocks (forward.py sends a block
    to Redis whole); an error in the middle of one, and a key the engine holds written by one."""
    r.set("b:str", "text")
    r.set("b:other", "text")
    time.sleep(0.05)  # (pynq-kv: the SET's fill is in the engine)
    r.get("b:str")
    pipe = r.pipeline(transaction=False)
    for i in range(20):
        pipe.incr(f"b:n{i % 3}")
    pipe.incr("b:other")  # an error inside the run
    for i in range(20):
        pipe.lpush("b:l", i)
    for i in range(20):
        pipe.lrange("b:l", 0, 2)
    out = [str(x) if isinstance(x, Exception) else x for x in pipe.execute(raise_on_error=False)]
    pipe = r.pipeline(transaction=False)
    for i in range(5):  # a run at the start of what the server reads: one block
        pipe.append("b:str", "+")
    pipe.get("b:str")  # in the same read: the engine must not answer the old value
    out += pipe.execute()
    pipe = r.pipeline(transaction=False)
    for i in range(12):  # a block of plain SETs (one length, nothing after: the parser makes
        pipe.set(f"b:s{i % 4}", f"v{i:02d}")  # one block of them), then reads of what they wrote
    out += pipe.execute()
    out.append(r.mget([f"b:s{i}" for i in range(4)]))
    time.sleep(0.05)  # (pynq-kv: the fills are in the engine)
    out.append(r.mget([f"b:s{i}" for i in range(4)]))
    pipe = r.pipeline(transaction=False)
    for i in range(6):  # a block of MSETs (several keys each) over keys the engine holds
        pipe.mset({f"b:s{i % 4}": f"m{i}", f"b:s{(i + 1) % 4}": f"n{i}", f"b:m{i}": "x"})
    out += pipe.execute()
    out.append(r.mget([f"b:s{i}" for i in range(4)]))
    pipe = r.pipeline(transaction=False)
    for i in range(8):  # blocks of four arguments, one with an error inside
        pipe.hset("b:str" if i == 5 else "b:h", f"f{i}", i)
    for i in range(8):
        pipe.zadd("b:z", {f"m{i}": i})
    out += [str(x) if isinstance(x, Exception) else x for x in pipe.execute(raise_on_error=False)]
    out += [r.hgetall("b:h"), r.zrange("b:z", 0, -1, withscores=True)]
    return out + [r.get("b:str"), r.mget("b:n0", "b:n1", "b:n2")]


@pytest.mark.parametrize("scenario", [pipelined_blocks, strings, data_types, wrong_type_get, transactions, expiry,
                                      keyspace, scripts, flushes, long_keys])
@pytest.mark.parametrize("protocol", [2, 3])
def test_same_replies_as_redis(servers: Any, clients: Any, scenario: Scenario,
                               protocol: int) -> None:
    mine, theirs = both(servers, clients, scenario, protocol=protocol)
    assert mine == theirs


def test_select_keeps_databases_apart(servers: Any, clients: Any) -> None:
    mine, theirs = both(servers, clients, select_db)
    assert mine == theirs == [True, None, True, b"one", True, b"zero"]


def test_watch_sees_another_clients_write(servers: Any, clients: Any) -> None:
    pynq, _, reference = servers
    mine = watch_abort(clients(pynq.port), clients(pynq.port))
    theirs = watch_abort(clients(reference.port), clients(reference.port))
    assert mine == theirs == [True, b"changed"]


def raw_reply(port: int, payload: bytes) -> bytes:
    """The bytes a server sends back for payload, sent raw on a new connection."""
    with socket.create_connection((HOST, port), timeout=5) as sock:
        sock.sendall(payload + encode_command("ECHO", "END-OF-TEST"))
        data = b""
        while not data.endswith(b"$11\r\nEND-OF-TEST\r\n"):
            piece = sock.recv(65536)
            assert piece, "closed early"
            data += piece
    return data


def test_raw_pipeline_bytes_are_redis_bytes(servers: Any) -> None:
    """A pipeline of mixed commands, sent raw: the reply bytes are Redis' own, byte for byte."""
    pynq, behind, reference = servers
    for port in (behind.port, reference.port):
        redis.Redis(host=HOST, port=port).flushall()
    commands = [["SET", "a", "1"], ["GET", "a"], ["GET", "a"], ["INCR", "a"], ["GET", "a"],
                ["GET", "nokey"], ["MGET", "a", "nokey"], ["LPUSH", "l", "x", "y"],
                ["LRANGE", "l", "0", "-1"], ["HSET", "h", "f", "v"], ["HGETALL", "h"],
                ["GET", "l"], ["EXISTS", "a", "l", "nokey"], ["SET", "b", "2", "GET"],
                ["MULTI"], ["SET", "a", "9"], ["GET", "a"], ["EXEC"], ["GET", "a"],
                ["DEL", "a", "b"], ["GET", "a"], ["TTL", "l"], ["TYPE", "h"], ["ECHO", "hi"],
                ["PING"], ["NOSUCH", "x"], ["GET"]]
    payload = b"".join(encode_command(*c) for c in commands)
    assert raw_reply(pynq.port, payload) == raw_reply(reference.port, payload)


@pytest.mark.parametrize("payload", [encode_command("PING") * 9, b"PING\r\n" * 9,
                                     b"PING\r\nPING x\r\n\"PING\"\r\nping\r\n" * 3])
def test_pipelined_pings_are_redis_bytes(servers: Any, payload: bytes) -> None:
    """Runs of PING (multibulk and inline, one block or not) answer as Redis does."""
    pynq, _, reference = servers
    assert raw_reply(pynq.port, payload) == raw_reply(reference.port, payload)


def test_write_behind_our_back_reaches_the_engine(servers: Any, clients: Any) -> None:
    """Another client of the backing Redis changes a key the engine holds: within the window
    (measured here) pynq-kv answers the new value, and never an older one afterwards."""
    pynq, behind, _ = servers
    r = clients(pynq.port)
    other = clients(behind.port)
    r.set("shared", "v0")
    deadline = time.monotonic() + 5
    while pynq.on_loop(lambda: pynq.engine.get(b"shared")) != b"v0":  # filled after the barrier
        assert time.monotonic() < deadline
        r.get("shared")
    windows = []
    for i in range(1, 21):
        other.set("shared", f"v{i}")
        start = time.monotonic()
        while r.get("shared") != f"v{i}".encode():
            assert time.monotonic() - start < 2.0, "the engine kept an old value"
        windows.append(time.monotonic() - start)
        assert r.get("shared") == f"v{i}".encode()
    assert max(windows) < 1.0
    other.expire("shared", 100)  # a key that gains a TTL leaves the engine
    deadline = time.monotonic() + 2
    while pynq.on_loop(lambda: pynq.engine.get(b"shared")) is not None:
        assert time.monotonic() < deadline
    r.get("shared")
    time.sleep(0.05)
    assert pynq.on_loop(lambda: pynq.engine.get(b"shared")) is None  # kept out: it has a TTL


def test_flushall_behind_our_back_empties_the_engine(servers: Any, clients: Any) -> None:
    pynq, behind, _ = servers
    r = clients(pynq.port)
    r.set("gone", "soon")
    deadline = time.monotonic() + 2
    while pynq.on_loop(lambda: pynq.engine.get(b"gone")) is None:
        assert time.monotonic() < deadline
    clients(behind.port).flushall()
    deadline = time.monotonic() + 2
    while r.get("gone") is not None:
        assert time.monotonic() < deadline


def test_pubsub_and_blocking_commands(servers: Any, clients: Any) -> None:
    pynq, _, _ = servers
    r = clients(pynq.port)
    other = clients(pynq.port)
    got: list = []
    worker = threading.Thread(target=lambda: got.append(r.blpop(["queue"], timeout=5)))
    worker.start()
    time.sleep(0.1)
    assert other.rpush("queue", "job") == 1
    worker.join(5)
    assert got == [(b"queue", b"job")]
    sub = clients(pynq.port).pubsub()
    sub.subscribe("news")
    assert sub.get_message(timeout=2)["type"] == "subscribe"
    assert other.publish("news", "hello") == 1
    message = sub.get_message(timeout=2)
    assert message["data"] == b"hello"
    sub.close()


def test_hits_come_from_the_engine(servers: Any, clients: Any) -> None:
    """A hot key is answered by the engine: Redis sees no GET for it."""
    pynq, behind, _ = servers
    r = clients(pynq.port)
    r.set("hot", "value")
    deadline = time.monotonic() + 2
    while pynq.on_loop(lambda: pynq.engine.get(b"hot")) != b"value":
        assert time.monotonic() < deadline
    direct = clients(behind.port)
    before = int(direct.info("commandstats").get("cmdstat_get", {}).get("calls", 0))
    for _ in range(50):
        assert r.get("hot") == b"value"
    after = int(direct.info("commandstats").get("cmdstat_get", {}).get("calls", 0))
    assert after == before


def _engine_value(pynq: Any, key: bytes) -> Any:
    return pynq.on_loop(lambda: pynq.engine.get(key))


def test_a_set_updates_the_entry_in_place_and_its_client_never_reads_the_old_value(
        servers: Any, clients: Any) -> None:
    """A plain SET leaves the key's engine entry until Redis acknowledges it and then updates
    it in place: no engine delete. Meanwhile the key reads as a miss: the same client's GET
    pipelined right behind the SET gets the new value (from Redis), never the entry's old one,
    and so does a KV.MATCH behind it."""
    pynq, _, _ = servers
    r = clients(pynq.port)
    r.set("inplace", "val-000")
    deadline = time.monotonic() + 2
    while _engine_value(pynq, b"inplace") != b"val-000":
        assert time.monotonic() < deadline
    deletes = pynq.on_loop(lambda: pynq.engine.stats()["deletes"])
    for i in range(1, 40):
        new = b"val-%03d" % i
        got = raw_reply(pynq.port, encode_command("SET", "inplace", new)
                        + encode_command("GET", "inplace"))
        assert got == b"+OK\r\n$7\r\n" + new + b"\r\n$11\r\nEND-OF-TEST\r\n"
        assert _engine_value(pynq, b"inplace") in (new, None)  # (None: the GET's fill not in)
    assert pynq.on_loop(lambda: pynq.engine.stats()["deletes"]) == deletes
    written = pynq.on_loop(lambda: pynq.tier.info()["hosttier_written_in_place"])
    assert written >= 39
    for i in range(40, 60):
        old, new = b"val-%03d" % (i - 1), b"val-%03d" % i
        r.set("inplace", old)
        got = raw_reply(pynq.port, encode_command("SET", "inplace", new)
                        + encode_command("KV.MATCH", "inplace"))
        assert got.startswith(b"+OK\r\n*3\r\n") and old not in got
    assert pynq.on_loop(lambda: len(pynq.tier.writing)) == 0


def test_a_set_redis_refuses_leaves_the_entry_as_redis_left_the_key(servers: Any,
                                                                  clients: Any) -> None:
    """A SET refused by Redis (OOM under maxmemory) changes nothing: the engine still answers
    the value Redis kept."""
    pynq, behind, _ = servers
    r = clients(pynq.port)
    direct = clients(behind.port)
    r.set("refused", "kept")
    deadline = time.monotonic() + 2
    while _engine_value(pynq, b"refused") != b"kept":
        assert time.monotonic() < deadline
    direct.config_set("maxmemory", "1")
    try:
        with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
            r.set("refused", "lost")
        assert r.get("refused") == b"kept" == direct.get("refused")
        assert _engine_value(pynq, b"refused") == b"kept"
    finally:
        direct.config_set("maxmemory", "0")


@contextmanager
def _only_ok_keys(direct: list) -> Iterator[None]:
    """Both redis-servers refuse keys other than ok:* (an ACL) for the block's span."""
    for client in direct:
        client.execute_command("ACL", "SETUSER", "default", "resetkeys", "~ok:*")
    try:
        yield
    finally:
        for client in direct:
            client.execute_command("ACL", "SETUSER", "default", "resetkeys", "allkeys")


@contextmanager
def _loop_busy(pynq: Any, seconds: float = 0.5) -> Iterator[None]:
    """The server's loop sleeps while the block runs: what arrives meanwhile is one tick's."""
    busy = threading.Thread(target=pynq.on_loop, args=(lambda: time.sleep(seconds),))
    busy.start()
    time.sleep(0.1)
    try:
        yield
    finally:
        busy.join()


def _sent_together(port: int, payloads: list[bytes], lines: int,
                   while_sending: Any = None) -> list[bytes]:
    """Each payload on a connection of its own, all sent (inside while_sending) before any
    reply is read; the first `lines` reply lines of each connection. Every connection has
    answered a PING first, so the server has accepted them all before anything is sent."""
    socks = [socket.create_connection((HOST, port), timeout=5) for _ in payloads]
    try:
        for sock in socks:
            sock.sendall(encode_command("PING"))
            assert sock.recv(64) == b"+PONG\r\n"
        with while_sending or nullcontext():
            for sock, payload in zip(socks, payloads):
                sock.sendall(payload)
        got = []
        for sock in socks:
            data = b""
            while data.count(b"\r\n") < lines:
                piece = sock.recv(65536)
                assert piece, "closed early"
                data += piece
            got.append(data)
        return got
    finally:
        for sock in socks:
            sock.close()


def test_sets_of_several_clients_sent_as_one_block_get_their_own_replies(servers: Any,
                                                                      clients: Any) -> None:
    """Plain SETs of several clients in one loop turn go to Redis as one block; when Redis
    refuses some of them (an ACL that allows keys ok:* only), each client gets Redis' replies
    to its own SETs in its own order, as from redis-server, and only acknowledged values
    enter the engine."""
    pynq, behind, reference = servers
    direct = [clients(behind.port), clients(reference.port)]
    # each client's own order of allowed and refused keys
    orders = [[f"ok:{c}:1", f"no:{c}", f"ok:{c}:2", f"ok:{c}:3", f"no:{c}:2"][c % 5:] +
              [f"ok:{c}:1", f"no:{c}", f"ok:{c}:2", f"ok:{c}:3", f"no:{c}:2"][:c % 5] for c in range(6)]
    payloads = [b"".join(encode_command("SET", key, "v-%s" % key) for key in keys) for keys in orders]
    with _only_ok_keys(direct):
        replies = [_sent_together(port, payloads, 5) for port in (pynq.port, reference.port)]
    assert replies[0] == replies[1]
    for keys, got in zip(orders, replies[0]):
        assert [line[:1] for line in got.split(b"\r\n")[:5]] == [b"+" if k.startswith("ok") else b"-"
                                                                 for k in keys]
    for c in range(6):
        for key in (f"ok:{c}:1", f"ok:{c}:2", f"ok:{c}:3"):
            deadline = time.monotonic() + 2
            while _engine_value(pynq, key.encode()) != b"v-" + key.encode():
                assert time.monotonic() < deadline, key
        for key in (f"no:{c}", f"no:{c}:2"):
            assert _engine_value(pynq, key.encode()) is None
            assert direct[0].get(key) is None


class _CountingWrites:
    """The shared link's transport, counting the commands named `name` (SET unless told) in
    each write it passes on."""

    def __init__(self, transport: Any, name: bytes = b"SET") -> None:
        self.transport = transport
        self.word = b"$%d\r\n%s\r\n" % (len(name), name)
        self.sets: list[int] = []

    def write(self, data: bytes) -> None:
        self.sets.append(data.count(self.word))
        self.transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


@pytest.mark.parametrize("name", ["SET", "MSET", "MSET mixed"])
def test_a_large_tick_of_writes_goes_to_redis_in_parts(servers: Any, clients: Any,
                                                        name: str) -> None:
    """Five clients' blocks of 40 SETs (or MSETs of two keys; or MSETs of one and two keys in
    turn, which make no block), arriving while the server's loop is busy (so one tick plans
    them all): they go to Redis in runs of EARLY_WRITE commands or more, one write each, not
    one write of 200, and every client still gets redis-server's
    replies in its own order (an ACL refuses some keys), Redis holds what it acknowledged, and
    the engine (SETs) the acknowledged values only."""
    pynq, behind, reference = servers
    direct = [clients(behind.port), clients(reference.port)]
    orders = [[f"{'no' if (i + c) % 7 == 0 else 'ok'}:big:{c}:{i}" for i in range(40)] for c in range(5)]

    def write(key: str) -> bytes:
        if name == "SET":
            return encode_command("SET", key, "w-%s" % key)
        if name == "MSET mixed" and key[-1] in "02468":
            return encode_command("MSET", key, "w-%s" % key)
        return encode_command("MSET", key, "w-%s" % key, key + ":2", "w2")

    payloads = [b"".join(map(write, keys)) for keys in orders]
    link = pynq.tier.main
    counting = _CountingWrites(link.transport, name.split()[0].encode())
    with _only_ok_keys(direct):
        pynq.on_loop(lambda: setattr(link, "transport", counting))
        try:
            replies = [_sent_together(pynq.port, payloads, 40, _loop_busy(pynq)),
                       _sent_together(reference.port, payloads, 40)]
        finally:
            pynq.on_loop(lambda: setattr(link, "transport", counting.transport))
    assert replies[0] == replies[1]
    sent = [n for n in counting.sets if n]
    assert sum(sent) == 200 and len(sent) >= 2 and max(sent) < 200, sent
    assert all(n >= redislink.EARLY_WRITE for n in sent[:-1]), sent
    for keys in orders:
        for key in keys[:3] + keys[-3:]:
            expected = b"w-" + key.encode() if key.startswith("ok") else None
            assert direct[0].get(key) == expected
            if name != "SET":
                assert _engine_value(pynq, key.encode()) is None
                continue
            deadline = time.monotonic() + 2
            while _engine_value(pynq, key.encode()) != expected:
                assert time.monotonic() < deadline, key


def test_msets_of_several_clients_go_to_redis_together(servers: Any, clients: Any) -> None:
    """MSETs of several clients in one loop turn, alone and in pipelined blocks: they go to
    Redis in runs, each with one reply handler (none of them on its own), in few writes, each
    client gets redis-server's replies in its own order (an ACL refuses keys no:*, and so every
    MSET that names one), a GET behind a client's MSET reads what it wrote, and the engine never
    answers a value the MSETs replaced."""
    pynq, behind, reference = servers
    direct = [clients(behind.port), clients(reference.port)]
    r = clients(pynq.port)
    keys = [f"ok:ms:{c}:{i}" for c in range(6) for i in range(3)]
    r.mset({key: "old" for key in keys})
    for key in keys:
        r.get(key)  # (the fill puts it in the engine)
    deadline = time.monotonic() + 2
    while any(_engine_value(pynq, key.encode()) != b"old" for key in keys):
        assert time.monotonic() < deadline

    def commands(c: int) -> list[list[str]]:
        mine = [["MSET", f"ok:ms:{c}:0", f"a{c}", f"ok:ms:{c}:1", f"b{c}", f"ok:ms:{c}:0", f"c{c}"],
                ["GET", f"ok:ms:{c}:0"],
                ["MSET", f"ok:ms:{c}:2", f"d{c}", f"no:ms:{c}", "x"] if c % 2 else
                ["MSET", f"ok:ms:{c}:2", f"e{c}"]]
        mine += [["MSET", f"ok:ms:{c}:1", f"f{c}{i}", f"ok:ms:{c}:2", f"g{c}{i}"]  # a pipelined
                 for i in range(5)]                                                 # block
        return mine + [["MGET", f"ok:ms:{c}:0", f"ok:ms:{c}:1", f"ok:ms:{c}:2"]]

    payloads = [b"".join(encode_command(*command) for command in commands(c)) for c in range(6)]
    link = pynq.tier.main
    counting = _CountingWrites(link.transport, b"MSET")
    alone, together = [], []  # MSETs per request handed to the link: one at a time, in runs

    def spy(method: Any, seen: list) -> Any:
        def counted(payload: bytes, *rest: Any) -> Any:
            seen.append(payload.count(counting.word))
            return method(payload, *rest)
        return counted

    with _only_ok_keys(direct):
        pynq.on_loop(lambda: (setattr(link, "transport", counting),
                              setattr(link, "send", spy(link.send, alone)),
                              setattr(link, "send_many", spy(link.send_many, together))))
        try:
            replies = [_sent_together(pynq.port, payloads, 16, _loop_busy(pynq)),  # (GET: 2
                       _sent_together(reference.port, payloads, 16)]  # lines, MGET of 3 keys: 7)
        finally:
            pynq.on_loop(lambda: (setattr(link, "transport", counting.transport),
                                  delattr(link, "send"), delattr(link, "send_many")))
    assert replies[0] == replies[1]
    sent = [n for n in counting.sets if n]
    assert sum(sent) == 6 * 7 and len(sent) < 6, sent
    assert sum(alone) == 0 and sum(together) == 6 * 7 and max(together) > 1, (alone, together)
    for c, got in enumerate(replies[0]):
        assert got.startswith(b"+OK\r\n$2\r\nc%d\r\n" % c)
        assert (b"-NOPERM" in got) == bool(c % 2)
    for key in keys:
        now = direct[0].get(key)
        assert now != b"old" and r.get(key) == now
        assert _engine_value(pynq, key.encode()) in (None, now)
    assert _engine_value(pynq, b"no:ms:1") is None


def test_an_mset_behind_a_request_on_another_connection_waits_its_turn(servers: Any,
                                                                       clients: Any) -> None:
    """A RESP3 client's HSET goes to Redis on the shared RESP3 connection, its MSETs on the
    RESP2 one: pipelined behind the HSET they wait for its reply (the client's order), and
    still get Redis' own replies, a refused one (ACL) included."""
    pynq, behind, reference = servers
    direct = [clients(behind.port), clients(reference.port)]
    got = []
    with _only_ok_keys(direct):
        for port in (pynq.port, reference.port):
            pipe = clients(port, protocol=3).pipeline(transaction=False)
            pipe.hset("ok:turn:h", "f", "v").mset({"ok:turn:a": "1", "no:turn": "2"})
            pipe.mset({"ok:turn:a": "3"}).get("ok:turn:a").hget("ok:turn:h", "f")
            got.append([str(x) if isinstance(x, Exception) else x
                        for x in pipe.execute(raise_on_error=False)])
    assert got[0] == got[1]
    assert "no permissions" in got[0][1] and got[0][2:] == [True, b"3", b"v"]


def test_an_mset_redis_refuses_leaves_the_keys_as_redis_left_them(servers: Any,
                                                                  clients: Any) -> None:
    """An MSET refused by Redis (OOM under maxmemory), alone and in a pipelined block, changes
    nothing a client reads: the engine never answers the values it would have written."""
    pynq, behind, _ = servers
    r = clients(pynq.port)
    direct = clients(behind.port)
    r.mset({"mref:a": "kept-a", "mref:b": "kept-b"})
    direct.config_set("maxmemory", "1")
    try:
        with pytest.raises(redis.exceptions.ResponseError, match="maxmemory"):
            r.mset({"mref:a": "lost", "mref:b": "lost"})
        pipe = r.pipeline(transaction=False)
        for i in range(5):
            pipe.mset({"mref:a": f"lost{i}", "mref:b": f"lost{i}"})
        assert all(isinstance(x, redis.exceptions.ResponseError)
                   for x in pipe.execute(raise_on_error=False))
        for _ in range(2):  # from Redis, then from the engine (the first GET's fill)
            assert r.mget("mref:a", "mref:b") == [b"kept-a", b"kept-b"] == direct.mget("mref:a", "mref:b")
            time.sleep(0.05)
        assert _engine_value(pynq, b"mref:a") in (None, b"kept-a")
    finally:
        direct.config_set("maxmemory", "0")


def test_a_key_redis_lacks_needs_no_round_trip(servers: Any, clients: Any) -> None:
    """A GET of a key Redis does not have teaches pynq-kv that it is absent: later GETs (and an
    MGET of it with a key the engine holds) are answered without Redis, and the key's creation
    by pynq-kv or by another client of that Redis ends that."""
    pynq, behind, _ = servers
    r = clients(pynq.port)
    direct = clients(behind.port)
    r.delete("gone", "gone2")
    r.set("here", "v")

    def gets() -> int:
        return int(direct.info("commandstats").get("cmdstat_get", {}).get("calls", 0))

    def learnt(key: bytes) -> bool:
        return pynq.on_loop(lambda: key in pynq.tier.absent)

    deadline = time.monotonic() + 5
    while not (learnt(b"gone") and pynq.on_loop(lambda: pynq.engine.get(b"here")) == b"v"):
        assert time.monotonic() < deadline
        assert r.get("gone") is None and r.get("here") == b"v"
    before = gets()
    for _ in range(20):
        assert r.get("gone") is None
        assert r.mget("here", "gone") == [b"v", None]
        assert r.exists("here", "gone") == 1
    assert gets() == before
    r.set("gone", "now")  # written through pynq-kv: read back at once
    assert r.get("gone") == b"now"
    assert r.get("gone2") is None
    deadline = time.monotonic() + 5
    while not learnt(b"gone2"):
        assert time.monotonic() < deadline
        r.get("gone2")
    direct.set("gone2", "behind")  # another client creates it: within the window
    start = time.monotonic()
    while r.get("gone2") != b"behind":
        assert time.monotonic() - start < 1.0, "still answered as absent"
    info = r.info("hosttier")
    assert info["hosttier_absent_hits"] >= 60


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_lists_redis_commands_and_pynq_kvs_own(servers: Any, clients: Any,
                                                        protocol: int) -> None:
    """COMMAND and its COUNT, LIST, INFO and DOCS are Redis' with the KV.* commands added."""
    pynq, behind, _ = servers
    r = clients(pynq.port, protocol=protocol)
    direct = clients(behind.port, protocol=protocol)
    own = {"kv.match", "kv.rule.add", "kv.rule.del", "kv.rule.list", "kv.stats"}
    assert r.execute_command("COMMAND COUNT") == direct.execute_command("COMMAND COUNT") + len(own)
    listed = {n.decode() for n in r.execute_command("COMMAND LIST")}
    assert listed == {n.decode() for n in direct.execute_command("COMMAND LIST")} | own
    table = r.command()  # redis-py parses the whole list
    assert own <= set(table) and "get" in table and table["kv.match"]["arity"] == -2
    info = r.execute_command("COMMAND INFO", "get", "kv.stats", "nosuch")
    reference = direct.execute_command("COMMAND INFO", "get", "kv.stats", "nosuch")
    assert info[0] == reference[0] and info[2] is None and reference[1] is None
    assert info[1][0] == b"kv.stats" and info[1][1] == 1
    docs = r.execute_command("COMMAND DOCS", "kv.match", "get")
    docs = dict(zip(docs[::2], docs[1::2])) if isinstance(docs, list) else docs
    assert set(docs) == {b"kv.match", b"get"}


def test_info_has_redis_and_pynq_kv_sections(servers: Any, clients: Any) -> None:
    pynq, _, _ = servers
    info = clients(pynq.port).info("everything")
    assert "redis_version" in info and "hosttier_up" in info and "aof_enabled" in info


def test_redis_gone_gives_errors_and_empties_the_engine() -> None:
    behind = RedisServer()
    pynq = PynqServer(redis=behind)
    try:
        r = redis.Redis(host=HOST, port=pynq.port, socket_timeout=5)
        r.set("k", "v")
        deadline = time.monotonic() + 2
        while pynq.on_loop(lambda: pynq.engine.get(b"k")) is None:
            assert time.monotonic() < deadline
        behind.stop()
        deadline = time.monotonic() + 5
        while pynq.on_loop(lambda: pynq.tier.up):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert pynq.on_loop(lambda: len(pynq.engine)) == 0  # nothing Redis might have lost
        for command in (lambda: r.get("k"), lambda: r.set("k", "w"), lambda: r.lpush("l", 1),
                        lambda: r.mset({"k": "w", "j": "x"})):
            with pytest.raises(redis.ResponseError, match="host tier"):
                command()
        assert pynq.on_loop(lambda: len(pynq.tier.writing)) == 0
        r.close()
        async def close() -> bool:
            reconnecting = pynq.tier._reconnecting  # in its back-off sleep
            await pynq.tier.close()
            return reconnecting is not None and reconnecting.done()
        assert pynq.run(close())  # ended by close, not left pending when the loop ends
    finally:
        pynq.stop()


def test_a_lost_link_leaves_no_fill_ticket_behind() -> None:
    """Fills waiting when the shared link is lost never come: their tickets go with them (a
    ticket left behind would keep every later invalidated key in the dirty map for good)."""
    behind = RedisServer()
    pynq = PynqServer(redis=behind)
    try:
        def lose_with_fills_waiting() -> tuple[int, int]:
            tier = pynq.tier
            tier.settle(tier.ticket(), b"a", b"1")  # its barrier goes out
            tier.settle(tier.ticket(), b"b", b"2")  # waits for the next barrier
            waiting = tier.tickets
            tier._main_lost(tier.main, None)
            return waiting, tier.tickets
        assert pynq.on_loop(lose_with_fills_waiting) == (2, 0)
        deadline = time.monotonic() + 5
        while not pynq.on_loop(lambda: pynq.tier.up):  # it reconnects
            assert time.monotonic() < deadline
            time.sleep(0.02)
        pynq.on_loop(lambda: pynq.tier.invalidate([b"k"]))
        assert pynq.on_loop(lambda: (pynq.tier.tickets, len(pynq.tier.dirty))) == (0, 0)
    finally:
        pynq.stop()
        behind.stop()


def test_commands_on_pynq_kvs_own_links_are_refused(servers: Any, clients: Any) -> None:
    pynq, behind, _ = servers
    r = clients(pynq.port)
    with pytest.raises(redis.ResponseError, match="stop pynq-kv serve instead"):
        r.execute_command("SHUTDOWN")
    with pytest.raises(redis.ResponseError, match="CLIENT KILL is not supported"):
        r.execute_command("CLIENT", "KILL", "ID", "1")
    assert clients(behind.port).ping() and r.set("still", "up") and r.get("still") == b"up"


def test_reset_and_client_reply_behave_as_on_redis(servers: Any, clients: Any) -> None:
    """RESET forgets the transaction and the protocol; CLIENT REPLY OFF/SKIP silence replies."""
    pynq, _, reference = servers
    outputs = []
    for port in (pynq.port, reference.port):
        with socket.create_connection((HOST, port), timeout=5) as sock:
            commands = [["HELLO", "3"], ["MULTI"], ["SET", "r", "1"], ["RESET"], ["GET", "r"],
                        ["CLIENT", "REPLY", "SKIP"], ["SET", "r", "2"], ["GET", "r"],
                        ["CLIENT", "REPLY", "OFF"], ["SET", "r", "3"], ["CLIENT", "REPLY", "ON"],
                        ["GET", "r"], ["ECHO", "END"]]
            sock.sendall(b"".join(encode_command(*c) for c in commands))
            data = b""
            while not data.endswith(b"$3\r\nEND\r\n"):
                piece = sock.recv(65536)
                assert piece
                data += piece
        outputs.append(data[data.index(b"+QUEUED"):])  # (HELLO's reply names the server)
    assert outputs[0] == outputs[1]
    assert outputs[0].endswith(b"+RESET\r\n$-1\r\n$1\r\n2\r\n+OK\r\n$1\r\n3\r\n$3\r\nEND\r\n")


def test_a_clients_own_tracking_gets_redis_pushes(servers: Any, clients: Any) -> None:
    """CLIENT TRACKING of a RESP3 client (its own connection to Redis): another client's write
    reaches it as Redis' invalidation push, byte for byte as from redis-server."""
    pynq, _, reference = servers
    pushes = []
    for port in (pynq.port, reference.port):
        other = clients(port)
        other.set("tracked", "1")
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(encode_command("HELLO", "3") + encode_command("CLIENT", "TRACKING", "ON")
                         + encode_command("GET", "tracked") + encode_command("ECHO", "READY"))
            data = b""
            while not data.endswith(b"$5\r\nREADY\r\n"):
                piece = sock.recv(65536)
                assert piece
                data += piece
            other.set("tracked", "2")
            push = b""
            while not push.endswith(b"$7\r\ntracked\r\n"):
                piece = sock.recv(65536)
                assert piece
                push += piece
        pushes.append(push)
    assert pushes[0] == pushes[1] == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$7\r\ntracked\r\n"


@pytest.mark.parametrize("protocol", [2, 3])
def test_info_of_one_own_section_alone(servers: Any, protocol: int) -> None:
    """INFO engine: Redis has no such section, so the reply is pynq-kv's section alone (a bulk
    string, or RESP3's verbatim text)."""
    pynq, _, _ = servers
    client = RawClient(pynq.port)
    try:
        client.call("HELLO", str(protocol))
        info = client.call("INFO", "engine")
    finally:
        client.close()
    assert info.startswith(b"# Engine\r\n") and b"\r\nbackend:" in info
    framing = rb"=%d\r\ntxt:# Engine" if protocol == 3 else rb"\$%d\r\n# Engine"
    size = len(info) + (4 if protocol == 3 else 0)
    assert re.search(framing % size, bytes(client.raw))
