"""The order of the engine's request ports (docs/engine.md §5.7) as the model states it.

The RTL side of the same contract is checked response by response in hw/tb/kv_engine
(`run_rule_storm`) and benchmarks/rtl_engine.py; this pins the model's statement of it, and
the shortcut by which a second request port's GET or LOOKUP can follow a SET or DEL of the
same cycle without waiting for its execute (the plan in docs/rtl.md, LOOKUP_PORTS = 2).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv import regmap as rm
from pynq_kv.backend import MatchKind, RuleEntry
from pynq_kv.geometry import Geometry
from pynq_kv.hashing import hash_keys
from pynq_kv.model import (CONTROL_PORT, REQUEST_PORT, REQUEST_PORT1, ModelBackend, engine_order,
                           engine_port)


def test_rule_and_counter_operations_belong_on_the_control_port() -> None:
    control = {rm.OP_WRITE_RULE, rm.OP_READ_RULE, rm.OP_CLEAR_COUNTERS, rm.OP_READ_COUNTER,
               rm.OP_READ_RULE_HITS}
    for name, code in rm.OPCODES.items():
        assert engine_port(code) == (CONTROL_PORT if code in control else REQUEST_PORT), name
    assert rm.OP_CTL_MASK == sum(1 << c for c in control)


def test_by_cycle_then_request_port_first_each_port_in_its_own_order() -> None:
    accepted = [(5, CONTROL_PORT, "w5"), (3, REQUEST_PORT, "l3"), (5, REQUEST_PORT, "l5"),
                (4, CONTROL_PORT, "w4"), (6, REQUEST_PORT, "l6"), (6, REQUEST_PORT, "l6b")]
    assert engine_order(accepted) == ["l3", "w4", "l5", "w5", "l6", "l6b"]


def test_the_second_request_port_comes_between_the_request_and_control_ports() -> None:
    accepted = [(2, CONTROL_PORT, "c2"), (2, REQUEST_PORT1, "b2"), (2, REQUEST_PORT, "a2"),
                (1, REQUEST_PORT1, "b1"), (3, REQUEST_PORT, "a3"), (3, REQUEST_PORT1, "b3"),
                (1, CONTROL_PORT, "c1")]
    assert engine_order(accepted) == ["b1", "c1", "a2", "b2", "c2", "a3", "b3"]


def test_a_rule_write_is_seen_from_the_next_cycle_on() -> None:
    """A WRITE_RULE accepted in cycle t: the LOOKUP of cycle t misses, the one of t+1 hits."""
    g = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=0, rules=2, prio_width=4)
    key = np.zeros((1, g.key_bytes), dtype=np.uint8)
    m = ModelBackend(g)
    write = ("write", RuleEntry(True, 0, 0, 1, bytes(4)))  # matches every key
    seq = engine_order([(7, CONTROL_PORT, write), (7, REQUEST_PORT, ("lookup", None)),
                        (8, REQUEST_PORT, ("lookup", None))])
    kinds = []
    for what, rule in seq:
        if what == "write":
            m.write_rule(0, rule)
        else:
            kinds.append(int(m.lookup_batch(key).kind[0]))
    assert kinds == [MatchKind.MISS, MatchKind.RULE]


_PAIR_GEOMETRIES = st.builds(
    Geometry, key_width=st.just(144), value_width=st.just(32), ways=st.integers(2, 3),
    rows=st.sampled_from([2, 4]), stash=st.integers(0, 2), rules=st.integers(0, 2),
    prio_width=st.just(4), hash_seed=st.integers(0, (1 << 64) - 1))


@settings(max_examples=300, deadline=None)
@given(g=_PAIR_GEOMETRIES, data=st.data())
def test_a_read_after_a_same_cycle_write_follows_from_the_state_before_it(g: Geometry, data) -> None:
    """Port 1's GET/LOOKUP of key k behind port 0's SET or DEL of k in one cycle, predicted from
    the state before the write alone, as the planned lane B does (no second execute chained
    behind the first): after a DEL, k is absent; after a SET, k is present with the new value
    iff it was present or one of its candidate slots or a stash slot was free (else FULL and
    nothing changed). Random states include copies in several slots (WRITE_SLOT), so "every
    copy takes the value" is exercised too; the LOOKUP's rule fallback is the rules' answer."""
    pool = [bytes([i]) * g.key_bytes for i in range(1, 7)]
    model, rules_only = ModelBackend(g), ModelBackend(g)
    for entry in range(g.rules):
        rule = RuleEntry(data.draw(st.booleans()), int.from_bytes(pool[entry], "little") & 0xFF, 0xFF,
                         data.draw(st.integers(0, 15)), bytes([0x40 + entry]) * g.value_bytes)
        model.write_rule(entry, rule)
        rules_only.write_rule(entry, rule)
    for _ in range(data.draw(st.integers(0, 12))):
        kind = data.draw(st.sampled_from(["set", "del", "slot"]))
        key = data.draw(st.sampled_from(pool))
        value = bytes([data.draw(st.integers(0, 255))]) * g.value_bytes
        if kind == "set":
            model.set_batch(_row(key), _row(value))
        elif kind == "del":
            model.delete_batch(_row(key))
        else:
            bank = data.draw(st.integers(0, g.ways if g.stash else g.ways - 1))
            index = data.draw(st.integers(0, (g.stash if bank == g.ways else g.rows) - 1))
            model.write_slot(bank, index, data.draw(st.booleans()), key, value)

    key = data.draw(st.sampled_from(pool))
    op = data.draw(st.sampled_from(["set", "del"]))
    new_value = bytes([0xA5]) * g.value_bytes
    # what lane B knows: its own compare against the state before the write
    found_pre = bool(model.get_batch(_row(key)).hit[0])
    rows = hash_keys(_row(key), g.hash_seed, g.ways, g.key_width)[0] & (g.rows - 1)
    free_way = any(not model.read_slot(w, int(rows[w]))[0] for w in range(g.ways))
    free_stash = any(not model.read_slot(g.ways, i)[0] for i in range(g.stash))
    present = (found_pre or free_way or free_stash) if op == "set" else False
    rule = rules_only.lookup_batch(_row(key))

    if op == "set":
        model.set_batch(_row(key), _row(new_value))
    else:
        model.delete_batch(_row(key))
    got = model.get_batch(_row(key))
    assert bool(got.hit[0]) == present
    assert got.values[0].tobytes() == (new_value if present else bytes(g.value_bytes))
    looked = model.lookup_batch(_row(key))
    if present:
        assert looked.kind[0] == MatchKind.EXACT and looked.values[0].tobytes() == new_value
    else:
        assert looked.kind[0] == rule.kind[0] and looked.entry[0] == rule.entry[0]
        assert looked.values[0].tobytes() == rule.values[0].tobytes()


def _row(item: bytes) -> np.ndarray:
    return np.frombuffer(item, dtype=np.uint8).reshape(1, -1)
