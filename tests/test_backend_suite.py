"""One engine suite for every backend it can reach (docs/engine.md, "one contract, three
implementations"): each backend runs the same operations as a reference ModelBackend, side by
side, and must answer identically — statuses, values, rule entries, counters and every slot.

Backends: the mailbox driver over a register-level double of the CSR, the
Verilated RTL (`kv_engine_top`, built and cached by `pynq_kv.sim`), and the PYNQ driver over a
simulated PYNQ device into that same RTL.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Callable

import numpy as np
import pytest

from csr_double import CsrDouble
from pynq_kv import Geometry, KVEngine, Rule, sim
from pynq_kv import regmap as rm
from pynq_kv.backend import Backend, RuleEntry
from pynq_kv.errors import CommandError
from pynq_kv.mailbox import MailboxBackend, MailboxError, read_geometry
from pynq_kv.model import ModelBackend

# The model itself is not listed: against itself it could not fail. It is checked against the
# literal contract oracle in test_model_contract.py and serves as the reference here.
BACKENDS: dict[str, Callable[[Geometry], Backend]] = {
    "mailbox-double": lambda g: MailboxBackend(CsrDouble(g)),
    "rtl": sim.rtl_backend,
}
if importlib.util.find_spec("pynq"):
    from pynq_kv.pynq_driver import open_simulated_ip

    # The PYNQ driver, as on a board, over PYNQ's own MMIO into the Verilated engine.
    BACKENDS["pynq-rtl"] = lambda g: open_simulated_ip(sim.open_engine(g)).backend()

SMALL = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=2, rules=4, prio_width=4)


@pytest.fixture(params=sorted(BACKENDS))
def make_backend(request) -> Callable[[Geometry], Backend]:
    return BACKENDS[request.param]


def raw_keys(g: Geometry, ints: list[int]) -> np.ndarray:
    return np.array([list(k.to_bytes(g.key_bytes, "big")) for k in ints], dtype=np.uint8).reshape(-1, g.key_bytes)


def raw_values(g: Geometry, ints: list[int]) -> np.ndarray:
    return np.array([list(v.to_bytes(g.value_bytes, "big")) for v in ints], dtype=np.uint8).reshape(-1, g.value_bytes)


class SideBySide:
    """Applies every operation to the backend under test and to the reference model."""

    def __init__(self, backend: Backend) -> None:
        self.dut = backend
        self.ref = ModelBackend(backend.geometry)
        self.g = backend.geometry

    def both(self, method: str, *args):
        outcomes = []
        for target in (self.dut, self.ref):
            try:
                outcomes.append(("ok", getattr(target, method)(*args)))
            except CommandError:
                outcomes.append(("refused", None))
        (kind_dut, got), (kind_ref, want) = outcomes
        assert kind_dut == kind_ref, (method, args, kind_dut, kind_ref)
        assert _same(got, want), (method, args, got, want)
        return got

    def check_state(self) -> None:
        assert self.dut.counters() == self.ref.counters()
        assert (self.dut.rule_hits() == self.ref.rule_hits()).all()
        dut_numbers, dut_slots = self.dut.valid_slots()
        ref_numbers, ref_slots = self.ref.valid_slots()
        assert (dut_numbers == ref_numbers).all()
        assert (dut_slots.keys == ref_slots.keys).all() and (dut_slots.values == ref_slots.values).all()
        for entry in range(self.g.rules):
            assert self.dut.read_rule(entry) == self.ref.read_rule(entry)


def _same(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool((a == b).all())
    return a == b


def random_operations(pair: SideBySide, rng: random.Random, steps: int) -> None:
    g = pair.g
    pool = [rng.getrandbits(g.key_width) for _ in range(10)]
    for _ in range(steps):
        choice = rng.random()
        keys = [rng.choice(pool) for _ in range(rng.randint(1, 3))]
        if choice < 0.3:
            pair.both("set_batch", raw_keys(g, keys), raw_values(g, [rng.getrandbits(g.value_width) for _ in keys]))
        elif choice < 0.45:
            pair.both("get_batch", raw_keys(g, keys))
        elif choice < 0.6:
            pair.both("lookup_batch", raw_keys(g, keys))
        elif choice < 0.7:
            pair.both("delete_batch", raw_keys(g, keys))
        elif choice < 0.8:
            entry = rng.randrange(g.rules + 1)  # one past the end: refused
            mask = rng.getrandbits(g.key_width) & rng.getrandbits(g.key_width)
            pair.both("write_rule", entry, RuleEntry(rng.random() < 0.8, rng.choice(pool) & mask, mask,
                                                     rng.randrange(1 << (g.prio_width + 1)),
                                                     rng.getrandbits(g.value_width).to_bytes(g.value_bytes, "big")))
        elif choice < 0.85:
            bank, index = rng.randrange(g.ways + 2), rng.randrange(g.rows + 1)
            pair.both("write_slot", bank, index, rng.random() < 0.7,
                      rng.choice(pool).to_bytes(g.key_bytes, "big"), bytes(g.value_bytes))
        elif choice < 0.92:
            pair.both("move_slot", rng.randrange(g.ways + 1), rng.randrange(g.rows),
                      rng.randrange(g.ways + 1), rng.randrange(g.rows))
        elif choice < 0.96:
            pair.both("read_slot", rng.randrange(g.ways + 1), rng.randrange(g.rows + 1))
        elif choice < 0.98:
            pair.both("read_counter", rng.randrange(12))
        else:
            pair.both("clear_counters")


def test_same_answers_as_the_model(make_backend) -> None:
    pair = SideBySide(make_backend(SMALL))
    random_operations(pair, random.Random(20261122), steps=400)
    pair.check_state()
    pair.both("clear_table")
    pair.check_state()


@pytest.mark.parametrize("width", [144, 288, 576, 1152])
def test_every_key_width(make_backend, width) -> None:
    g = Geometry(key_width=width, value_width=64, ways=3, rows=8, stash=1, rules=2, prio_width=8)
    pair = SideBySide(make_backend(g))
    random_operations(pair, random.Random(width), steps=60)
    pair.check_state()


def test_engine_on_backend_matches_engine_on_model(make_backend) -> None:
    """KVEngine drives every backend with the same operations: relocation, rules, snapshots."""
    g = Geometry(key_width=288, value_width=64, ways=3, rows=8, stash=1, rules=8, prio_width=8)
    engines = [KVEngine(make_backend(g)), KVEngine("model", g)]
    for engine in engines:
        for i in range(22):
            engine.set(f"key{i}", f"v{i}")
        engine.add_rule(Rule.ternary(0, 0, 1, b"default"))
        engine.delete("key3")
    dut, ref = engines
    assert dut.stats() == ref.stats()
    assert list(dut.items()) == list(ref.items())
    assert [dut.lookup(f"key{i}") for i in range(20)] == [ref.lookup(f"key{i}") for i in range(20)]
    assert dut.stats()["relocations"] > 0  # the table was crowded enough to move entries


def test_geometry_is_read_from_registers() -> None:
    g = Geometry(key_width=576, value_width=96, ways=5, rows=32, stash=3, rules=7, prio_width=9,
                 hash_seed=0xFEDCBA9876543210)
    assert read_geometry(CsrDouble(g)) == g


def test_wrong_id_is_refused() -> None:
    double = CsrDouble(SMALL)
    double.regs[0] = 0xDEADBEEF
    with pytest.raises(MailboxError, match="no pynq-kv engine"):
        MailboxBackend(double)


def test_unencodable_fields_are_refused_on_the_host() -> None:
    backend = MailboxBackend(CsrDouble(SMALL))
    before = backend.regs.commands
    with pytest.raises(CommandError, match="does not fit"):
        backend.read_slot(16, 0)
    assert backend.regs.commands == before


# The engines reached through the real register map: the RTL's kv_csr + kv_engine, as a board
# has them (the register double stands in for the mailbox and is not what is under test here).
RTL_BACKENDS = sorted(name for name in BACKENDS if name != "mailbox-double")


def _raw_command(regs, op: int, **fields: int) -> tuple[int, int]:
    """One mailbox command written register by register (no driver-side checks): write REQ_OP and
    the given single-word fields, GO, poll DONE. Returns (STATUS, RSP_OP)."""
    regs.write32(rm.REG_REQ_OP, op)
    for name, value in fields.items():
        regs.write32({"entry": rm.REG_REQ_ENTRY, "prio": rm.REG_REQ_PRIO, "index": rm.REG_REQ_INDEX,
                      "bank": rm.REG_REQ_BANK, "flag": rm.REG_REQ_FLAG}[name], value)
    regs.write32(rm.REG_CTRL, rm.CTRL_GO)
    for _ in range(1000):
        status = regs.read32(rm.REG_STATUS)
        if status & rm.STATUS_DONE and not status & rm.STATUS_BUSY:
            return status, regs.read32(rm.REG_RSP_OP)
    raise AssertionError(f"opcode {op}: the mailbox never finished (STATUS {status:#x})")


@pytest.mark.parametrize("name", RTL_BACKENDS)
def test_malformed_mailbox_commands_are_refused_and_change_nothing(name) -> None:
    """docs/registers.md: an unknown opcode or an out-of-range rule entry (or counter id, or a
    priority that does not fit) is answered REFUSED (STATUS.REFUSED, RSP_STATUS 15), counts
    cmd_errors and changes nothing else; the engine keeps working afterwards."""
    g = SMALL
    pair = SideBySide(BACKENDS[name](g))
    rng = random.Random(4040)
    random_operations(pair, rng, steps=80)
    # some state worth protecting: every rule valid and matching everything at one priority
    # level or another, and LOOKUPs that hit rules (non-zero rule_hit counters)
    for e in range(g.rules):
        pair.both("write_rule", e, RuleEntry(True, 0, 0, e, bytes([e + 1]) * g.value_bytes))
    pair.both("lookup_batch", raw_keys(g, [rng.getrandbits(g.key_width) for _ in range(5)]))
    pair.check_state()
    regs = pair.dut.regs
    before = pair.dut.counters()

    unknown = [op for op in range(1 << rm.REQ_OP_W) if op not in rm.OPCODES.values()]
    bad = [(op, {}) for op in unknown]
    bad += [(rm.OP_WRITE_RULE, {"entry": e, "prio": 0, "flag": 1}) for e in (g.rules, (1 << rm.REQ_ENTRY_W) - 1)]
    bad += [(rm.OP_WRITE_RULE, {"entry": 0, "prio": 1 << g.prio_width, "flag": 1})]
    bad += [(rm.OP_READ_RULE, {"entry": e}) for e in (g.rules, (1 << rm.REQ_ENTRY_W) - 1)]
    bad += [(rm.OP_READ_RULE_HITS, {"entry": e}) for e in (g.rules, (1 << rm.REQ_ENTRY_W) - 1)]
    bad += [(rm.OP_READ_COUNTER, {"index": c}) for c in (rm.NUM_COUNTERS, (1 << rm.REQ_INDEX_W) - 1)]
    rng.shuffle(bad)
    for op, fields in bad:
        status, rsp_op = _raw_command(regs, op, **fields)
        code = (status & rm.STATUS_RSP_STATUS) >> rm.STATUS_RSP_STATUS_SHIFT
        assert code == rm.ST_REFUSED and status & rm.STATUS_REFUSED, (op, fields, hex(status))
        assert not status & rm.STATUS_ERROR, (op, fields, hex(status))  # a refusal, not a bus error
        assert rsp_op == op
    pair.dut._written.clear()  # the raw writes above bypassed the driver's register cache

    # nothing changed but cmd_errors, which counted each refusal once
    after = pair.dut.counters()
    assert after == {**before, "cmd_errors": before["cmd_errors"] + len(bad)}
    for _ in bad:  # the same refusals on the reference model, so that the two agree again
        with pytest.raises(CommandError):
            pair.ref.read_rule(g.rules)
    pair.check_state()
    # a valid command right after a refused one is not reported refused
    status, _ = _raw_command(regs, rm.OP_READ_RULE, entry=0)
    assert not status & rm.STATUS_REFUSED and status & rm.STATUS_DONE
    pair.dut._written.clear()
    # and the engine keeps working
    random_operations(pair, rng, steps=80)
    pair.check_state()
