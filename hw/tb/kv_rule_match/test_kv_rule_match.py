"""cocotb testbench of hw/rtl/kv_rule_match.v (the SRL ternary matcher with shadow slots).

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_rule_match``
at the bottom builds and runs them with ``cocotb_tools.runner`` on several configurations.

A cycle-level scoreboard drives a key every cycle and (when the test wants, and ``wr_ready`` and
``wr_next`` were high in the cycle before) a write, and checks every cycle, against a plain Python
table of (valid, match, mask, prio) entries:

* ``hit`` in cycle t+2 is the hit vector of the key of cycle t against the table as written by
  all writes of cycles before t (engine.md §5.3: valid and (key & mask) == match), whatever the
  background rewrite is doing — i.e. a write is atomic for the next lookup;
* with LOOKUPS = 2, ``hit1`` is the same for the second key of cycle t (``lookup1_key``, an
  independent random key, or the other key of a test's pair), against the same table; with
  LOOKUPS = 1 it stays zero whatever ``lookup1_key`` carries;
* ``prio`` in cycle t+2 holds the priorities as of the same moment (writes before cycle t);
* a write is never presented unless ``wr_ready`` and ``wr_next`` were high, and ``wr_ready`` is
  low only while SLOTS writes are outstanding (the documented 34 cycles per background rewrite),
  counting a ``wr_next`` that no write followed (the testbench sends some, as the engine does for
  a refused WRITE_RULE) as a write.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
from collections import deque
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

HW_DIR = Path(__file__).resolve().parents[2]
if str(HW_DIR) not in sys.path:
    sys.path.insert(0, str(HW_DIR))

TOPLEVEL = "kv_rule_match"
CLK_NS = 4
REWRITE_CYCLES = 34  # documented in kv_rule_match.v


def dut_params() -> dict:
    params = {"KEY_W": 288, "RULES": 16, "PRIO_W": 16, "ENTRY_W": 4, "SLOTS": 4, "LOOKUPS": 1}
    params.update(json.loads(os.environ.get("KV_RULE_MATCH_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


class TB:
    def __init__(self, dut, seed: int):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.rng = random.Random(seed)
        p = dut_params()
        self.p = p
        self.key_w, self.rules, self.prio_w, self.slots = p["KEY_W"], p["RULES"], p["PRIO_W"], p["SLOTS"]
        self.lookups = p["LOOKUPS"]
        assert len(dut.hit) == self.rules and len(dut.hit1) == self.rules
        # the table as the next lookup must see it (valid, match, mask, prio)
        self.table = [(False, 0, 0, 0) for _ in range(self.rules)]
        self.prio_now = [0] * self.rules      # priorities as prio must show them
        self.expect: deque = deque()          # (cycle due, hit vector, hit1 vector, what)
        self.cycle = 0
        self.writes_queue: deque = deque()    # writes the test wants presented, in order
        self.retire_at: deque = deque()       # retire cycle of every outstanding write
        self.last_retire = -1
        self.ready_low_cycles = 0
        self.spurious_next = 0.0              # probability of a wr_next with no write behind it
        self.next_prev = False                # wr_next of the cycle before
        self.errors: list[str] = []
        self.checked = 0
        self.pool: list[int] = []
        self.key_fn = None                    # callable giving the key of each cycle
        self.key1_fn = None                   # the same for lookup1_key
        self.checked1 = 0

        dut.rst.value = 1
        dut.lookup_key.value = 0
        dut.lookup1_key.value = 0
        dut.wr_en.value = 0
        dut.wr_next.value = 0
        dut.wr_entry.value = 0
        dut.wr_valid.value = 0
        dut.wr_match.value = 0
        dut.wr_mask.value = 0
        dut.wr_prio.value = 0
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())

    # -- model ---------------------------------------------------------------------------------
    def hit_vector(self, key: int) -> int:
        v = 0
        for e, (valid, match, mask, _prio) in enumerate(self.table):
            if valid and (key & mask) == match:
                v |= 1 << e
        return v

    def random_rule(self) -> tuple[int, int]:
        rng = self.rng
        key = rng.choice(self.pool)
        kind = rng.random()
        if kind < 0.1:
            return 0, 0                                       # match-all
        if kind < 0.2:
            return key, (1 << self.key_w) - 1                 # exact key
        if kind < 0.25:                                       # match bit outside the mask: never
            mask = rng.getrandbits(self.key_w) & ~1
            return (key & mask) | 1, mask
        mask = 0
        for _ in range(rng.choice([1, 2, 3, 5, 8])):
            mask |= 1 << rng.randrange(self.key_w)
        if rng.random() < 0.3:                                # a field: a run of mask bits
            width = rng.randint(1, 20)
            mask |= ((1 << width) - 1) << rng.randrange(self.key_w - width)
        return key & mask, mask

    def random_key(self) -> int:
        rng = self.rng
        if self.pool and rng.random() < 0.85:
            key = rng.choice(self.pool)
            if rng.random() < 0.3:                            # near a pool key
                key ^= 1 << rng.randrange(self.key_w)
            return key
        return rng.getrandbits(self.key_w)

    def queue_write(self, entry: int, valid: bool, match: int, mask: int, prio: int) -> None:
        self.writes_queue.append((entry, valid, match, mask, prio & ((1 << self.prio_w) - 1)))

    def queue_random_writes(self, n: int) -> None:
        for _ in range(n):
            match, mask = self.random_rule()
            self.queue_write(self.rng.randrange(self.rules), self.rng.random() < 0.85, match, mask,
                             self.rng.randrange(1 << self.prio_w))

    # -- cycle loop ------------------------------------------------------------------------------
    async def reset(self, cycles: int = 3) -> None:
        self.dut.rst.value = 1
        self.dut.wr_en.value = 0
        self.dut.wr_next.value = 0
        self.next_prev = False
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0
        self.table = [(False, 0, 0, 0) for _ in range(self.rules)]
        self.prio_now = [0] * self.rules
        self.expect.clear()
        self.retire_at.clear()
        self.last_retire = -1
        getattr(self, "_prio_due", deque()).clear()
        await RisingEdge(self.dut.clk)

    async def run(self, cycles: int, write_prob: float = 1.0) -> None:
        """Run `cycles` clock cycles: a key every cycle, queued writes whenever wr_ready allows
        (planned with probability write_prob per cycle, announced on wr_next the cycle before),
        every output checked."""
        dut = self.dut
        rng = self.rng
        ready_prev = int(dut.wr_ready.value)
        for _ in range(cycles):
            # inputs of this cycle
            key = self.key_fn() if self.key_fn else self.random_key()
            key1 = self.key1_fn() if self.key1_fn else self.random_key()
            dut.lookup_key.value = key
            dut.lookup1_key.value = key1
            # hit of this cycle's key: table as of before this cycle's write
            write = None
            if ready_prev and self.next_prev and self.writes_queue:
                write = self.writes_queue.popleft()
            # announce the next cycle's write (it happens only if wr_ready is high now)
            planned = bool(self.writes_queue) and rng.random() < write_prob
            spurious = not planned and rng.random() < self.spurious_next
            dut.wr_next.value = int(planned or spurious)
            hit1 = self.hit_vector(key1) if self.lookups == 2 else 0
            self.expect.append((self.cycle + 2, self.hit_vector(key), hit1,
                                f"keys {key:#x}, {key1:#x} at {self.cycle}"))
            # prio of cycle + 2: every write before this cycle (lookup first, then write)
            self.expect_prio(self.cycle + 2, list(self.prio_now))
            if write is not None:
                entry, valid, match, mask, prio = write
                dut.wr_en.value = 1
                dut.wr_entry.value = entry
                dut.wr_valid.value = int(valid)
                dut.wr_match.value = match
                dut.wr_mask.value = mask
                dut.wr_prio.value = prio
                self.table[entry] = (valid, match, mask, prio)
                self.prio_now[entry] = prio
                # rewrites run back to back, in order: this one starts in the next cycle or
                # after the previous one retired, and retires REWRITE_CYCLES - 1 cycles later
                start = max(self.cycle + 1, self.last_retire + 1)
                self.last_retire = start + REWRITE_CYCLES - 1
                self.retire_at.append(self.last_retire)
            else:
                dut.wr_en.value = 0
            await RisingEdge(dut.clk)
            # outputs of the cycle that just ended
            self._check_outputs(write is not None)
            announced = self.next_prev and bool(ready_prev)  # wr_next counts with wr_ready only
            ready_prev = int(dut.wr_ready.value)
            self._check_ready(ready_prev, write is not None, announced)
            self.next_prev = planned or spurious
            self.cycle += 1

    def expect_prio(self, due: int, prio: list[int]) -> None:
        self._prio_due = getattr(self, "_prio_due", deque())
        self._prio_due.append((due, prio))

    def _check_outputs(self, _wrote: bool) -> None:
        dut = self.dut
        got_hit = _uint(dut.hit.value)
        got_hit1 = _uint(dut.hit1.value)
        got_prio = _uint(dut.prio.value)
        while self.expect and self.expect[0][0] <= self.cycle:
            due, vec, vec1, what = self.expect.popleft()
            if due == self.cycle:
                if got_hit != vec:
                    self.errors.append(f"cycle {self.cycle}: hit {got_hit:#x} != model {vec:#x} ({what})")
                if got_hit1 != vec1:
                    self.errors.append(f"cycle {self.cycle}: hit1 {got_hit1:#x} != model {vec1:#x} ({what})")
                self.checked += 1
                self.checked1 += vec1 != 0
        dq = getattr(self, "_prio_due", deque())
        while dq and dq[0][0] <= self.cycle:
            due, prio = dq.popleft()
            if due == self.cycle:
                mask = (1 << self.prio_w) - 1
                got = [(got_prio >> (e * self.prio_w)) & mask for e in range(self.rules)]
                if got != prio:
                    self.errors.append(f"cycle {self.cycle}: prio {got} != model {prio}")

    def _check_ready(self, ready: int, wrote: bool, announced: bool) -> None:
        # writes still outstanding after this cycle (presented, not retired by its end); the
        # register took the cycle's write as the cycle before announced it, not as it came
        while self.retire_at and self.retire_at[0] <= self.cycle:
            self.retire_at.popleft()
        outstanding = len(self.retire_at)
        counted = outstanding - int(wrote) + int(announced)
        expect_ready = counted < self.slots
        if bool(ready) != expect_ready:
            self.errors.append(f"cycle {self.cycle}: wr_ready {ready} but {outstanding} of "
                               f"{self.slots} slots outstanding (wrote {int(wrote)}, "
                               f"announced {int(announced)})")
        if not ready:
            self.ready_low_cycles += 1

    def check(self) -> None:
        for e in self.errors[:20]:
            self.log.error("%s", e)
        assert not self.errors, f"{len(self.errors)} errors, first: {self.errors[0]}"
        self.log.info("%d hit vectors checked (%d non-zero hit1), wr_ready low %d cycles",
                      self.checked, self.checked1, self.ready_low_cycles)
        if self.lookups == 2:
            assert self.checked1 > 0, "the second lookup never hit: hit1 not exercised"



async def _setup(dut, seed: int) -> TB:
    tb = TB(dut, seed)
    tb.pool = [tb.rng.getrandbits(tb.key_w) for _ in range(12)]
    await tb.reset()
    return tb


@cocotb.test()
async def run_rewrites_while_lookups_stream(dut):
    """Random writes (as fast as wr_ready allows, and sparse), lookups every cycle."""
    tb = await _setup(dut, cocotb.RANDOM_SEED)
    tb.queue_random_writes(6 * tb.slots + 10)
    await tb.run(40 * (6 * tb.slots + 10))
    assert not tb.writes_queue, "writes not all accepted"
    tb.queue_random_writes(30)
    await tb.run(3000, write_prob=0.02)
    await tb.run(REWRITE_CYCLES * (tb.slots + 2))
    # wr_next without a write behind it, as fast as writes can go and sparse
    tb.spurious_next = 0.3
    tb.queue_random_writes(4 * tb.slots + 6)
    await tb.run(40 * (4 * tb.slots + 6), write_prob=0.5)
    assert not tb.writes_queue, "writes not all accepted"
    await tb.run(REWRITE_CYCLES * (tb.slots + 2))
    tb.check()


@cocotb.test()
async def run_same_entry_back_to_back(dut):
    """Rewrites of one entry in consecutive cycles (a newer slot takes the entry over from an
    older one that is still draining), alternating valid/invalid and keys."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 1)
    rng = tb.rng
    k0, k1 = tb.pool[0], tb.pool[1]
    full = (1 << tb.key_w) - 1
    e = rng.randrange(tb.rules)
    seq = [(e, True, k0, full, 3), (e, True, k1, full, 4), (e, False, k1, full, 5), (e, True, 0, 0, 6)]
    for _ in range(3):
        for w in seq:
            tb.queue_write(*w)
    # lookups alternate between the two keys, so the hit flips with every write
    keys = [k0, k1]
    tb.key_fn = lambda: keys[tb.cycle % 2]
    tb.key1_fn = lambda: keys[(tb.cycle + 1) % 2]
    await tb.run(REWRITE_CYCLES * (len(seq) * 3 + tb.slots + 2))
    # the other entries: one rewrite each, then the same entry again while they drain
    for other in range(tb.rules):
        tb.queue_write(other, True, k0 & 0xFF, 0xFF, other)
    tb.queue_write(e, True, k1, full, 1)
    tb.key_fn = tb.key1_fn = None
    await tb.run(REWRITE_CYCLES * (tb.rules + tb.slots + 4))
    tb.check()


