"""Every front-end writes through the host tier (issue 15 item 6): the Tier's awaitable API,
the memcached UDP server and the admin REST API, each against a real redis-server on loopback.

For each: a write through it is visible to a plain redis-py client on Redis; a key written
straight into Redis is read through it (and filled into the engine); a key changed in Redis
after it was filled is read anew (invalidation); with Redis down the request fails clearly and
nothing is acknowledged.
"""

from __future__ import annotations

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
