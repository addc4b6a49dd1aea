"""Redis behaviour through redis-py, RESP2 and RESP3, against pynq-kv *and* a real redis-server.

Every test here runs against both servers with the same assertions: passing against Debian's
redis-server shows the test describes Redis' own behaviour, passing against pynq-kv shows we
behave the same. Keys and values stay within the hardware format (35-byte keys, 31-byte
values) so that the two can agree; pynq-kv-only behaviour is in test_resp_kv.py. The raw-bytes
cases at the end compare the two servers' replies byte for byte.
"""

from __future__ import annotations

import socket

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from resp_helpers import HAVE_REDIS, HOST, PynqServer, RedisServer, encode_command, exchange

pytestmark = pytest.mark.timeout(120)

KINDS = ["pynq-kv", "redis-server"]


def client(port: int, **kwargs) -> redis.Redis:
    """redis-py without retries: an AuthenticationError is a ConnectionError, which it retries."""
    return redis.Redis(host=HOST, port=port, socket_timeout=10, retry=Retry(NoBackoff(), 0), **kwargs)


@pytest.fixture(scope="module")
def servers():
    started: dict[str, object] = {}

    def get(kind: str, password: bool = False):
        key = (kind, password)
        if key not in started:
            if kind == "redis-server":
                if not HAVE_REDIS:
                    pytest.skip("redis-server is not installed")
                started[key] = RedisServer(*(["--requirepass", "sesame"] if password else []))
            else:
                from pynq_kv.serve.resp import RespConfig
                started[key] = PynqServer(RespConfig(requirepass="sesame" if password else None))
        return started[key]

    yield get
    for server in started.values():
        server.stop()


@pytest.fixture(params=[(kind, proto) for kind in KINDS for proto in (2, 3)],
                ids=lambda p: f"{p[0]}-resp{p[1]}")
def r(request, servers):
    kind, proto = request.param
    server = servers(kind)
    conn = client(server.port, protocol=proto)
    conn.flushall()
    yield conn
    conn.close()


@pytest.fixture(params=KINDS)
def port(request, servers):
    server = servers(request.param)
    conn = client(server.port)
    conn.flushall()
    conn.close()
    return server.port


def raw_call(r: redis.Redis, *args):
    """A command's reply as the parser gives it, without redis-py's response callbacks."""
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def error_of(fn, *args) -> str:
    with pytest.raises(redis.ResponseError) as info:
        fn(*args)
    return str(info.value)


# -- connection commands ------------------------------------------------------------------------
def test_ping_and_echo(r):
    assert r.ping() is True
    assert r.echo(b"\x00bin\r\nary") == b"\x00bin\r\nary"
    assert error_of(r.execute_command, "PING", "a", "b") == "wrong number of arguments for 'ping' command"


def test_hello_reports_protocol_and_role(r):
    hello = r.execute_command("HELLO")
    hello = {k.decode() if isinstance(k, bytes) else k: v for k, v in
             (hello.items() if isinstance(hello, dict) else zip(hello[::2], hello[1::2]))}
    assert hello["proto"] == r.connection_pool.connection_kwargs.get("protocol", 2)
    assert hello["mode"] == b"standalone" and hello["role"] == b"master"
    assert isinstance(hello["id"], int)
    assert error_of(r.execute_command, "HELLO", "4") == "NOPROTO unsupported protocol version"
    assert error_of(r.execute_command, "HELLO", "x") == "Protocol version is not an integer or out of range"
    assert error_of(r.execute_command, "HELLO", "2", "FOO") == "Syntax error in HELLO option 'FOO'"


def test_client_name_id_info(r):
    assert r.client_getname() is None
    assert r.client_setname("worker-1") is True
    assert r.client_getname() in ("worker-1", b"worker-1")
    assert error_of(r.client_setname, "has space") == \
        "Client names cannot contain spaces, newlines or special characters."
    client_id = r.client_id()
    assert isinstance(client_id, int) and client_id > 0
    info = r.client_info()
    assert int(info["id"]) == client_id and info["name"] == "worker-1"
    assert int(info["db"]) == 0 and "addr" in info
    assert error_of(r.execute_command, "CLIENT", "NOPE") == "unknown subcommand 'NOPE'. Try CLIENT HELP."
    assert error_of(r.execute_command, "CLIENT", "SETNAME") == \
        "wrong number of arguments for 'client|setname' command"