@cocotb.test()
async def run_slots_exhausted(dut):
    """A burst of writes fills every slot: wr_ready drops exactly then, rises when the first
    rewrite retires; one write per REWRITE_CYCLES is sustained without wr_ready ever low."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 2)
    tb.queue_random_writes(3 * tb.slots)
    start = tb.cycle
    await tb.run(REWRITE_CYCLES * (3 * tb.slots + 2))
    assert not tb.writes_queue
    assert tb.ready_low_cycles > 0, "wr_ready never dropped with all slots busy"
    tb.check()
    # sustained rate: one write every REWRITE_CYCLES cycles (SLOTS >= 2) or +1 (SLOTS = 1)
    period = REWRITE_CYCLES if tb.slots >= 2 else REWRITE_CYCLES + 1
    await tb.run(REWRITE_CYCLES * (tb.slots + 1))  # drain
    low_before = tb.ready_low_cycles
    for _ in range(12):
        tb.queue_random_writes(1)
        await tb.run(2)  # announced on wr_next in the first cycle, presented in the second
        assert not tb.writes_queue, "a write at the sustainable rate was held back"
        await tb.run(period - 2)
    if tb.slots >= 2:  # with one slot wr_ready is low while its rewrite runs, by definition
        assert tb.ready_low_cycles == low_before, "wr_ready dropped at the sustainable write rate"
    tb.check()
    tb.log.info("burst from cycle %d, %d cycles low", start, tb.ready_low_cycles)


@cocotb.test()
async def run_reset_during_rewrite(dut):
    """Reset with rewrites pending: every entry invalid afterwards (stale shift registers never
    leak), and new writes work."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 3)
    for e in range(tb.rules):
        tb.queue_write(e, True, 0, 0, e)  # match-all everywhere
    await tb.run(REWRITE_CYCLES * (tb.rules + 1) + 5)
    tb.queue_random_writes(tb.slots)
    await tb.run(tb.slots + 3)
    await tb.reset(cycles=2)
    tb.writes_queue.clear()
    await tb.run(REWRITE_CYCLES * 2)     # all invalid: the model's table was reset too
    tb.queue_random_writes(2 * tb.slots)
    await tb.run(REWRITE_CYCLES * (2 * tb.slots + 2))
    tb.check()


