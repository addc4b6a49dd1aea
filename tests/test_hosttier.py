"""The host tier (pynq_kv/hosttier.py, docs/hosttier.md) against Debian's real redis-server:
the private child's life (AOF, appendfsync, no orphans, the data dir lock), connecting to a
Redis by URL (and refusing what is not one), restore (counts by reason, hottest keys first),
the rules file, and an appliance refilled from Redis on reload."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from pynq_kv import KVEngine
from pynq_kv.appliance import Appliance
from pynq_kv.hosttier import (
    HostTier,
    HostTierError,
    HostTierSettings,
    load_rules,
    restore_engine,
    save_rules,
)
from pynq_kv.rules import Rule, Ternary

pytestmark = pytest.mark.timeout(60)

redis = pytest.importorskip("redis")
if not __import__("shutil").which("redis-server"):
    pytest.skip("redis-server is not installed (apt-get install redis-server)",
                allow_module_level=True)

# 144-bit keys hold 17 bytes, 64-bit values 7 bytes; 2 ways x 8 rows + 2 stash = 18 entries.
SMALL = {"key_width": 144, "value_width": 64, "ways": 2, "rows": 8, "stash": 2, "rules": 8}


def running(pid: int) -> bool:
    """The process exists and is no zombie."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[HostTier]:
    opened = HostTier.open(HostTierSettings(tmp_path / "data"))
    yield opened
    opened.close()


@pytest.fixture
def client(tier: HostTier) -> Iterator["redis.Redis"]:
    c = tier.client()
    yield c
    c.close()


# -- the private redis-server ------------------------------------------------------------------


def test_child_starts_with_aof_and_the_fsync_policy_then_stops(tmp_path):
    data = tmp_path / "data"
    tier = HostTier.open(HostTierSettings(data, appendfsync="always"))
    pid = tier.pid
    assert pid is not None and running(pid)
    assert tier.unix_path == str(data / "redis.sock") and tier.handshake() == []
    assert tier.describe() == f"private redis-server {tier.version}, AOF always, data in {data}"
    c = tier.client()
    assert c.config_get("appendfsync") == {"appendfsync": "always"}
    assert c.config_get("appendonly") == {"appendonly": "yes"}
    assert c.config_get("port") == {"port": "0"}  # no TCP port
    c.set(b"k", b"v")
    c.close()
    assert list((data / "appendonlydir").glob("*.incr.aof"))
    assert data.stat().st_mode & 0o077 == 0  # a new data dir is the user's alone
    tier.close()
    assert not running(pid) and not (data / "redis.sock").exists()
    tier.close()  # idempotent


def test_async_client_reaches_the_same_redis(tier, client):
    client.set(b"k", b"v")

    async def read() -> bytes:
        c = tier.async_client()
        try:
            return await c.get(b"k")
        finally:
            await c.aclose()

    assert asyncio.run(read()) == b"v"


def test_data_survives_close_and_reopen(tmp_path):
    settings = HostTierSettings(tmp_path / "data", appendfsync="always")
    tier = HostTier.open(settings)
    c = tier.client()
    c.mset({b"a": b"1", b"b": b"2"})
    c.rpush(b"list", b"x", b"y")
    c.close()
    tier.close()
    tier = HostTier.open(settings)
    try:
        c = tier.client()
        assert c.mget([b"a", b"b"]) == [b"1", b"2"] and c.lrange(b"list", 0, -1) == [b"x", b"y"]
        c.close()
    finally:
        tier.close()


