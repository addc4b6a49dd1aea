"""The data plane's writes reach Redis: the change log drained into the host tier.

Memcached SETs and DELETEs that reach the engine's data plane (the model's software wire port,
and the virtual board's Ethernet port) change the table with no host involved; ChangeDrain
(pynq_kv/writeback.py) must write every one of them into Redis, keep the engine equal to Redis
for those keys, and resynchronize after an overflow.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path
from typing import Any

import pytest
import redis

from pynq_kv import Geometry, KVEngine
from pynq_kv.admission import DEFAULT_BUDGET
from pynq_kv.appliance import Appliance
from pynq_kv.hosttier import HostTier, HostTierSettings
from pynq_kv.model import ModelBackend
from pynq_kv.net import codec
from pynq_kv.serve.memcached.server import handle_datagram
from pynq_kv.tier import Tier
from pynq_kv.writeback import ChangeDrain
from resp_helpers import HAVE_REDIS, HOST, RedisServer, TcpRedis

pytestmark = pytest.mark.skipif(not HAVE_REDIS, reason="needs Debian's redis-server")

GEOMETRY = Geometry(key_width=288, value_width=256, ways=4, rows=1024, stash=8, rules=16)
HEADER = struct.pack(">HHHH", 1, 0, 1, 0)
SETX = struct.pack(">II", 0, 0)


def wire_set(key: bytes, value: bytes) -> bytes:
    return HEADER + codec.Request(codec.Opcode.SET, key=key, extras=SETX, value=value).encode()


def wire_delete(key: bytes) -> bytes:
    return HEADER + codec.delete_request(key).encode()


@pytest.fixture
def backing() -> Any:
    server = RedisServer()
    yield server
    server.stop()


def run_drained(engine: KVEngine, port: int, wire: Any) -> tuple[dict, ChangeDrain, dict]:
    """Run wire(engine) on a loop with a tier and a drain; return what Redis holds afterwards,
    the drain, and the engine's entries."""
    async def main() -> tuple[dict, ChangeDrain, dict]:
        appliance = Appliance(lambda: engine)
        tier = Tier(appliance, TcpRedis(port))
        await tier.start()
        appliance.tier = tier
        drain = tier.drain = ChangeDrain(appliance, tier, interval=0.001)
        drain.start()
        try:
            await wire(engine)
            for _ in range(500):  # until every drained record is answered
                await asyncio.sleep(0.002)
                if engine.changelog_stats().level == 0 and tier.main.pending == 0:
                    break
            await drain.close()
            await asyncio.sleep(0.01)
            entries = dict(engine.items())
        finally:
            await tier.close()
        client = redis.Redis(host=HOST, port=port)
        held = {key: client.get(key) for key in client.keys("*")}
        client.close()
        return held, drain, entries
    return asyncio.run(main())


def test_wire_sets_and_deletes_reach_redis(backing: RedisServer) -> None:
    engine = KVEngine(ModelBackend(GEOMETRY, changelog_depth=64), relocation=False)
    redis.Redis(host=HOST, port=backing.port).set(b"w2", b"in redis before")

    async def wire(engine: KVEngine) -> None:
        port = engine.data_plane()
        for i in range(40):
            handle_datagram(port, wire_set(b"w%d" % (i % 8), b"v%d" % i), budget=DEFAULT_BUDGET)
            if i % 10 == 9:
                handle_datagram(port, wire_delete(b"w%d" % (i % 3)), budget=DEFAULT_BUDGET)
            await asyncio.sleep(0)

    held, drain, entries = run_drained(engine, backing.port, wire)
    assert drain.drained == 44 and drain.errors == 0 and drain.gaps == 0
    assert held == entries  # Redis holds exactly what the wire left in the engine
    assert held[b"w7"] == b"v39" and b"w0" not in held