def test_select_only_database_zero_is_common_ground(r):
    assert r.execute_command("SELECT", "0") in (True, b"OK")
    assert error_of(r.execute_command, "SELECT", "x") == "value is not an integer or out of range"
    assert error_of(r.execute_command, "SELECT", "-1") == "DB index is out of range"
    assert error_of(r.execute_command, "SELECT", "100000") == "DB index is out of range"


def test_auth_without_password_configured(r):
    with pytest.raises(redis.AuthenticationError, match="^AUTH <password> called without any "
                       "password configured for the default user"):
        r.execute_command("AUTH", "x")
    with pytest.raises(redis.AuthenticationError, match="^invalid username-password pair"):
        r.execute_command("AUTH", "someone", "x")
    assert r.execute_command("AUTH", "default", "anything") in (True, b"OK")
    assert error_of(r.execute_command, "AUTH", "a", "b", "c") == "syntax error"


def test_unknown_command_and_arity_errors(r):
    assert error_of(r.execute_command, "NOSUCH", "a", "b") == \
        "unknown command 'NOSUCH', with args beginning with: 'a' 'b' "
    assert error_of(r.execute_command, "GET") == "wrong number of arguments for 'get' command"
    assert error_of(r.execute_command, "GET", "a", "b") == "wrong number of arguments for 'get' command"
    assert error_of(r.execute_command, "MSET", "a") == "wrong number of arguments for 'mset' command"
    assert error_of(r.execute_command, "MSET", "a", "1", "b") == \
        "wrong number of arguments for 'mset' command"
    assert error_of(r.execute_command, "DEL") == "wrong number of arguments for 'del' command"
    assert error_of(r.execute_command, "DBSIZE", "x") == "wrong number of arguments for 'dbsize' command"


# -- strings ------------------------------------------------------------------------------------
def test_set_get_binary_safe(r):
    for key, value in [(b"k", b"v"), (b"", b""), (b"\x00\r\n\xff", b"\r\n\x00"), (b"a" * 35, b"z" * 31)]:
        assert r.set(key, value) is True
        assert r.get(key) == value
    assert r.get("missing") is None


def test_set_options_nx_xx_get(r):
    assert r.set("k", "1", nx=True) is True
    assert r.set("k", "2", nx=True) is None
    assert r.get("k") == b"1"
    assert r.set("k", "3", xx=True) is True
    assert r.set("other", "3", xx=True) is None
    assert r.exists("other") == 0
    assert r.set("k", "4", get=True) == b"3"
    assert r.set("new", "5", get=True) is None
    assert r.get("new") == b"5"
    assert r.set("k", "6", nx=True, get=True) == b"4"  # NX refused: GET still answers
    assert r.get("k") == b"4"
    assert r.execute_command("SET", "k", "7", "KEEPTTL") in (True, b"OK")
    assert r.execute_command("SET", "k", "8", "nx", "NX") is None
    assert error_of(r.execute_command, "SET", "k", "v", "NX", "XX") == "syntax error"
    assert error_of(r.execute_command, "SET", "k", "v", "BOGUS") == "syntax error"
    assert error_of(r.execute_command, "SET", "k", "v", "EX") == "syntax error"
    assert error_of(r.execute_command, "SET", "k", "v", "EX", "1", "PX", "1") == "syntax error"
    assert error_of(r.execute_command, "SET", "k", "v", "EX", "soon") == \
        "value is not an integer or out of range"
    assert error_of(r.execute_command, "SET", "k", "v", "EX", "0") == "invalid expire time in 'set' command"
    assert error_of(r.execute_command, "SET", "k", "v", "PX", "-5") == "invalid expire time in 'set' command"
    assert r.get("k") == b"7"


def test_mset_mget_exists_del_dbsize(r):
    assert r.mset({"a": "1", "b": "2", "c": "3"}) is True
    assert r.mget("a", "nope", "c") == [b"1", None, b"3"]
    assert r.exists("a", "a", "nope", "b") == 3
    assert r.dbsize() == 3
    assert r.delete("a", "a", "nope") == 1
    assert r.dbsize() == 2
    assert r.execute_command("MSET", "x", "1", "x", "2") in (True, b"OK")
    assert r.get("x") == b"2"


def test_flushdb_and_flushall(r):
    r.mset({"a": "1", "b": "2"})
    assert r.flushdb() is True
    assert r.dbsize() == 0
    r.set("a", "1")
    assert r.execute_command("FLUSHALL", "ASYNC") in (True, b"OK")
    assert r.dbsize() == 0
    assert error_of(r.execute_command, "FLUSHDB", "LATER") == "syntax error"
    assert error_of(r.execute_command, "FLUSHALL", "SYNC", "ASYNC") == "syntax error"


