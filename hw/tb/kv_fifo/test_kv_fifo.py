"""cocotb testbench of hw/rtl/kv_fifo.v, the design's one FIFO, in both read modes.

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_fifo`` at
the bottom builds and runs them with ``cocotb_tools.runner`` for several parameter sets.

Checked: first-word fall-through (a word pushed into an empty FIFO is on m_data with m_valid
high 1 + OUTPUT_REG cycles later, without m_ready), the capacity (DEPTH words, one more with the
output register) with s_ready low exactly when it is reached, `count`, m_valid low when empty,
and order and data under random valid/ready on both sides (back-pressure).
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
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

HW_DIR = Path(__file__).resolve().parents[2]
if str(HW_DIR) not in sys.path:
    sys.path.insert(0, str(HW_DIR))

TOPLEVEL = "kv_fifo"


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner."""
    return json.loads(os.environ["KV_FIFO_PARAMS"])


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
async def run_fall_through(dut) -> None:
    """A word pushed into the empty FIFO appears on its own after 1 + OUTPUT_REG edges."""
    p = dut_params()
    await reset(dut)
    await ReadOnly()
    assert int(dut.m_valid.value) == 0 and int(dut.count.value) == 0 and int(dut.s_ready.value) == 1
    await RisingEdge(dut.clk)
    word = random.getrandbits(p["WIDTH"])
    dut.s_data.value = word
    dut.s_valid.value = 1
    await RisingEdge(dut.clk)  # the push edge
    dut.s_valid.value = 0
    for _ in range(p["OUTPUT_REG"]):
        await ReadOnly()
        assert int(dut.m_valid.value) == 0, "the registered read shows a word one cycle later"
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.m_valid.value) == 1, "the head word must fall through without m_ready"
    assert int(dut.m_data.value) == word
    assert int(dut.count.value) == 1
    await RisingEdge(dut.clk)
    dut.m_ready.value = 1
    await RisingEdge(dut.clk)  # the pop edge
    dut.m_ready.value = 0
    await ReadOnly()
    assert int(dut.m_valid.value) == 0 and int(dut.count.value) == 0


@cocotb.test()
async def run_full_empty(dut) -> None:
    """Fill with m_ready low: s_ready drops exactly at capacity; then drain in order."""
    p = dut_params()
    capacity = p["DEPTH"] + p["OUTPUT_REG"]
    await reset(dut)
    words = [random.getrandbits(p["WIDTH"]) for _ in range(capacity + 3)]
    pushed = 0
    dut.s_valid.value = 1
    for _ in range(capacity + 6):
        dut.s_data.value = words[pushed]
        await ReadOnly()
        ready = int(dut.s_ready.value)
        assert int(dut.count.value) == pushed
        # with the output register the first word leaves the RAM the cycle after its push, so
        # the RAM fills only at DEPTH + 1 words held
        assert ready == (pushed < capacity), f"s_ready {ready} with {pushed} words held"
        await RisingEdge(dut.clk)
        pushed += ready
    dut.s_valid.value = 0
    assert pushed == capacity
    await ReadOnly()
    assert int(dut.count.value) == capacity and int(dut.s_ready.value) == 0
    await RisingEdge(dut.clk)
    dut.m_ready.value = 1
    for i in range(capacity):
        await ReadOnly()
        assert int(dut.m_valid.value) == 1 and int(dut.m_data.value) == words[i], f"word {i}"
        await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.m_valid.value) == 0 and int(dut.count.value) == 0 and int(dut.s_ready.value) == 1


@cocotb.test()
async def run_back_pressure(dut) -> None:
    """Random valid on the write side, random ready on the read side: order and data kept."""
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
        assert int(dut.count.value) == len(expected)
        assert int(dut.s_ready.value) == (len(expected) < p["DEPTH"] + p["OUTPUT_REG"])
        # the registered read shows a word pushed into an empty FIFO one cycle later
        if p["OUTPUT_REG"]:
            assert not int(dut.m_valid.value) or expected
        else:
            assert int(dut.m_valid.value) == bool(expected)
        if int(dut.m_valid.value) and m_ready:
            assert expected, "m_valid with nothing pushed"
            assert int(dut.m_data.value) == expected.popleft(), f"word {received}"
            received += 1
        if s_valid and int(dut.s_ready.value):
            expected.append(word)
        await RisingEdge(dut.clk)
    assert received > 1000


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-w{p['WIDTH']}-d{p['DEPTH']}-o{p['OUTPUT_REG']}"


CONFIGS = [
    ("icarus", {"WIDTH": 8, "DEPTH": 2, "OUTPUT_REG": 0}),
    ("icarus", {"WIDTH": 8, "DEPTH": 2, "OUTPUT_REG": 1}),
    ("icarus", {"WIDTH": 37, "DEPTH": 16, "OUTPUT_REG": 0}),
    ("icarus", {"WIDTH": 70, "DEPTH": 16, "OUTPUT_REG": 1}),
    ("verilator", {"WIDTH": 13, "DEPTH": 8, "OUTPUT_REG": 1}),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_fifo(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_FIFO_RANDOM_SEED", "20261124")),
                     params_env="KV_FIFO_PARAMS")