def test_overflow_resynchronizes_the_sets(backing: RedisServer) -> None:
    engine = KVEngine(ModelBackend(GEOMETRY, changelog_depth=4), relocation=False)

    async def wire(engine: KVEngine) -> None:
        port = engine.data_plane()
        payload = b"".join(codec.Request(codec.Opcode.SETQ, key=b"o%d" % i, extras=SETX,
                                         value=b"x%d" % i).encode() for i in range(12))
        handle_datagram(port, HEADER + payload, budget=DEFAULT_BUDGET)  # 12 changes, room for 4

    held, drain, entries = run_drained(engine, backing.port, wire)
    assert drain.resyncs == 1 and drain.gaps == 0  # the lost records came after the kept ones
    assert engine.changelog_stats().overflowed is False
    assert held == entries and len(held) == 12


def test_through_the_virtual_board(backing: RedisServer) -> None:
    """The Verilated kv_top: frames on its Ethernet port, the log read through its registers."""
    from pynq_kv.board import board_engine

    engine = board_engine(GEOMETRY, relocation=False)  # (test_changelog's build, cached)
    board = engine.backend.board

    async def wire(engine: KVEngine) -> None:
        for i in range(30):
            board.exchange(wire_set(b"b%d" % (i % 6), b"board%d" % i), 41000)
            if i % 7 == 6:
                board.exchange(wire_delete(b"b%d" % (i % 4)), 41000)
            await asyncio.sleep(0)

    try:
        held, drain, entries = run_drained(engine, backing.port, wire)
    finally:
        engine.close()
    assert drain.drained == 34 and drain.errors == 0 and drain.gaps == 0
    assert held == entries and held[b"b5"] == b"board29"


def test_a_key_the_data_plane_wrote_is_taken_out_again(tmp_path: Path) -> None:
    """The tier skips the engine delete for a key it knows the engine does not hold (taken out
    and not filled since, Tier.not_held). A data-plane SET or a restore puts such a key back;
    its next invalidation must delete it again."""
    engine = KVEngine(ModelBackend(GEOMETRY, changelog_depth=64), relocation=False)
    host = HostTier.open(HostTierSettings(tmp_path / "data"))
    direct = host.client()

    async def main() -> None:
        appliance = Appliance(lambda: engine, host_tier=host, refill=False)
        tier = Tier(appliance, host)
        await tier.start()
        appliance.tier = tier
        drain = ChangeDrain(appliance, tier, interval=3600)  # drained by hand, below

        def taken_out(key: bytes) -> None:
            tier.invalidate([key])
            tier.apply_invalidations()

        try:
            taken_out(b"dp")
            assert b"dp" in tier.not_held
            handle_datagram(engine.data_plane(), wire_set(b"dp", b"from the wire"))
            assert engine.get(b"dp") == b"from the wire"  # not drained yet
            taken_out(b"dp")
            assert engine.get(b"dp") is None
            handle_datagram(engine.data_plane(), wire_set(b"dp", b"again"))
            drain.step()  # drained: the key is shielded, so no longer known to be out
            assert engine.get(b"dp") == b"again" and b"dp" not in tier.not_held
            taken_out(b"dp")
            assert engine.get(b"dp") is None
            direct.set(b"restored", b"r")
            taken_out(b"restored")
            appliance.refill()
            assert engine.get(b"restored") == b"r"
            taken_out(b"restored")
            assert engine.get(b"restored") is None
        finally:
            await tier.close()
    try:
        asyncio.run(main())
    finally:
        direct.close()
        host.close()


@pytest.mark.skipif(not HAVE_REDIS, reason="needs redis-server (Debian: redis-server)")
def test_serve_on_the_model_runs_no_drain(tmp_path: Path) -> None:
    """Nothing outside the process can write the model's data plane, so serve polls no change
    log there (tests/test_crash.py's virtual-board run shows the drain where the wire writes)."""
    from crash_support import Served, resp_client

    served = Served(tmp_path / "data", "everysec")
    try:
        client = resp_client(served)
        info = client.info("hosttier")
        client.close()
    finally:
        served.stop()
    assert info["hosttier_up"] == 1
    assert "changelog_drained" not in info