def test_pipeline_replies_in_order_with_errors_in_place(r):
    pipe = r.pipeline(transaction=False)
    for i in range(200):
        pipe.set(f"key:{i}", f"v{i}")
        pipe.get(f"key:{i - 1}")
        if i % 50 == 0:
            pipe.execute_command("NOSUCH")
            pipe.delete(f"key:{i}")
    results = pipe.execute(raise_on_error=False)
    expected = []
    stored: dict[str, bytes] = {}
    for i in range(200):
        stored[f"key:{i}"] = f"v{i}".encode()
        expected += [True, stored.get(f"key:{i - 1}")]
        if i % 50 == 0:
            expected += ["error", 1]
            del stored[f"key:{i}"]
    assert len(results) == len(expected)
    for got, want in zip(results, expected):
        if want == "error":
            assert isinstance(got, redis.ResponseError)
        else:
            assert got == want
    assert r.dbsize() == len(stored)


def test_many_clients_share_the_table(r):
    pool_kwargs = r.connection_pool.connection_kwargs
    others = [client(pool_kwargs["port"], protocol=pool_kwargs.get("protocol", 2)) for _ in range(8)]
    try:
        for i, other in enumerate(others):
            other.set(f"c{i}", str(i))
        assert sorted(r.mget([f"c{i}" for i in range(8)])) == sorted(str(i).encode() for i in range(8))
    finally:
        for other in others:
            other.close()


# -- server commands ----------------------------------------------------------------------------
def test_info_sections(r):
    r.set("a", "1")
    info = r.info()
    assert info["redis_mode"] == "standalone"
    assert info["connected_clients"] >= 1
    assert info["total_connections_received"] >= 1
    assert info["db0"]["keys"] == 1
    assert info["role"] == "master"
    assert "redis_version" in r.info("server")
    assert set(r.info("keyspace")) == {"db0"}
    assert r.info("nosuchsection") == {}
    r.flushall()
    assert r.info("keyspace") == {}


def test_config_get(r):
    got = r.config_get("save")
    assert got == {"save": ""}
    got = r.config_get("appendonly")
    assert got == {"appendonly": "no"}
    assert int(r.config_get("maxclients")["maxclients"]) > 0
    assert r.config_get("no-such-parameter") == {}
    assert error_of(r.execute_command, "CONFIG", "GET") == "wrong number of arguments for 'config|get' command"
    assert error_of(r.execute_command, "CONFIG", "NOPE") == "unknown subcommand 'NOPE'. Try CONFIG HELP."


def test_command_introspection(r):
    assert r.command_count() > 10
    info = raw_call(r, "COMMAND", "INFO", "get", "set", "mset", "nosuch")
    assert info[3] is None
    get, set_, mset = info[:3]
    assert (get[0], get[1]) == (b"get", 2) and (get[3], get[4], get[5]) == (1, 1, 1)
    assert (set_[0], set_[1]) == (b"set", -3)
    assert (mset[0], mset[1], mset[3], mset[4], mset[5]) == (b"mset", -3, 1, -1, 2)
    assert b"readonly" in get[2] and b"write" in set_[2]
    docs = raw_call(r, "COMMAND", "DOCS", "get")
    docs = docs if isinstance(docs, dict) else dict(zip(docs[::2], docs[1::2]))
    assert list(docs) == [b"get"]
    assert error_of(raw_call, r, "COMMAND", "NOPE") == "unknown subcommand 'NOPE'. Try COMMAND HELP."


def test_quit_closes_the_connection(port):
    with socket.create_connection((HOST, port), timeout=5) as sock:
        sock.sendall(encode_command("QUIT") + encode_command("PING"))
        data = b""
        while True:
            piece = sock.recv(100)
            if not piece:
                break
            data += piece
    assert data == b"+OK\r\n"


# -- authentication -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("proto", [2, 3])
def test_requirepass(servers, kind, proto):
    server = servers(kind, password=True)
    anonymous = client(server.port)
    with pytest.raises(redis.AuthenticationError):
        anonymous.get("k")
    with pytest.raises(redis.AuthenticationError):
        anonymous.execute_command("AUTH", "wrong")
    anonymous.close()
    with pytest.raises(redis.AuthenticationError):
        client(server.port, password="wrong", protocol=proto).ping()
    authed = client(server.port, password="sesame", protocol=proto)
    assert authed.set("k", "v") is True
    assert authed.get("k") == b"v"
    authed.close()


