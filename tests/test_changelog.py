"""The change log of the data plane (docs/engine.md §10) on every backend.

- the model: what is logged (SETs that changed the table, every DEL; not a FULL SET, never a
  host write), sequence numbers across drops, overflow counted and sticky until cleared, batch
  order, bad arguments;
- every backend (the model, the register-level double, the Verilated engine and, with pynq,
  the PYNQ driver): host writes through the mailbox are never logged; an engine without a data
  plane reports a depth of 0 and drains nothing;
- the virtual board (the Verilated kv_top): memcached SETs and DELETEs sent as Ethernet frames
  land in the log and are drained through the CL_* registers record for record as the model's
  data plane (`handle_datagram` on `KVEngine.data_plane()`) logs them — sequence numbers,
  operations, statuses, raw keys and values — including an overflow, its gap and the flag;
  each record takes exactly `register_accesses()` register accesses.

The board is the one kv_top build test_net_board uses (the same geometry, cached).
"""

from __future__ import annotations

import importlib.util
import random
import struct
from dataclasses import replace
from typing import Callable, Iterator

import pytest

from csr_double import CsrDouble
from pynq_kv import Geometry, KVEngine, sim
from pynq_kv.admission import DEFAULT_BUDGET
from pynq_kv.backend import Backend
from pynq_kv.board import BoardBackend, VirtualBoard, board_engine
from pynq_kv.changelog import ChangeLog, ChangeOp, check_depth, register_accesses
from pynq_kv.errors import KVError
from pynq_kv.mailbox import MailboxBackend
from pynq_kv.model import ModelBackend
from pynq_kv.net import codec
from pynq_kv.serve.memcached.server import handle_datagram

SMALL = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=2, rules=4, prio_width=4)
BOARD_GEOMETRY = Geometry(key_width=288, value_width=256, ways=4, rows=1024, stash=8, rules=16)
HEADER = struct.pack(">HHHH", 1, 0, 1, 0)
SETX = struct.pack(">II", 0, 0)


def _model(depth: int = 4, geometry: Geometry = SMALL) -> KVEngine:
    return KVEngine(ModelBackend(geometry, changelog_depth=depth), relocation=False)


# -- the model ------------------------------------------------------------------------------

def test_data_plane_mutations_are_logged_host_writes_are_not() -> None:
    engine = _model(depth=16)
    engine.set(b"host", b"h")
    engine.delete(b"host")
    wire = engine.data_plane()
    wire.set(b"a", b"1")
    wire.set(b"a", b"2")
    wire.delete(b"a")
    wire.delete(b"never")
    changes = engine.drain_changes()
    assert [(c.seq, c.op, c.status, c.key, c.value) for c in changes] == [
        (0, "set", "INSERTED", b"a", b"1"), (1, "set", "UPDATED", b"a", b"2"),
        (2, "delete", "DELETED", b"a", None), (3, "delete", "NOT_FOUND", b"never", None)]
    assert changes[2].raw.value == bytes(SMALL.value_bytes), "a delete records a zero value"
    assert engine.drain_changes() == []
    assert engine.changelog_stats().next_seq == 4


def test_a_full_set_is_not_logged_and_takes_no_number() -> None:
    engine = _model(depth=64)
    wire = engine.data_plane()
    keys = [b"k%d" % i for i in range(40)]
    report = wire.mset({k: b"v" for k in keys})
    assert report.failed, "the table of 2 x 4 + 2 slots cannot hold 40 keys"
    changes = engine.drain_changes()
    assert len(changes) == report.inserted == SMALL.capacity
    assert [c.seq for c in changes] == list(range(len(changes)))
    assert {c.status for c in changes} == {"INSERTED", "INSERTED_STASH"}


def test_a_batch_logs_in_batch_order() -> None:
    engine = _model(depth=16)
    statuses = engine.data_plane().set_batch([b"x", b"y", b"x"], [b"1", b"2", b"3"])
    assert list(statuses) == [0, 0, 2]
    assert [(c.key, c.status, c.value) for c in engine.drain_changes()] == [
        (b"x", "INSERTED", b"1"), (b"y", "INSERTED", b"2"), (b"x", "UPDATED", b"3")]
    engine.data_plane().delete_batch([b"x", b"x"])
    assert [c.status for c in engine.drain_changes()] == ["DELETED", "NOT_FOUND"]


