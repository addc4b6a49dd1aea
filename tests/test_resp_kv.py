"""pynq-kv-only behaviour of the RESP front-end: the hardware key/value format, a full table,
the KV.* commands, INFO's engine section, batching, the appliance hooks and the limits that
keep the server alive."""

from __future__ import annotations

import random
import socket
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pynq_kv import FieldLayout, Geometry, KVEngine
from pynq_kv.serve.resp import RespConfig
from pynq_kv.keys import tagged_rows
from resp_helpers import HOST, PynqServer, RawClient, encode_command, exchange

pytestmark = pytest.mark.timeout(120)

KEY_ERR = "key too long for the engine's 288-bit key format (max 35 bytes)"
VALUE_ERR = "value too long for the engine's 256-bit value format (max 31 bytes)"
OOM = "command not allowed when used memory > 'maxmemory'."


def client(port: int, **kwargs) -> redis.Redis:
    return redis.Redis(host=HOST, port=port, socket_timeout=10, retry=Retry(NoBackoff(), 0), **kwargs)


@pytest.fixture(scope="module")
def server():
    srv = PynqServer(layout=FieldLayout(288, [("src_ip", "ipv4"), ("dst_port", "port")]))
    yield srv
    srv.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request, server):
    conn = client(server.port, protocol=request.param)
    conn.flushall()
    yield conn
    conn.close()


def error_of(fn, *args, **kwargs) -> str:
    with pytest.raises(redis.ResponseError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# -- the hardware format ------------------------------------------------------------------------
def test_key_and_value_that_do_not_fit_change_nothing(r, server):
    r.set("keep", "1")
    before = server.items()
    long_key, long_value = b"k" * 36, b"v" * 32
    assert error_of(r.set, long_key, "x") == KEY_ERR
    assert error_of(r.set, "k", long_value) == VALUE_ERR
    assert error_of(r.execute_command, "SET", long_key, "x", "NX", "GET") == KEY_ERR
    assert error_of(r.mset, {"a": "1", long_key: "2"}) == KEY_ERR
    assert error_of(r.mset, {"a": "1", "b": long_value}) == VALUE_ERR
    assert error_of(r.get, long_key) == KEY_ERR
    assert error_of(r.mget, "a", long_key) == KEY_ERR
    assert error_of(r.exists, long_key) == KEY_ERR
    assert error_of(r.delete, "keep", long_key) == KEY_ERR
    assert error_of(r.execute_command, "KV.MATCH", long_key) == KEY_ERR
    assert server.items() == before  # in particular "keep" was not deleted and "a" not set
    pipe = r.pipeline(transaction=False)
    pipe.set("p1", "1").set(long_key, "x").set("p2", long_value).set("p3", "3").get(long_key).get("p1")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True and results[3] is True and results[5] == b"1"
    assert [str(results[i]) for i in (1, 2, 4)] == [KEY_ERR, VALUE_ERR, KEY_ERR]
    assert r.dbsize() == 3


def test_expiry_is_refused_clearly(r):
    message = error_of(r.set, "k", "v", ex=10)
    assert "expiry" in message and "not supported" in message
    assert error_of(r.set, "k", "v", px=10) == message
    assert error_of(r.execute_command, "SET", "k", "v", "EXAT", "99999999999") == message
    assert r.exists("k") == 0
    assert r.execute_command("SET", "k", "v", "KEEPTTL") in (True, b"OK")  # nothing to keep


def test_codec_matches_the_engine_key_format():
    eng = KVEngine("model")
    rng = random.Random(7)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(36))) for _ in range(200)]
    for group in (keys, [k[:5].ljust(5, b"x") for k in keys], keys[:3]):
        assert (tagged_rows(group, 36) == eng.key_format.encode_many(group)).all()


# -- a full table -------------------------------------------------------------------------------
@pytest.fixture
def tiny():
    srv = PynqServer(geometry=Geometry(ways=2, rows=2, stash=0, rules=8))  # 4 slots
    yield srv
    srv.stop()