@pytest.mark.parametrize("kind", KINDS)
def test_requirepass_raw(servers, kind):
    port = servers(kind, password=True).port
    hello = b"-NOAUTH HELLO must be called with the client already authenticated"
    assert exchange(port, b"PING\r\nHELLO 3\r\nQUIT\r\n").startswith(
        b"-NOAUTH Authentication required.\r\n" + hello)
    assert exchange(port, b"NOSUCH\r\n") == \
        b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n"
    # before AUTH: at most 10 arguments and 16 KiB bulks; AUTH lifts the limits for what follows
    assert exchange(port, b"*11\r\n") == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    assert exchange(port, b"*1\r\n$16385\r\n") == b"-ERR Protocol error: unauthenticated bulk length\r\n"
    big = encode_command("ECHO", "x" * 20000)
    assert exchange(port, b"AUTH sesame\r\n" + big) == b"+OK\r\n" + b"$20000\r\n" + b"x" * 20000 + b"\r\n"
    assert exchange(port, b"HELLO 3 AUTH default sesame\r\nGET nope\r\n").endswith(b"_\r\n")


# -- raw bytes, compared byte for byte -----------------------------------------------------------
RAW_CASES = [
    # inline commands
    b"PING\r\n", b"PING\n", b"ping hello\r\n", b"\r\n\r\n   \r\nPING\r\n",
    b'ECHO "a b\\x41\\n"\r\n', b"ECHO 'it\\'s'\r\n", b'ECHO "x"y\r\n', b"ECHO 'x\r\n",
    b'"PING\r\n', b'ECHO ab"c d"\r\n', b'ECHO ab"c d"e\r\n', b"SET a 1\r\nGET a\r\nDEL a\r\nGET a\r\n", b"NOSUCH 1 2 3\r\n",
    b"GET\r\n", b"PING\r\nPING", b"PING\x00\r\n",
    # multibulk
    encode_command("PING") * 3, encode_command("ECHO", b"\r\n\x00"),
    encode_command("SET", "k", "v") + encode_command("GET", "k") + encode_command("MGET", "k", "x"),
    b"*0\r\nPING\r\n", b"*-1\r\nPING\r\n", b"*\r\n", b"*01\r\n", b"*x\r\n", b"*-0\r\n",
    b"*1\r\n+PING\r\n", b"*1\r\n:1\r\n", b"*1\r\n$-1\r\n", b"*1\r\n$01\r\n", b"*1\r\n$ 4\r\n",
    b"*1\r\n$4\r\nPINGxx" + encode_command("PING"), b"*1\rX$4\r\nPING\r\n", b"*1\r\n$4\rXPING\r\n",
    b"*2147483648\r\n", b"*99999999999999999999\r\n", b"*1\r\n$2147483648\r\n",
    b"*1\r\n\r\n", b"*2\r\n$4\r\nECHO\r\n$3\r\nab", encode_command("PING") + b"*1\r\n$x\r\n",
    b"*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nPING", b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$3\r\nDBSIZE\r\n",
    encode_command("NOSUCH", b"a\r\nb", b"\x00c"), encode_command(b"GE\x00T", "a"),
    encode_command("UNKNOWN", "a" * 100, "b" * 50, "c"), encode_command("x" * 200),
    encode_command("get", "k") + encode_command("Get", "k") + encode_command("gEt"),
    encode_command("EXISTS", "k", "k", "nope"), encode_command("SET", "k", "v", "nx", "GET"),
    # big lines without an end
    b"A" * (64 * 1024 + 10), b"*" + b"1" * (64 * 1024 + 10), b"*1\r\n$" + b"1" * (64 * 1024 + 10),
]


@pytest.mark.skipif(not HAVE_REDIS, reason="redis-server is not installed")
@pytest.mark.parametrize("data", RAW_CASES, ids=lambda d: repr(d[:40]))
def test_raw_bytes_identical(servers, data):
    replies = {}
    for kind in KINDS:
        port = servers(kind).port
        exchange(port, b"FLUSHALL\r\n")
        replies[kind] = exchange(port, data)
        exchange(port, b"FLUSHALL\r\n")
        replies[kind + " chunked"] = exchange(port, data, chunk=7) if len(data) < 4096 else replies[kind]
    assert replies["pynq-kv"] == replies["redis-server"]
    assert replies["pynq-kv chunked"] == replies["redis-server chunked"] == replies["redis-server"]