# ------------------------------------------------------------------------------------------
# pytest: build and run the cocotb tests above
# ------------------------------------------------------------------------------------------

def _config(key_w, rules, prio_w, slots, lookups=1):
    entry_w = max(1, (rules - 1).bit_length())
    return {"KEY_W": key_w, "RULES": rules, "PRIO_W": prio_w, "ENTRY_W": entry_w, "SLOTS": slots,
            "LOOKUPS": lookups}


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-k{p['KEY_W']}-ru{p['RULES']}-p{p['PRIO_W']}-sl{p['SLOTS']}-lk{p['LOOKUPS']}"


# every key width, RULES 1..16 (also not powers of two), SLOTS 1..8, one and two lookups
# (two lookups on Icarus only: a second Verilator build costs CI 2.5 minutes; `make -C hw
# lint` checks the LOOKUPS = 2 variant with Verilator)
CONFIGS = [
    ("icarus", _config(144, 5, 4, 1)),
    ("icarus", _config(288, 16, 16, 4)),
    ("icarus", _config(576, 8, 3, 2)),
    ("icarus", _config(1152, 3, 32, 8)),
    ("icarus", _config(288, 1, 1, 3)),
    ("verilator", _config(288, 16, 8, 4)),
    ("icarus", _config(144, 5, 4, 1, lookups=2)),
    ("icarus", _config(576, 8, 3, 2, lookups=2)),
    ("icarus", _config(288, 16, 8, 4, lookups=2)),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_rule_match(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_RULE_MATCH_RANDOM_SEED", "20240601")),
                     params_env="KV_RULE_MATCH_PARAMS",
                     build_args=("-Wno-fatal",) if sim == "verilator" else ())
