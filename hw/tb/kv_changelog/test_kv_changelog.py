"""cocotb testbench of hw/rtl/kv_changelog.v, the engine's change log (docs/engine.md §10).

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_changelog``
at the bottom builds and runs them with ``cocotb_tools.runner`` for several parameter sets.

Scoreboard: `pynq_kv.changelog.ChangeLog`, the model the Python backends use, fed every cycle
what the RTL sampled at that clock edge (a CLR_OVERFLOW strobe, then the mutation, then a pop
if the RTL had a head record): after every edge the head record (sequence number, operation,
status, key, value), `level`, `dropped` and `overflowed` must equal the model's. Mutation
patterns: back to back, sparse and random, with the host draining eagerly, slowly (back-pressure
until the log overflows) or not at all; pops while the log is empty; CLR_OVERFLOW in the cycle
of a drop. The sequence numbers drained must show exactly the dropped mutations as gaps.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer

HW_DIR = Path(__file__).resolve().parents[2]
REPO_DIR = HW_DIR.parent
for path in (HW_DIR, REPO_DIR):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from pynq_kv.changelog import ChangeLog, ChangeOp  # noqa: E402

TOPLEVEL = "kv_changelog"
SET_STATUSES = (0, 1, 2)  # INSERTED, INSERTED_STASH, UPDATED (a FULL SET is never logged)
DEL_STATUSES = (0, 1)     # DELETED, NOT_FOUND


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner."""
    return json.loads(os.environ["KV_CHANGELOG_PARAMS"])


