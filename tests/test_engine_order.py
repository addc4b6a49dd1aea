"""The order of the engine's two request ports (docs/engine.md §5.7) as the model states it.

The RTL side of the same contract is checked response by response in hw/tb/kv_engine
(`run_rule_storm`) and benchmarks/rtl_engine.py; this pins the model's statement of it.
"""

from __future__ import annotations

import numpy as np

from pynq_kv import regmap as rm
from pynq_kv.backend import MatchKind, RuleEntry
from pynq_kv.geometry import Geometry
from pynq_kv.model import CONTROL_PORT, REQUEST_PORT, ModelBackend, engine_order, engine_port


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