def test_overflow_drops_counts_and_leaves_a_gap() -> None:
    engine = _model(depth=4)
    wire = engine.data_plane()
    for i in range(6):
        wire.set(b"k%d" % i, b"v")
    stats = engine.changelog_stats()
    assert (stats.depth, stats.level, stats.dropped, stats.overflowed) == (4, 4, 2, True)
    assert len(engine) == 6, "dropped records' mutations are applied all the same"
    assert [c.seq for c in engine.drain_changes(3)] == [0, 1, 2]
    wire.delete(b"k0")
    assert [c.seq for c in engine.drain_changes()] == [3, 6], "seq 4 and 5 were dropped"
    assert engine.changelog_stats().overflowed, "sticky until cleared"
    engine.clear_changelog_overflow()
    stats = engine.changelog_stats()
    assert (stats.level, stats.dropped, stats.overflowed, stats.next_seq) == (0, 2, False, 7)


def test_bad_arguments_are_refused() -> None:
    for depth in (1, 3, 65537, -2, True, 2.0):
        with pytest.raises(ValueError):
            check_depth(depth)  # type: ignore[arg-type]
    assert ChangeLog(0).stats().depth == 0
    engine = _model()
    engine.data_plane().set(b"a", b"b")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            engine.drain_changes(bad)  # type: ignore[arg-type]
    assert engine.changelog_stats().level == 1, "nothing drained by a refused call"


def test_a_register_backend_has_no_software_data_plane() -> None:
    engine = KVEngine(MailboxBackend(CsrDouble(SMALL)))
    with pytest.raises(KVError, match="Ethernet port"):
        engine.data_plane().set(b"a", b"b")
    assert engine.get(b"a") is None


# -- every backend: host writes are not logged -----------------------------------------------

BACKENDS: dict[str, Callable[[Geometry], Backend]] = {
    "model": ModelBackend,
    "mailbox-double": lambda g: MailboxBackend(CsrDouble(g)),
    "rtl": sim.rtl_backend,
}
if importlib.util.find_spec("pynq"):
    from pynq_kv.pynq_driver import open_simulated_ip

    BACKENDS["pynq-rtl"] = lambda g: open_simulated_ip(sim.open_engine(g)).backend()


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_host_writes_are_never_logged(name: str) -> None:
    engine = KVEngine(BACKENDS[name](SMALL))
    try:
        engine.mset({b"k%d" % i: b"v%d" % i for i in range(6)})
        engine.delete(b"k1")
        engine.delete(b"absent")
        engine.set(b"k2", b"new")
        stats = engine.changelog_stats()
        # the model has a data-plane port (kv_top's depth); the engine-only RTL has none
        assert stats.depth == (512 if name == "model" else 0)
        assert (stats.level, stats.dropped, stats.overflowed) == (0, 0, False)
        assert engine.drain_changes() == []
        engine.clear_changelog_overflow()
        assert engine.get(b"k2") == b"new"
    finally:
        engine.close()


# -- the virtual board ------------------------------------------------------------------------

class CountingRegs:
    """The board's registers, counting accesses (the drain's cost per record)."""

    def __init__(self, device) -> None:
        self.device = device
        self.accesses = 0

    def read32(self, offset: int) -> int:
        self.accesses += 1
        return self.device.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        self.accesses += 1
        self.device.write32(offset, value)


@pytest.fixture(scope="module")
def board() -> Iterator[tuple[VirtualBoard, KVEngine]]:
    engine = board_engine(BOARD_GEOMETRY, relocation=False)
    assert isinstance(engine.backend, BoardBackend)
    yield engine.backend.board, engine
    engine.close()


