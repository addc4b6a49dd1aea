"""cocotb testbench of hw/rtl/kv_h3_hash.v against the Python reference (pynq_kv.hashing).

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_h3_hash``
at the bottom builds and runs them with ``cocotb_tools.runner`` for several simulators and
parameter sets, each in its own directory under hw/build/kv_h3_hash/.

Checked for every key: the rows of all ways equal ``hash_int(key) mod 2^ROW_BITS`` of the model
(engine.md §3), the user tag comes back with its key, outputs keep input order, and each output
appears exactly ``LATENCY = STAGES`` clock cycles after its input was sampled.
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
REPO_DIR = HW_DIR.parent
for _p in (REPO_DIR, HW_DIR):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from pynq_kv import hashing  # noqa: E402  (the reference of engine.md §3)


TOPLEVEL = "kv_h3_hash"
DEFAULT_SEED = 0x70796E712D6B7631  # engine.md §1
# Way 0's state is HASH_SEED ^ GOLDEN64 = 0 with this seed: exercises the s = 0 rule of §3 step 2.
ZERO_STATE_SEED = hashing.GOLDEN64


def latency(params: dict) -> int:
    """Documented latency of kv_h3_hash in clock cycles (module header): STAGES."""
    return int(params["STAGES"])


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner (defaults = RTL defaults)."""
    params = {"KEY_W": 288, "WAYS": 4, "ROW_BITS": 13, "HASH_SEED": DEFAULT_SEED, "STAGES": 2, "USER_W": 1}
    params.update(json.loads(os.environ.get("KV_HASH_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    """Unsigned integer of a resolved Logic (1-bit port) or LogicArray."""
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


class TB:
    """Clock, reset, driver and an in-order scoreboard for kv_h3_hash."""

    def __init__(self, dut):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)

        p = dut_params()
        self.key_w = int(p["KEY_W"])
        self.ways = int(p["WAYS"])
        self.row_bits = int(p["ROW_BITS"])
        self.seed = int(p["HASH_SEED"])
        self.user_w = int(p["USER_W"])
        self.latency = latency(p)

        # the port widths must agree with the parameters we were told
        assert len(dut.s_key) == self.key_w
        assert len(dut.m_rows) == self.ways * self.row_bits
        assert len(dut.s_user) == self.user_w

        self.cycle = 0  # rising edges seen since the start
        self.in_reset = True
        self.expected: deque[tuple[int, int, list[int], int]] = deque()  # (cycle, key, rows, user)
        self.sent = 0
        self.checked = 0
        self.errors: list[str] = []

        # plain (deferred) writes: Icarus drops Immediate writes to input nets at time 0
        dut.rst.value = 1
        dut.s_valid.value = 0
        dut.s_key.value = 0
        dut.s_user.value = 0

        cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
        cocotb.start_soon(self._monitor())

    # -- model -----------------------------------------------------------------------------

    def model_rows(self, key: int) -> list[int]:
        mask = (1 << self.row_bits) - 1
        return [hashing.hash_int(key, self.seed, w, self.key_w) & mask for w in range(self.ways)]

    def unpack_rows(self, value: int) -> list[int]:
        mask = (1 << self.row_bits) - 1
        return [(value >> (w * self.row_bits)) & mask for w in range(self.ways)]

    # -- driving ---------------------------------------------------------------------------

    async def reset(self, cycles: int = 3) -> None:
        self.dut.s_valid.value = 0
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    async def send(self, key: int, user: int = 0) -> None:
        """Present one key for one clock cycle."""
        self.dut.s_key.value = key
        self.dut.s_user.value = user
        self.dut.s_valid.value = 1
        await RisingEdge(self.dut.clk)
        self.dut.s_valid.value = 0

    async def idle(self, cycles: int) -> None:
        self.dut.s_valid.value = 0
        if cycles:
            await ClockCycles(self.dut.clk, cycles)

    async def send_all(self, keys, rng: random.Random | None = None, idle_prob: float = 0.0,
                       max_idle: int = 3) -> None:
        """Send keys with a tag counter, with random idle cycles between them if idle_prob > 0."""
        user_mask = (1 << self.user_w) - 1
        for n, key in enumerate(keys):
            await self.send(key, (self.sent + n) & user_mask)
            if rng is not None and rng.random() < idle_prob:
                await self.idle(rng.randint(1, max_idle))

    async def drain(self) -> None:
        """Wait until every sent key has come out (or long enough to prove one never will)."""
        await self.idle(self.latency + 2)
        for _ in range(10 * self.latency + 10):
            if not self.expected:
                break
            await RisingEdge(self.dut.clk)
        await self.idle(2)

    # -- monitor and scoreboard ------------------------------------------------------------

    async def _monitor(self) -> None:
        """Sample both ports at every rising edge (values as the flops see them)."""
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1

            rst = dut.rst.value
            if not rst.is_resolvable or int(rst):
                self.in_reset = True
                self.expected.clear()  # keys in flight are lost by a reset
                continue
            if self.in_reset:
                # first edge after reset: the valid pipeline must be empty
                self.in_reset = False

            s_valid = dut.s_valid.value
            m_valid = dut.m_valid.value
            if not m_valid.is_resolvable:
                self.errors.append(f"cycle {self.cycle}: m_valid is {m_valid} after reset")
                continue

            if int(m_valid):
                self._check_output()

            if s_valid.is_resolvable and int(s_valid):
                key = _uint(dut.s_key.value)
                user = _uint(dut.s_user.value)
                self.expected.append((self.cycle, key, self.model_rows(key), user))
                self.sent += 1

    def _check_output(self) -> None:
        dut = self.dut
        if not self.expected:
            self.errors.append(f"cycle {self.cycle}: m_valid with no key in flight")
            return
        cycle_in, key, rows, user = self.expected.popleft()
        got_latency = self.cycle - cycle_in
        value = dut.m_rows.value
        got_user = dut.m_user.value
        if not value.is_resolvable or not got_user.is_resolvable:
            self.errors.append(f"cycle {self.cycle}: key {key:#x}: unresolved output {value} / {got_user}")
            return
        got = self.unpack_rows(_uint(value))
        if got != rows:
            self.errors.append(f"key {key:#x}: rows {[hex(r) for r in got]} != model {[hex(r) for r in rows]}")
        if _uint(got_user) != user:
            self.errors.append(f"key {key:#x}: user {_uint(got_user):#x} != {user:#x}")
        if got_latency != self.latency:
            self.errors.append(f"key {key:#x}: latency {got_latency} != {self.latency}")
        self.checked += 1

    def check(self, expected_count: int | None = None) -> None:
        for e in self.errors[:20]:
            self.log.error("%s", e)
        assert not self.errors, f"{len(self.errors)} scoreboard errors, first: {self.errors[0]}"
        assert not self.expected, f"{len(self.expected)} keys never came out"
        if expected_count is not None:
            assert self.checked == expected_count, f"checked {self.checked} outputs, sent {expected_count}"
        self.log.info("scoreboard: %d outputs checked, latency %d", self.checked, self.latency)


def random_key(rng: random.Random, key_w: int) -> int:
    """A random key of one of several densities (sparse, dense, uniform, byte-string-like)."""
    kind = rng.randrange(4)
    if kind == 0:  # a few bits set
        key = 0
        for _ in range(rng.randint(1, 4)):
            key |= 1 << rng.randrange(key_w)
        return key
    if kind == 1:  # most bits set
        key = (1 << key_w) - 1
        for _ in range(rng.randint(1, 4)):
            key &= ~(1 << rng.randrange(key_w))
        return key
    if kind == 2:  # uniform
        return rng.getrandbits(key_w)
    # engine.md §2 byte-string encoding: [L] ‖ key ‖ zero padding, big-endian
    key_bytes = key_w // 8
    length = rng.randint(0, key_bytes - 1)
    raw = bytes([length]) + rng.randbytes(length) + bytes(key_bytes - 1 - length)
    return int.from_bytes(raw, "big")


@cocotb.test()
async def run_directed_keys(dut):
    """Zero, all ones and every single-bit key back to back: checks each matrix row Q_w[i]."""
    tb = TB(dut)
    await tb.reset()
    keys = [0, (1 << tb.key_w) - 1] + [1 << i for i in range(tb.key_w)]
    await tb.send_all(keys)
    await tb.drain()
    tb.check(len(keys))


@cocotb.test()
async def run_committed_vectors(dut):
    """The committed vectors of engine.md §3 (tests/vectors/hash.json) for this width and seed."""
    tb = TB(dut)
    vectors = json.loads((REPO_DIR / "tests" / "vectors" / "hash.json").read_text())
    mask = (1 << tb.row_bits) - 1
    cases = [(int(v["key"], 16), [int(h, 16) & mask for h in v["hashes"][:tb.ways]])
             for v in vectors["vectors"]
             if v["key_width"] == tb.key_w and int(v["seed"], 16) == tb.seed]
    assert cases, f"no committed vectors for KEY_W={tb.key_w} seed={tb.seed:#x}"
    assert tb.ways <= vectors["ways"]
    await tb.reset()
    for key, rows in cases:
        assert tb.model_rows(key) == rows  # the live model still agrees with the committed file
    await tb.send_all([key for key, _ in cases])
    await tb.drain()
    tb.check(len(cases))


@cocotb.test()
async def run_random_keys(dut):
    """Random keys with random idle cycles between them."""
    tb = TB(dut)
    rng = random.Random(cocotb.RANDOM_SEED)
    await tb.reset()
    keys = [random_key(rng, tb.key_w) for _ in range(int(os.environ.get("KV_HASH_KEYS", "400")))]
    await tb.send_all(keys, rng, idle_prob=0.3)
    await tb.drain()
    tb.check(len(keys))


@cocotb.test()
async def run_reset_in_flight(dut):
    """A reset drops the keys in flight: no m_valid after it until new keys arrive."""
    tb = TB(dut)
    rng = random.Random(cocotb.RANDOM_SEED + 1)
    await tb.reset()
    await tb.send_all([rng.getrandbits(tb.key_w) for _ in range(tb.latency + 2)])
    # keys are still in the pipeline here: reset drops them (the monitor clears its queue)
    await tb.reset(cycles=1)
    await tb.idle(tb.latency + 2)
    assert tb.checked + len(tb.expected) <= tb.latency + 2
    before = tb.checked
    keys = [rng.getrandbits(tb.key_w) for _ in range(5)]
    await tb.send_all(keys)
    await tb.drain()
    tb.check()
    assert tb.checked == before + len(keys)


# ------------------------------------------------------------------------------------------
# pytest: build and run the cocotb tests above
# ------------------------------------------------------------------------------------------

def _config(key_w, ways, row_bits, stages, seed, user_w=8):
    return {"KEY_W": key_w, "WAYS": ways, "ROW_BITS": row_bits, "HASH_SEED": seed,
            "STAGES": stages, "USER_W": user_w}


def _config_id(sim: str, p: dict) -> str:
    seed = "seedA" if p["HASH_SEED"] == DEFAULT_SEED else "seed0" if p["HASH_SEED"] == ZERO_STATE_SEED else f"seed{p['HASH_SEED']:x}"
    return f"{sim}-k{p['KEY_W']}-w{p['WAYS']}-r{p['ROW_BITS']}-s{p['STAGES']}-u{p['USER_W']}-{seed}"


# Each KEY_W, WAYS 2..8, ROW_BITS 1..24, STAGES 1..4 and both seeds appear at least once.
# Verilator builds take ~20-40 s each, so it gets the reference configuration only; "yosys"
# simulates (with Icarus) the netlist Yosys elaborates, to check Yosys computes the same matrix.
CONFIGS = [
    ("icarus", _config(144, 2, 13, 2, DEFAULT_SEED)),
    ("icarus", _config(144, 4, 24, 1, ZERO_STATE_SEED, user_w=1)),
    ("icarus", _config(288, 8, 1, 3, DEFAULT_SEED)),
    ("icarus", _config(576, 3, 10, 4, ZERO_STATE_SEED)),
    ("icarus", _config(1152, 2, 16, 2, ZERO_STATE_SEED)),
    ("icarus", _config(1152, 4, 13, 3, DEFAULT_SEED, user_w=32)),
    ("verilator", _config(288, 4, 13, 2, DEFAULT_SEED)),
    ("verilator", _config(1152, 2, 20, 3, ZERO_STATE_SEED)),
    ("yosys", _config(144, 4, 12, 2, ZERO_STATE_SEED)),
]



@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_h3_hash(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_HASH_RANDOM_SEED", "20240601")),
                     params_env="KV_HASH_PARAMS", build_args=())