def test_full_table_answers_oom_and_mset_is_all_or_nothing(tiny):
    r = client(tiny.port)
    stored = 0
    for i in range(20):
        try:
            r.set(f"k{i}", str(i))
            stored += 1
        except redis.ResponseError as exc:
            assert str(exc) == OOM or isinstance(exc, redis.exceptions.OutOfMemoryError)
    assert stored == 4 == r.dbsize()
    before = tiny.items()
    some = next(iter(before))
    for pairs in ({"new1": "x"}, {some: "changed", "new2": "y"}, {"a": "1", "b": "2"}):
        with pytest.raises(redis.ResponseError, match="maxmemory"):
            r.mset(pairs)
        assert tiny.items() == before
    r.delete(some)
    assert r.mset({"n1": "1"}) is True  # room for exactly one again
    assert r.get("n1") == b"1"
    pipe = r.pipeline(transaction=False)
    pipe.set("n1", "2").set("n9", "9").get("n1")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True and isinstance(results[1], redis.ResponseError) and results[2] == b"2"
    assert tiny.stats()["total_error_replies"] >= 4
    r.close()


# -- FLUSHDB, FLUSHALL and rules ----------------------------------------------------------------
def test_dbsize_is_occupancy_and_flushdb_keeps_rules(r, server):
    r.mset({"a": "1", "b": "2"})
    r.execute_command("KV.RULE.ADD", "PRIORITY", 1, "VALUE", "r", "PREFIX", "user:")
    assert r.dbsize() == 2 == server.on_loop(lambda: server.engine.occupancy().used)
    r.flushdb()
    assert r.dbsize() == 0 and len(server.rules()) == 1
    r.flushall()
    assert server.rules() == {}


# -- KV.* ---------------------------------------------------------------------------------------
def kv_match(r, *args):
    reply = r.execute_command("KV.MATCH", *args)
    if isinstance(reply, dict):
        return reply[b"kind"], reply[b"value"], reply[b"rule_id"]
    return tuple(reply)


def test_kv_match_exact_rule_miss(r):
    assert kv_match(r, "user:1") == (b"miss", None, None)
    rule = r.execute_command("KV.RULE.ADD", "PRIORITY", 5, "VALUE", "by-prefix", "NAME", "users",
                             "PREFIX", "user:")
    assert isinstance(rule, int)
    assert kv_match(r, "user:1") == (b"rule", b"by-prefix", rule)
    assert kv_match(r, "user") == (b"miss", None, None)
    assert kv_match(r, "other:1") == (b"miss", None, None)
    r.set("user:1", "exact")
    assert kv_match(r, "user:1") == (b"exact", b"exact", None)
    assert r.get("user:2") is None  # GET is exact-only; KV.MATCH also sees rules


def test_kv_prefix_ending_in_nul_does_not_match_shorter_keys(r):
    rule = r.execute_command("KV.RULE.ADD", "PRIORITY", 1, "VALUE", "z", "PREFIX", b"ab\x00")
    assert kv_match(r, b"ab") == (b"miss", None, None)
    assert kv_match(r, b"ab\x00") == (b"rule", b"z", rule)
    assert kv_match(r, b"ab\x00\x00tail") == (b"rule", b"z", rule)


def test_kv_rule_raw_match_mask_priorities_and_delete(r):
    # the low key byte is padding for short keys; match the length byte (top byte) instead
    top = 288 - 8
    one_byte = r.execute_command("KV.RULE.ADD", "PRIORITY", 3, "VALUE", "len1", "MATCH",
                                 hex(1 << top), "MASK", hex(0xFF << top))
    anything = r.execute_command("KV.RULE.ADD", "PRIORITY", 1, "VALUE", "any", "MATCH", "0", "MASK", "0")
    assert kv_match(r, "x") == (b"rule", b"len1", one_byte)
    assert kv_match(r, "xy") == (b"rule", b"any", anything)
    listed = r.execute_command("KV.RULE.LIST")
    rows = [row if isinstance(row, dict) else dict(zip(row[::2], row[1::2])) for row in listed]
    assert [row[b"id"] for row in rows] == [one_byte, anything]
    assert rows[0][b"priority"] == 3 and rows[0][b"value"] == b"len1" and rows[0][b"hits"] == 1
    assert rows[0][b"match"].startswith(b"match=0x01")
    assert r.execute_command("KV.RULE.DEL", one_byte) == 1
    assert r.execute_command("KV.RULE.DEL", one_byte) == 0
    assert kv_match(r, "x") == (b"rule", b"any", anything)