def test_parent_killed_leaves_no_redis_server_running(tmp_path):
    data = tmp_path / "data"
    script = ("import sys, time\nfrom pathlib import Path\n"
              "from pynq_kv.hosttier import HostTier, HostTierSettings\n"
              f"t = HostTier.open(HostTierSettings(Path({str(data)!r})))\n"
              "print(t.pid, flush=True)\ntime.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert running(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(child), "redis-server outlived its parent"
    finally:
        parent.kill()
        parent.wait()
    # The lock goes with both processes. A descendant of redis-server (an AOF rewrite's fork
    # at its start, say) may hold it a moment longer: make test once found it still held.
    deadline = time.monotonic() + 10
    while True:
        try:
            HostTier.open(HostTierSettings(data)).close()
            break
        except HostTierError:
            assert time.monotonic() < deadline, "the data dir stayed locked after its serve died"
            time.sleep(0.05)


def test_missing_binary_says_how_to_get_one(tmp_path):
    with pytest.raises(HostTierError) as err:
        HostTier.open(HostTierSettings(tmp_path / "data", redis_server="no-such-redis-server"))
    text = str(err.value)
    assert "'no-such-redis-server' not found" in text
    assert "apt-get install redis-server" in text and "--redis-url" in text and "--no-store" in text
    HostTier.open(HostTierSettings(tmp_path / "data")).close()  # nothing was left locked


def test_a_child_that_fails_to_start_shows_its_log(tmp_path):
    data = tmp_path / "data"
    (data / "appendonlydir").mkdir(parents=True)
    (data / "appendonlydir" / "appendonly.aof.manifest").write_text("not a manifest\n")
    with pytest.raises(HostTierError) as err:
        HostTier.open(HostTierSettings(data))
    text = str(err.value)
    assert "exited with status" in text and "redis.log" in text
    assert "manifest" in text.lower()  # Redis' own complaint, from the log's tail


def test_bad_appendfsync_is_refused():
    with pytest.raises(HostTierError, match="appendfsync must be one of always, everysec, no"):
        HostTierSettings(Path("x"), appendfsync="sometimes")


def test_second_serve_on_one_data_dir_is_refused(tier, tmp_path):
    with pytest.raises(HostTierError) as err:
        HostTier.open(HostTierSettings(tmp_path / "data"))
    assert f"in use by another pynq-kv serve (pid {os.getpid()})" in str(err.value)
    assert "--data-dir" in str(err.value)
    assert tier.client().ping()  # the first one is untouched


def test_long_data_dir_puts_the_socket_in_a_short_folder(tmp_path):
    data = tmp_path / ("d" * 60) / ("e" * 60)
    tier = HostTier.open(HostTierSettings(data))
    try:
        assert tier.unix_path is not None and len(tier.unix_path) < 100
        assert not tier.unix_path.startswith(str(data))
        assert tier.client().ping()
        folder = Path(tier.unix_path).parent
    finally:
        tier.close()
    assert not folder.exists()
    assert list((data / "appendonlydir").glob("*.aof"))  # the data still lives in the data dir


# -- an existing Redis by URL --------------------------------------------------------------------


def test_url_with_password_and_db(tier, client, tmp_path):
    client.config_set("requirepass", "s3cret")
    url = f"unix://:s3cret@{tier.unix_path}?db=2"
    other = HostTier.open(HostTierSettings(tmp_path / "other", redis_url=url))
    try:
        assert other.pid is None and other.unix_path == tier.unix_path and other.db == 2
        assert other.handshake() == [[b"AUTH", b"s3cret"], [b"SELECT", b"2"]]
        assert other.describe() == f"redis {tier.version} at unix://:***@{tier.unix_path}?db=2"
        c = other.client()
        c.set(b"where", b"db2")
        c.close()
        assert client.execute_command("AUTH", "s3cret") and client.execute_command("SELECT", 2)
        assert client.get(b"where") == b"db2"

        class Raw(asyncio.Protocol):
            def __init__(self) -> None:
                self.data = b""
                self.done = asyncio.get_running_loop().create_future()

            def data_received(self, data: bytes) -> None:
                self.data += data
                if self.data.count(b"\r\n") >= 3 and not self.done.done():
                    self.done.set_result(self.data)

        async def talk() -> bytes:
            transport, proto = await other.open_link(Raw)
            for command in other.handshake() + [[b"GET", b"where"]]:
                transport.write(b"*%d\r\n" % len(command) + b"".join(
                    b"$%d\r\n%s\r\n" % (len(a), a) for a in command))
            try:
                return await asyncio.wait_for(proto.done, 5)
            finally:
                transport.close()

        assert asyncio.run(talk()) == b"+OK\r\n+OK\r\n$3\r\ndb2\r\n"
    finally:
        other.close()
    with pytest.raises(HostTierError, match="refused the credentials"):
        HostTier.open(HostTierSettings(tmp_path / "other",
                                       redis_url=f"unix://:wrong@{tier.unix_path}"))
    client.config_set("requirepass", "")
    assert tier.client().ping()  # closing a URL tier leaves that Redis running


def test_url_that_is_not_redis_is_named_in_the_error(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def garbage() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
            conn.close()

    threading.Thread(target=garbage, daemon=True).start()
    url = f"redis://127.0.0.1:{port}"
    try:
        with pytest.raises(HostTierError) as err:
            HostTier.open(HostTierSettings(tmp_path / "data", redis_url=url))
        assert f"the Redis at {url} does not answer as a Redis server" in str(err.value)
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        listener.close()
    with socket.socket() as closed:  # bound, not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"redis://127.0.0.1:{closed.getsockname()[1]}"
        with pytest.raises(HostTierError, match=f"cannot connect to the Redis at {url}"):
            HostTier.open(HostTierSettings(tmp_path / "data", redis_url=url))
    with pytest.raises(HostTierError, match="bad --redis-url"):
        HostTier.open(HostTierSettings(tmp_path / "data", redis_url="http://localhost"))


# -- restore -------------------------------------------------------------------------------------


def test_restore_loads_what_fits_and_counts_the_rest(client):
    client.mset({b"a": b"1", b"b": b"22", b"k" * 17: b"seven77", b"": b"empty"})
    client.set(b"k" * 18, b"x")  # key too long for 144 bits
    client.set(b"long-value", b"12345678")  # value too long for 64 bits
    client.set(b"ttl", b"v", ex=100)
    client.rpush(b"list", b"x")
    client.hset(b"hash", b"f", b"v")
    engine = KVEngine(**SMALL)
    report = restore_engine(engine, client, progress=False)
    assert (report.scanned, report.loaded, report.too_long, report.ttl, report.not_string,
            report.full, report.gone, report.not_integer) == (9, 4, 2, 1, 2, 0, 0, 0)
    assert report.skipped == 5 and report.seconds > 0 and report.rate > 0
    assert dict(engine.items()) == {b"a": b"1", b"b": b"22", b"k" * 17: b"seven77", b"": b"empty"}


def test_restore_into_an_integer_engine_stores_what_resp_set_would(client):
    client.mset({b"n": b"42", b"zero": b"0", b"text": b"abc", b"lead": b"007", b"neg": b"-1"})
    engine = KVEngine(value_kind="int", **SMALL)
    report = restore_engine(engine, client, progress=False)
    assert (report.loaded, report.not_integer) == (2, 3)
    assert dict(engine.items()) == {b"n": 42, b"zero": 0}


def test_restore_logs_one_line(client, caplog):
    client.set(b"a", b"1")
    with caplog.at_level("INFO", logger="pynq_kv.hosttier"):
        restore_engine(KVEngine(**SMALL), client, progress=False)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith("restored 1 of 1 keys from Redis in ")
    assert "keys/s scanned" in lines[0] and "0 with a TTL" in lines[0]


@pytest.mark.parametrize("batch", [1000, 4])
def test_restore_loads_the_most_recently_used_keys_first(client, monkeypatch, batch):
    import pynq_kv.hosttier as hosttier

    monkeypatch.setattr(hosttier, "SCAN_COUNT", batch)
    every = [b"key%03d" % i for i in range(60)]  # more than the 18 entries of SMALL
    client.mset({k: b"v" for k in every})
    time.sleep(2.2)  # OBJECT IDLETIME counts whole seconds
    hot = every[5:60:6]  # ten keys spread over the SCAN order
    for key in hot:
        client.get(key)
    engine = KVEngine(**SMALL)
    report = restore_engine(engine, client, progress=False)
    loaded = {k for k, _ in engine.items()}
    assert set(hot) <= loaded
    assert report.loaded == len(loaded) < 60 and report.full == 60 - report.loaded
    assert report.scanned == 60


# -- rules ---------------------------------------------------------------------------------------


def _rule(value: bytes, priority: int) -> Rule:
    return Rule((Ternary(0x0A << 136, 0xFF << 136),), priority, value, name="ten")


def test_rules_round_trip_through_the_file(tmp_path):
    engine = KVEngine(**SMALL)
    first = engine.add_rule(_rule(b"a", 5))
    second = engine.add_rule(_rule(b"b", 7))
    engine.remove_rule(first)
    path = tmp_path / "rules.json"
    assert load_rules(path, engine) == 0 and engine.rules()  # no file yet: nothing changes
    save_rules(path, engine)
    other = KVEngine(**SMALL)
    other.add_rule(_rule(b"gone", 1))  # replaced by the file's
    assert load_rules(path, other) == 1
    assert other.rules() == engine.rules() and list(other.rules()) == [second]
    assert other.rule_entries(second) == engine.rule_entries(second)
    assert other.add_rule(_rule(b"c", 1)) == second + 1  # ids keep counting
    wide = KVEngine(**{**SMALL, "key_width": 288})
    with pytest.raises(HostTierError, match="rules for 144-bit keys and bytes values"):
        load_rules(path, wide)
    path.write_text("{")
    with pytest.raises(HostTierError, match="not a readable rules file"):
        load_rules(path, other)
    assert list(other.rules()) == [second, second + 1]  # a refused file changes nothing


def test_appliance_restores_saves_rules_and_refills_on_reload(tier, client):
    client.mset({b"a": b"1", b"b": b"2"})
    client.set(b"t", b"x", ex=100)
    appliance = Appliance(lambda: KVEngine(**SMALL), host_tier=tier)
    assert appliance.restored is not None and appliance.restored.loaded == 2
    assert dict(appliance.engine.items()) == {b"a": b"1", b"b": b"2"}
    rule_id = appliance.engine.add_rule(_rule(b"r", 3))
    appliance.rules_changed()
    assert tier.rules_path.exists()
    client.flushall()  # another client: the rules are not Redis data
    client.set(b"c", b"3")
    old = appliance.engine
    assert appliance.reload() == 1
    assert appliance.engine is not old
    assert dict(appliance.engine.items()) == {b"c": b"3"}
    assert list(appliance.engine.rules()) == [rule_id]
    with pytest.raises(ValueError, match="not both"):
        Appliance(lambda: KVEngine(**SMALL), host_tier=tier, state_path=Path("x"))


def test_admin_rule_routes_save_the_rules_file(tier):
    from api_support import AUTH, client_for

    appliance = Appliance(lambda: KVEngine(rows=64, rules=16), host_tier=tier)
    rule = {"priority": 3, "value": "v", "ternary": [{"match": "0x1", "mask": "0x1"}]}
    with client_for(appliance) as http:
        made = http.post("/v1/rules", json=rule, headers=AUTH)
        assert made.status_code == 201
        fresh = KVEngine(rows=64, rules=16)
        assert load_rules(tier.rules_path, fresh) == 1 and list(fresh.rules()) == [made.json()["id"]]
        assert http.delete(f"/v1/rules/{made.json()['id']}", headers=AUTH).status_code == 204
        assert load_rules(tier.rules_path, fresh) == 0 and fresh.rules() == {}
        assert http.get("/v1/overlay").json()["host_tier"] == tier.describe()


# -- pynq-kv serve with a host tier --------------------------------------------------------------


def _serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pynq_kv", "--backend", "model", "--rows", "64",
                             "serve", "--resp-port", "0", "--disable", "udp", "--disable",
                             "admin", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_serve_fills_the_engine_from_the_private_redis_and_stops_it(tmp_path):
    data = tmp_path / "data"
    tier = HostTier.open(HostTierSettings(data))
    c = tier.client()
    c.set(b"greeting", b"hello")
    c.close()
    tier.close()
    proc = _serve("--data-dir", str(data), "--appendfsync", "always")
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "host tier:" in line:
                break
        banner = "".join(lines)
        assert f"host tier: private redis-server {tier.version}, AOF always, data in {data}; " \
               f"wildcard rules in {data / 'rules.json'}" in banner, banner
        assert "restored 1 of 1 keys from Redis" in banner and "1 entries loaded from Redis" in banner
        port = int(banner.split("Redis (RESP2/RESP3) on tcp://127.0.0.1:")[1].split()[0])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"*2\r\n$3\r\nGET\r\n$8\r\ngreeting\r\n")
            assert sock.recv(64) == b"$5\r\nhello\r\n"
        with pytest.raises(HostTierError, match="in use by another pynq-kv serve"):
            HostTier.open(HostTierSettings(data))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
    HostTier.open(HostTierSettings(data)).close()  # serve's redis-server is gone with it


def test_serve_refuses_state_with_a_host_tier(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pynq_kv", "--state", str(tmp_path / "s.npz"),
                             "serve", "--data-dir", str(tmp_path / "data")],
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    assert "--state is a snapshot file for memory-only mode (--no-store)" in result.stderr


def test_reload_with_redis_gone_keeps_the_old_engine(tier, client):
    client.set(b"a", b"1")
    appliance = Appliance(lambda: KVEngine(**SMALL), host_tier=tier)
    old = appliance.engine
    assert tier.pid is not None
    os.kill(tier.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while running(tier.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    with pytest.raises(HostTierError, match="cannot restore from Redis"):
        appliance.reload()
    assert appliance.engine is old and old.get(b"a") == b"1"


def test_restore_without_scripting_or_idle_times_still_counts_right(tier, client, tmp_path):
    client.mset({b"a": b"1", b"b": b"2"})
    client.set(b"t", b"x", ex=100)
    client.rpush(b"l", b"x")
    client.execute_command("ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "+@all",
                           "-@scripting")
    client.config_set("maxmemory-policy", "allkeys-lfu")  # OBJECT IDLETIME is refused
    url = f"unix://noscripts:pw@{tier.unix_path}"
    other = HostTier.open(HostTierSettings(tmp_path / "other", redis_url=url))
    try:
        limited = other.client()
        with pytest.raises(redis.ResponseError, match="no permissions"):
            limited.eval("return 1", 0)
        engine = KVEngine(**SMALL)
        report = restore_engine(engine, limited, progress=False)
        limited.close()
    finally:
        other.close()
        client.config_set("maxmemory-policy", "noeviction")
    assert (report.scanned, report.loaded, report.ttl, report.not_string) == (4, 2, 1, 1)
    assert dict(engine.items()) == {b"a": b"1", b"b": b"2"}
