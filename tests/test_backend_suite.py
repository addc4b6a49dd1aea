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