def test_kv_field_rules_with_the_appliance_layout(r):
    rule = r.execute_command("KV.RULE.ADD", "PRIORITY", 10, "VALUE", "internal", "FIELD", "src_ip",
                             "10.0.0.0/8", "FIELD", "dst_port", "1000-2000")
    assert kv_match(r, "FIELD", "src_ip", "10.1.2.3", "FIELD", "dst_port", "1500") == (b"rule", b"internal", rule)
    assert kv_match(r, "FIELD", "src_ip", "11.1.2.3", "FIELD", "dst_port", "1500") == (b"miss", None, None)
    listed = r.execute_command("KV.RULE.LIST")
    row = listed[0] if isinstance(listed[0], dict) else dict(zip(listed[0][::2], listed[0][1::2]))
    assert row[b"match"] == b"src_ip=10.0.0.0/8 dst_port={'range': [1000, 2000]}"
    assert row[b"entries"] > 1  # the port range expands to several ternary entries


@pytest.mark.parametrize("args, message", [
    (["VALUE", "v", "PREFIX", "a"], "needs PRIORITY and VALUE"),
    (["PRIORITY", "1", "VALUE", "v"], "takes one of"),
    (["PRIORITY", "1", "VALUE", "v", "PREFIX", "a", "MATCH", "1", "MASK", "1"], "takes one of"),
    (["PRIORITY", "x", "VALUE", "v", "PREFIX", "a"], "value is not an integer or out of range"),
    (["PRIORITY", "1", "VALUE", "v", "MATCH", "zz", "MASK", "1"], "MATCH takes a hexadecimal number"),
    (["PRIORITY", "1", "VALUE", "v", "MATCH", "1"], "MATCH and MASK go together"),
    (["PRIORITY", "1", "VALUE", "v", "MATCH", "3", "MASK", "1"], "outside the mask"),
    (["PRIORITY", "99999999", "VALUE", "v", "PREFIX", "a"], "priority 99999999 is outside"),
    (["PRIORITY", "1", "VALUE", "v" * 32, "PREFIX", "a"], VALUE_ERR),
    (["PRIORITY", "1", "VALUE", "v", "FIELD", "nope", "1"], "unknown field(s) nope"),
    (["PRIORITY", "1", "VALUE", "v", "BOGUS", "1"], "syntax error"),
])
def test_kv_rule_add_errors_change_nothing(r, server, args, message):
    assert message in error_of(r.execute_command, "KV.RULE.ADD", *args)
    assert server.rules() == {}


def test_kv_stats_and_info_engine_section(r):
    before = r.execute_command("KV.STATS")
    before = before if isinstance(before, dict) else dict(zip(before[::2], before[1::2]))
    r.set("a", "1")
    r.get("a")
    r.get("b")
    after = r.execute_command("KV.STATS")
    after = after if isinstance(after, dict) else dict(zip(after[::2], after[1::2]))
    assert after[b"lookups"] - before[b"lookups"] == 2
    assert after[b"exact_hits"] - before[b"exact_hits"] == 1
    assert after[b"misses"] - before[b"misses"] == 1
    assert after[b"inserts"] - before[b"inserts"] == 1
    assert after[b"occupancy"] == 1 and after[b"capacity"] == 4 * 1024 + 8
    engine = r.info("engine")
    assert engine["backend"] == "model" and engine["key_width"] == 288 and engine["used"] == 1
    assert engine["lookups"] == after[b"lookups"] and engine["max_key_bytes"] == 35
    assert "engine_batches" in r.info("stats")