def _wire_datagram(rng: random.Random, keys: list[bytes]) -> bytes:
    """Binary SETs, DELETEs and GETs, or a text block of set/delete/get."""
    if rng.random() < 0.3:
        lines = []
        for _ in range(rng.randint(1, 4)):
            key = rng.choice(keys)
            lines.append(rng.choice([b"set %s 0 0 2\r\nab\r\n" % key, b"delete %s\r\n" % key,
                                     b"get %s\r\n" % key]))
        return HEADER + b"".join(lines)
    parts = []
    for i in range(rng.randint(1, 10)):
        key = rng.choice(keys)
        pick = rng.random()
        if pick < 0.5:
            value = bytes(rng.randrange(256) for _ in range(rng.choice([0, 5, 31])))
            op = codec.Opcode.SETQ if rng.random() < 0.3 else codec.Opcode.SET
            parts.append(codec.Request(op, key=key, extras=SETX, value=value, opaque=i).encode())
        elif pick < 0.8:
            parts.append(codec.delete_request(key, quiet=rng.random() < 0.3).encode())
        else:
            parts.append(codec.get_request(key, opaque=i).encode())
    return HEADER + b"".join(parts)


def _drain_both(engine: KVEngine, model: KVEngine) -> list:
    got = [c.raw for c in engine.drain_changes(10_000)]
    want = [c.raw for c in model.drain_changes(10_000)]
    assert got == want
    assert engine.changelog_stats() == replace(model.changelog_stats(), next_seq=None)
    return got


def test_wire_mutations_are_drained_as_the_model_logs_them(board) -> None:
    vboard, engine = board
    model = _model(depth=512, geometry=BOARD_GEOMETRY)
    assert engine.changelog_stats().depth == 512
    rng = random.Random(20261124)
    keys = [b"k%d" % i for i in range(10)] + [b"x" * 35]
    drained = 0
    for n in range(120):
        payload = _wire_datagram(rng, keys)
        assert vboard.exchange(payload, 41000) == handle_datagram(model.data_plane(), payload, budget=DEFAULT_BUDGET), n
        if n % 25 == 24:
            drained += len(_drain_both(engine, model))
        if n == 60:  # host writes in between are applied and not logged
            engine.set(b"k1", b"from-host")
            model.set(b"k1", b"from-host")
            engine.delete(b"k2")
            model.delete(b"k2")
    drained += len(_drain_both(engine, model))
    assert drained > 200
    assert dict(engine.items()) == dict(model.items())


def test_wire_overflow_is_counted_and_leaves_a_gap(board) -> None:
    vboard, engine = board
    engine.drain_changes(10_000)
    start = engine.changelog_stats()
    assert start.level == 0 and not start.overflowed
    sets = 0
    while sets < 512 + 20:  # 30 binary SETs a datagram, nothing drained
        body = b"".join(codec.Request(codec.Opcode.SETQ, key=b"o%d" % (sets + i), extras=SETX,
                                      value=b"%d" % (sets + i)).encode() for i in range(30))
        assert vboard.exchange(HEADER + body, 42000) == []
        sets += 30
    stats = engine.changelog_stats()
    assert stats.level == 512 and stats.overflowed and stats.dropped == start.dropped + sets - 512
    regs = CountingRegs(vboard.device)
    backend = engine.backend
    original, backend.regs = backend.regs, regs
    try:
        first = engine.drain_changes(1)
        assert regs.accesses == register_accesses(288, 256, ChangeOp.SET)
    finally:
        backend.regs = original
    first_seq = first[0].seq
    rest = engine.drain_changes(10_000)
    assert [c.seq for c in first + rest] == list(range(first_seq, first_seq + 512))
    assert [c.key for c in first + rest] == [b"o%d" % i for i in range(512)]
    vboard.exchange(HEADER + codec.delete_request(b"o0").encode(), 42000)
    (after,) = engine.drain_changes()
    assert after.seq == first_seq + sets, "the dropped mutations took their numbers"
    assert (after.op, after.status, after.key) == ("delete", "DELETED", b"o0")
    assert engine.changelog_stats().overflowed
    engine.clear_changelog_overflow()
    assert not engine.changelog_stats().overflowed
    assert engine.get(b"o%d" % (sets - 1)) == b"%d" % (sets - 1), "dropped records' SETs were applied"
