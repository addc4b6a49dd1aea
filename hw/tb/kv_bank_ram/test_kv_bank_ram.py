"""cocotb testbench of hw/rtl/kv_bank_ram.v, the RAM of every hash bank and rule table.

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_bank_ram``
at the bottom builds and runs them with ``cocotb_tools.runner``.

A scoreboard keeps a Python copy of the memory and the read each port started RD_LAT edges
ago, and checks both read ports every cycle. Checked: read latency RD_LAT on both ports;
read-first on port A (a read of the word written in the same cycle returns the old word, as the
module header says for simulation); port B "no change" with RD_PORTS = 2 (in a write cycle its
read data keep their last value, otherwise it reads rd1_addr); rd1_data zero with RD_PORTS = 1;
random traffic with the two ports often on the same address.
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
from cocotb.triggers import ReadOnly, RisingEdge

HW_DIR = Path(__file__).resolve().parents[2]
if str(HW_DIR) not in sys.path:
    sys.path.insert(0, str(HW_DIR))

TOPLEVEL = "kv_bank_ram"


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner."""
    return json.loads(os.environ["KV_BANK_RAM_PARAMS"])


class TB:
    """Owns the clock and the scoreboard: a copy of the memory and of each port's read
    registers (the data register and, with RD_LAT = 2, the output register behind it)."""

    def __init__(self, dut) -> None:
        self.dut = dut
        self.p = dut_params()
        self.depth = 2 ** self.p["ADDR_W"]
        self.mem = [0] * self.depth  # after start(): every word and read register zero
        self.reg_a = self.pipe_a = 0
        self.reg_b = self.pipe_b = 0
        self.cycles = 0
        cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
        for name in ("wr_en", "wr_addr", "wr_data", "rd_addr", "rd1_addr"):
            getattr(dut, name).value = 0

    async def start(self) -> None:
        """Bring the RAM to a known state whatever an earlier test left: zero every word, then
        read word 0 on both ports until both read registers hold it (nothing checked)."""
        await RisingEdge(self.dut.clk)
        for addr in range(self.depth):
            await self.cycle(rd=0, rd1=0, wr=(addr, 0), check=False)
        for _ in range(3):
            await self.cycle(rd=0, rd1=0, wr=None, check=False)
        self.cycles = 0

    def expected(self) -> tuple[int, int]:
        """rd_data and rd1_data as the scoreboard has them now."""
        two_stage = self.p["RD_LAT"] == 2
        a = self.pipe_a if two_stage else self.reg_a
        b = self.pipe_b if two_stage else self.reg_b
        return a, (b if self.p["RD_PORTS"] == 2 else 0)

    async def cycle(self, *, rd: int, rd1: int, wr: tuple[int, int] | None,
                    check: bool = True) -> None:
        """Drive one cycle (a read on port A; a write, or else a read, on port B), check both
        outputs in it, then account for the edge that ends it."""
        dut = self.dut
        dut.rd_addr.value = rd
        dut.rd1_addr.value = rd1
        dut.wr_en.value = int(wr is not None)
        dut.wr_addr.value = wr[0] if wr else random.randrange(self.depth)
        dut.wr_data.value = wr[1] if wr else random.getrandbits(self.p["WIDTH"])
        await ReadOnly()
        if check:
            a, b = self.expected()
            assert int(dut.rd_data.value) == a, f"rd_data, cycle {self.cycles}"
            assert int(dut.rd1_data.value) == b, f"rd1_data, cycle {self.cycles}"
        self.cycles += 1
        await RisingEdge(dut.clk)
        # the edge: both reads see the memory before this cycle's write (port A read-first,
        # port B no change: its data register keeps its word in a write cycle)
        self.pipe_a, self.pipe_b = self.reg_a, self.reg_b
        self.reg_a = self.mem[rd]
        if wr is None:
            self.reg_b = self.mem[rd1]
        else:
            self.mem[wr[0]] = wr[1]


@cocotb.test()
async def run_write_then_read(dut) -> None:
    """Every word written, then read back on both ports (port B in cycles without a write)."""
    tb = TB(dut)
    await tb.start()
    words = [random.getrandbits(tb.p["WIDTH"]) for _ in range(tb.depth)]
    for addr, word in enumerate(words):
        await tb.cycle(rd=addr, rd1=addr, wr=(addr, word))
    for addr in range(tb.depth):
        await tb.cycle(rd=addr, rd1=tb.depth - 1 - addr, wr=None)
    for _ in range(3):
        await tb.cycle(rd=0, rd1=0, wr=None)
    assert tb.mem == words


@cocotb.test()
async def run_collisions(dut) -> None:
    """Port A reads the word port B writes in the same cycle (old word), port B writes the word
    it read the cycle before, and back-to-back writes of one address."""
    tb = TB(dut)
    await tb.start()
    addr = tb.depth // 2
    for _ in range(20):
        word = random.getrandbits(tb.p["WIDTH"])
        await tb.cycle(rd=addr, rd1=addr, wr=(addr, word))
        await tb.cycle(rd=addr, rd1=addr, wr=None)
        await tb.cycle(rd=addr, rd1=addr, wr=(addr, word ^ 1))
    for _ in range(3):
        await tb.cycle(rd=addr, rd1=addr, wr=None)


@cocotb.test()
async def run_random(dut) -> None:
    """Random reads on both ports and random writes, addresses drawn from a few hot words so
    that the ports meet often; phases of few and of many writes."""
    tb = TB(dut)
    await tb.start()
    hot = [random.randrange(tb.depth) for _ in range(4)]
    writes = 0
    for n in range(4000):
        write_rate = (0.1, 0.5, 0.9)[(n // 500) % 3]

        def addr() -> int:
            return random.choice(hot) if random.random() < 0.5 else random.randrange(tb.depth)

        wr = (addr(), random.getrandbits(tb.p["WIDTH"])) if random.random() < write_rate else None
        writes += wr is not None
        await tb.cycle(rd=addr(), rd1=addr(), wr=wr)
    assert writes > 1000 and tb.cycles == 4000


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-w{p['WIDTH']}-a{p['ADDR_W']}-lat{p['RD_LAT']}-ports{p['RD_PORTS']}"


CONFIGS = [
    ("icarus", {"WIDTH": 37, "ADDR_W": 4, "RD_LAT": 1, "RD_PORTS": 1}),
    ("icarus", {"WIDTH": 37, "ADDR_W": 4, "RD_LAT": 2, "RD_PORTS": 1}),
    ("icarus", {"WIDTH": 37, "ADDR_W": 4, "RD_LAT": 1, "RD_PORTS": 2}),
    ("icarus", {"WIDTH": 1, "ADDR_W": 1, "RD_LAT": 2, "RD_PORTS": 2}),
    ("verilator", {"WIDTH": 321, "ADDR_W": 6, "RD_LAT": 2, "RD_PORTS": 2}),
    ("yosys", {"WIDTH": 70, "ADDR_W": 5, "RD_LAT": 2, "RD_PORTS": 2}),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_bank_ram(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_BANK_RAM_RANDOM_SEED", "20261126")),
                     params_env="KV_BANK_RAM_PARAMS")