# -- batching -----------------------------------------------------------------------------------
def random_stream(seed: int, n: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    keys = [b"k%d" % i for i in range(12)] + [b"x" * 36]
    stream = []
    for _ in range(n):
        op = rng.choice(["GET", "GET", "SET", "SET", "MGET", "EXISTS", "DEL", "SETNX", "MSET", "PING"])
        k = rng.choice(keys)
        if op == "GET":
            stream.append([b"GET", k])
        elif op == "SET":
            stream.append([b"SET", k, rng.choice([b"v", b"w" * 31, b"z" * 32])])
        elif op == "SETNX":
            stream.append([b"SET", k, b"nx", b"NX", b"GET"])
        elif op in ("MGET", "EXISTS", "DEL"):
            stream.append([op.encode()] + rng.sample(keys, 3))
        elif op == "MSET":
            stream.append([b"MSET", k, b"1", rng.choice(keys), b"2"])
        else:
            stream.append([b"PING"])
    return stream


def test_batched_and_unbatched_dispatch_answer_the_same():
    """Runs folded into engine batches mean exactly the commands one after another (§7)."""
    stream = random_stream(11, 3000)
    data = b"".join(encode_command(*c) for c in stream)
    outputs, tables = [], []
    for batching in (True, False):
        srv = PynqServer(RespConfig(batching=batching))
        try:
            clients = [RawClient(srv.port) for _ in range(3)]
            # three clients interleave their slices of the stream; each sends in bursts
            for start in range(0, len(stream), 300):
                for c, sock in enumerate(clients):
                    part = stream[start + c * 100:start + (c + 1) * 100]
                    sock.send(b"".join(encode_command(*cmd) for cmd in part))
                for c, sock in enumerate(clients):
                    sock.replies(len(stream[start + c * 100:start + (c + 1) * 100]))
            outputs.append([bytes(sock.raw) for sock in clients])
            tables.append(srv.items())
            stats = srv.stats()
            if batching:
                assert stats["engine_batches"] < stats["total_commands_processed"] / 2
            for sock in clients:
                sock.close()
        finally:
            srv.stop()
    assert data and outputs[0] == outputs[1] and tables[0] == tables[1]


def test_pipeline_matches_a_dict_model(r):
    model: dict[bytes, bytes] = {}
    pipe = r.pipeline(transaction=False)
    expected = []
    rng = random.Random(3)
    for _ in range(2000):
        k = b"k%d" % rng.randrange(40)
        if rng.random() < 0.5:
            v = b"v%d" % rng.randrange(1000)
            pipe.set(k, v)
            model[k] = v
            expected.append(True)
        elif rng.random() < 0.8:
            pipe.get(k)
            expected.append(model.get(k))
        else:
            pipe.delete(k)
            expected.append(int(model.pop(k, None) is not None))
    assert pipe.execute() == expected
    assert r.dbsize() == len(model)


# -- the appliance ------------------------------------------------------------------------------
def test_stats_are_registered_with_the_appliance(server):
    stats = server.on_loop(lambda: server.appliance.frontend_stats())["resp"]
    assert stats["port"] == server.port and "total_commands_processed" in stats


def test_engine_reload_between_commands_is_followed(server):
    r = client(server.port)
    r.flushall()
    r.set("survivor", "yes")
    old = server.engine
    assert server.on_loop(server.appliance.reload) == 1
    assert server.engine is not old
    assert r.get("survivor") == b"yes"
    r.set("after", "1")
    assert server.on_loop(lambda: server.appliance.engine.get(b"after")) == b"1"
    r.close()


def test_integer_value_engines_speak_decimal():
    srv = PynqServer(geometry=Geometry(value_width=64, rows=64), value_kind="int")
    try:
        r = client(srv.port)
        assert r.set("n", "18446744073709551615") is True
        assert r.get("n") == b"18446744073709551615"
        assert r.mset({"a": "1", "b": "2"}) is True
        assert r.mget("a", "b", "c") == [b"1", b"2", None]
        assert "integer" in error_of(r.set, "n", "abc")
        assert "integer" in error_of(r.set, "n", "18446744073709551616")
        r.close()
    finally:
        srv.stop()


# -- limits -------------------------------------------------------------------------------------
def test_max_clients():
    srv = PynqServer(RespConfig(max_clients=2))
    try:
        first, second = RawClient(srv.port), RawClient(srv.port)
        assert first.call("PING") == b"PONG" and second.call("PING") == b"PONG"
        assert exchange(srv.port, b"PING\r\n") == b"-ERR max number of clients reached\r\n"
        assert srv.stats()["rejected_connections"] == 1
        first.close()
        deadline = time.monotonic() + 5
        while srv.stats()["connected_clients"] > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert exchange(srv.port, b"PING\r\n") == b"+PONG\r\n"
        second.close()
    finally:
        srv.stop()


def test_bulk_length_and_query_buffer_limits():
    srv = PynqServer(RespConfig(max_bulk_len=1000, max_query_buffer=64 * 1024))
    try:
        assert exchange(srv.port, encode_command("ECHO", b"x" * 1000)) == b"$1000\r\n" + b"x" * 1000 + b"\r\n"
        assert exchange(srv.port, encode_command("ECHO", b"x" * 1001)) == \
            b"-ERR Protocol error: invalid bulk length\r\n"
        # many arguments, each within limits, but more than the client may buffer
        big = encode_command("MGET", *([b"k" * 30] * 4000))
        assert exchange(srv.port, big) in (b"", b"<RESET>")
        assert srv.stats()["closed_query_buffer_limit"] == 1
        assert exchange(srv.port, b"PING\r\n") == b"+PONG\r\n"
        assert srv.stats()["protocol_errors"] == 1
    finally:
        srv.stop()


def test_idle_and_half_written_commands_are_closed():
    srv = PynqServer(RespConfig(idle_timeout=0.3, command_timeout=0.3))
    try:
        idle = RawClient(srv.port)
        assert idle.call("PING") == b"PONG"
        assert idle.closed(timeout=5)
        half = socket.create_connection((HOST, srv.port), timeout=5)
        half.sendall(b"*2\r\n$3\r\nGET\r\n$5\r\nab")
        assert half.recv(100) == b""  # closed without a reply
        stats = srv.stats()
        assert stats["closed_idle_clients"] + stats["closed_command_timeout"] == 2
        busy = RawClient(srv.port)
        for _ in range(8):  # a client that keeps talking stays
            assert busy.call("PING") == b"PONG"
            time.sleep(0.1)
        busy.close()
    finally:
        srv.stop()


def test_command_timeout_alone_closes_only_stuck_commands():
    srv = PynqServer(RespConfig(command_timeout=0.3))
    try:
        stuck = socket.create_connection((HOST, srv.port), timeout=5)
        stuck.sendall(b"*1\r\n$4\r\nPI")
        quiet = RawClient(srv.port)
        assert quiet.call("PING") == b"PONG"
        assert stuck.recv(100) == b""
        assert not quiet.closed(timeout=0.8)
        assert quiet.call("PING") == b"PONG"
        assert srv.stats()["closed_command_timeout"] == 1
        quiet.close()
        stuck.close()
    finally:
        srv.stop()


def test_a_client_that_does_not_read_is_not_read_from():
    srv = PynqServer(RespConfig(output_high_water=64 * 1024))
    try:
        lazy = socket.create_connection((HOST, srv.port), timeout=5)
        lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        lazy.setblocking(False)
        request = encode_command("ECHO", b"x" * 4000) * 50
        sent = 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                sent += lazy.send(request)
            except BlockingIOError:
                time.sleep(0.01)
        # the server stopped reading: what it took is bounded by its buffers, not by our sending
        assert sent < 40 * 1024 * 1024
        other = RawClient(srv.port)
        assert other.call("PING") == b"PONG"  # everyone else is served meanwhile
        other.close()
        lazy.close()
    finally:
        srv.stop()
