"""cocotb testbench of hw/rtl/kv_skid.v, the register slice the front-end cuts timing paths with.

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_skid`` at
the bottom builds and runs them with ``cocotb_tools.runner``.

Checked: one cycle of latency (a word taken on an edge is on m_data with m_valid high right
after it), full rate (with m_ready high a word every cycle passes, s_ready never drops), the
two words of storage (s_ready low exactly when two are held), that s_ready does not follow
m_ready within a cycle (it is a register: the point of the slice), and order and data under
random valid/ready on both sides.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections import deque
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, Timer

HW_DIR = Path(__file__).resolve().parents[2]
if str(HW_DIR) not in sys.path:
    sys.path.insert(0, str(HW_DIR))

TOPLEVEL = "kv_skid"


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner."""
    return json.loads(os.environ["KV_SKID_PARAMS"])


async def reset(dut) -> None:
    """Start the clock and hold reset for a few cycles, both sides idle."""
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.s_valid.value = 0
    dut.s_data.value = 0
    dut.m_ready.value = 0
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


@cocotb.test()
async def run_latency_and_rate(dut) -> None:
    """m_ready high: every word comes out one edge after it is taken, one per cycle."""
    p = dut_params()
    await reset(dut)
    dut.m_ready.value = 1
    words = [random.getrandbits(p["WIDTH"]) for _ in range(50)]
    prev = None
    for w in words + [None]:
        dut.s_valid.value = int(w is not None)
        dut.s_data.value = w if w is not None else 0
        await ReadOnly()
        assert int(dut.s_ready.value) == 1, "full rate: s_ready stays high while the output drains"
        if prev is None:
            assert int(dut.m_valid.value) == 0
        else:
            assert int(dut.m_valid.value) == 1 and int(dut.m_data.value) == prev
        prev = w
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.m_valid.value) == 0


@cocotb.test()
async def run_capacity(dut) -> None:
    """m_ready low: two words are held, s_ready drops at the second and does not follow m_ready
    within the cycle; then both come out in order."""
    p = dut_params()
    await reset(dut)
    words = [random.getrandbits(p["WIDTH"]) for _ in range(3)]
    dut.s_valid.value = 1
    taken = 0
    for _ in range(4):
        dut.s_data.value = words[taken]
        await ReadOnly()
        assert int(dut.s_ready.value) == (taken < 2), f"s_ready with {taken} words held"
        await RisingEdge(dut.clk)
        taken += int(taken < 2)
    dut.s_valid.value = 0
    dut.m_ready.value = 1
    await Timer(1, unit="ns")
    await ReadOnly()
    assert int(dut.s_ready.value) == 0, "s_ready is a register: m_ready must not raise it at once"
    got = []
    for _ in range(3):  # in the read-only phase of the cycle m_ready rose in
        if int(dut.m_valid.value):
            got.append(int(dut.m_data.value))
        await RisingEdge(dut.clk)
        await ReadOnly()
    assert got == words[:2]


@cocotb.test()
async def run_back_pressure(dut) -> None:
    """Random valid on the input, random ready on the output: order and data kept."""
    p = dut_params()
    await reset(dut)
    expected: deque[int] = deque()
    received = 0
    for cycle in range(3000):
        phase = (cycle // 500) % 3  # fast writer, fast reader, balanced
        s_valid = random.random() < (0.9, 0.3, 0.6)[phase]
        m_ready = random.random() < (0.3, 0.9, 0.6)[phase]
        word = random.getrandbits(p["WIDTH"])
        dut.s_valid.value = int(s_valid)
        dut.s_data.value = word
        dut.m_ready.value = int(m_ready)
        await ReadOnly()
        assert int(dut.s_ready.value) == (len(expected) < 2)
        assert int(dut.m_valid.value) == bool(expected)
        if int(dut.m_valid.value) and m_ready:
            assert int(dut.m_data.value) == expected.popleft(), f"word {received}"
            received += 1
        if s_valid and int(dut.s_ready.value):
            expected.append(word)
        await RisingEdge(dut.clk)
    assert received > 1000


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-w{p['WIDTH']}"


CONFIGS = [
    ("icarus", {"WIDTH": 1}),
    ("icarus", {"WIDTH": 70}),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_skid(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_SKID_RANDOM_SEED", "20261124")),
                     params_env="KV_SKID_PARAMS")