class Bench:
    """Drives mutations, pops and CLR_OVERFLOW; checks the RTL against the model each cycle."""

    def __init__(self, dut) -> None:
        self.dut = dut
        p = dut_params()
        self.key_w, self.value_w, self.depth = p["KEY_W"], p["VALUE_W"], p["DEPTH"]
        self.model = ChangeLog(self.depth)
        self.drained: list[int] = []  # sequence numbers popped, in order
        self.pops_ignored = 0

    async def reset(self, start_clock: bool = True) -> None:
        dut = self.dut
        if start_clock:  # a new test: leave the last test's read-only phase, clock again
            await Timer(1, unit="ns")
            cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
        else:
            await FallingEdge(dut.clk)
        self.drive(None, pop=False, clear=False)
        dut.rst.value = 1
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        await ReadOnly()
        self.check()

    def drive(self, mutation: tuple[int, int, int, int] | None, pop: bool, clear: bool) -> None:
        dut = self.dut
        dut.log_valid.value = int(mutation is not None)
        op, status, key, value = mutation or (0, 0, 0, 0)
        dut.log_del.value = op
        dut.log_status.value = status
        dut.log_key.value = key
        dut.log_value.value = value
        dut.pop.value = int(pop)
        dut.clear_overflow.value = int(clear)

    def mutation(self, rng: random.Random) -> tuple[int, int, int, int]:
        op = rng.choice((ChangeOp.SET, ChangeOp.DELETE))
        status = rng.choice(SET_STATUSES if op == ChangeOp.SET else DEL_STATUSES)
        return int(op), status, rng.getrandbits(self.key_w), rng.getrandbits(self.value_w)

    async def cycle(self, mutation: tuple[int, int, int, int] | None, pop: bool, clear: bool) -> None:
        """One clock edge with these inputs; the model takes what the RTL sampled."""
        head_valid = int(self.dut.head_valid.value)  # as the last edge left it
        await FallingEdge(self.dut.clk)
        self.drive(mutation, pop, clear)
        await RisingEdge(self.dut.clk)
        if clear:
            self.model.clear_overflow()
        if mutation is not None:
            op, status, key, value = mutation
            self.model.record(ChangeOp(op), status, key.to_bytes(self.key_w // 8, "big"),
                              value.to_bytes(self.value_w // 8, "big"))
        if pop and head_valid:
            head = self.model.head()
            assert head is not None, "the RTL had a head record the model does not"
            self.drained.append(head.seq)
            self.model.pop()
        elif pop:
            self.pops_ignored += 1
        await ReadOnly()
        self.check()

    def check(self) -> None:
        dut, model = self.dut, self.model
        stats = model.stats()
        assert int(dut.level.value) == stats.level, f"level {int(dut.level.value)} != {stats.level}"
        assert int(dut.dropped.value) == stats.dropped
        assert int(dut.overflowed.value) == int(stats.overflowed)
        head = model.head()
        if not int(dut.head_valid.value):
            # a record pushed into an empty log reaches the head one edge later (the RAM read)
            assert stats.level <= 1, f"no head record with {stats.level} records held"
            return
        assert head is not None
        got = (int(dut.head_seq.value), int(dut.head_del.value), int(dut.head_status.value),
               int(dut.head_key.value), int(dut.head_value.value))
        want = (head.seq, int(head.op), head.status, int.from_bytes(head.key, "big"),
                int.from_bytes(head.value, "big"))
        assert got == want, f"head record {got} != model {want}"


def assert_gaps_are_drops(bench: Bench) -> None:
    """The sequence numbers drained skip exactly the mutations dropped before them."""
    seqs = bench.drained
    gaps = sum(b - a - 1 for a, b in zip(seqs, seqs[1:])) + (seqs[0] if seqs else 0)
    trailing = bench.model.next_seq - 1 - seqs[-1] - bench.model.stats().level if seqs else 0
    assert gaps + trailing == bench.model.dropped, (gaps, trailing, bench.model.dropped)


@cocotb.test()
async def run_back_to_back_until_overflow(dut) -> None:
    """Mutations every cycle with no drain: DEPTH kept, the rest dropped and counted; then a
    drain shows the gap, CLR_OVERFLOW clears the flag, and the log works again."""
    bench = Bench(dut)
    rng = random.Random(1)
    await bench.reset()
    for _ in range(bench.depth + 5):
        await bench.cycle(bench.mutation(rng), pop=False, clear=False)
    assert bench.model.dropped == 5 and int(dut.overflowed.value) == 1
    for _ in range(bench.depth + 3):  # pops every cycle, the last ones on an empty log
        await bench.cycle(None, pop=True, clear=False)
    assert bench.drained == list(range(bench.depth))
    await bench.cycle(None, pop=False, clear=True)
    assert int(dut.overflowed.value) == 0
    await bench.cycle(bench.mutation(rng), pop=False, clear=False)
    await bench.cycle(None, pop=False, clear=False)
    await bench.cycle(None, pop=True, clear=False)
    assert bench.drained[-1] == bench.depth + 5, "the first record after the drops has the next number"
    assert_gaps_are_drops(bench)


@cocotb.test()
async def run_random_patterns(dut) -> None:
    """Idle and back-pressure patterns: each phase its own mutation and drain probabilities,
    pops also while empty, CLR_OVERFLOW now and then (also in the cycle of a drop)."""
    bench = Bench(dut)
    rng = random.Random(int(os.environ.get("KV_CHANGELOG_SEED", "7")))
    await bench.reset()
    phases = [(1.0, 0.0), (0.9, 0.5), (0.5, 0.5), (0.1, 0.9), (0.6, 0.2), (0.02, 1.0), (1.0, 1.0)]
    for p_mut, p_pop in phases:
        for _ in range(12 * bench.depth + 40):
            mutation = bench.mutation(rng) if rng.random() < p_mut else None
            await bench.cycle(mutation, pop=rng.random() < p_pop, clear=rng.random() < 0.03)
    while bench.model.stats().level:  # drain the rest
        await bench.cycle(None, pop=True, clear=False)
    await bench.cycle(None, pop=True, clear=False)
    assert bench.model.dropped > 0 and bench.pops_ignored > 0, "the patterns overflowed and popped an empty log"
    assert len(bench.drained) > 4 * bench.depth
    assert_gaps_are_drops(bench)


@cocotb.test()
async def run_reset_clears(dut) -> None:
    """Reset empties the log and starts the numbering and the drop count again."""
    bench = Bench(dut)
    rng = random.Random(3)
    await bench.reset()
    for _ in range(bench.depth + 2):
        await bench.cycle(bench.mutation(rng), pop=False, clear=False)
    bench.model = ChangeLog(bench.depth)
    await bench.reset(start_clock=False)
    await bench.cycle(bench.mutation(rng), pop=False, clear=False)
    await bench.cycle(None, pop=False, clear=False)
    assert int(dut.head_seq.value) == 0 and int(dut.dropped.value) == 0


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-k{p['KEY_W']}-v{p['VALUE_W']}-d{p['DEPTH']}"


CONFIGS = [
    ("icarus", {"KEY_W": 144, "VALUE_W": 32, "DEPTH": 2}),
    ("icarus", {"KEY_W": 288, "VALUE_W": 64, "DEPTH": 16}),
    ("verilator", {"KEY_W": 576, "VALUE_W": 512, "DEPTH": 8}),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_changelog(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL, "kv_fifo"), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_CHANGELOG_RANDOM_SEED", "20261124")),
                     params_env="KV_CHANGELOG_PARAMS")
