"""cocotb testbench of hw/rtl/kv_axil_regs.v, the AXI4-Lite front of both register blocks.

The register side is modelled here: 16 words of memory, byte strobes honoured, SLVERR for the
16 words above them and, with FULL_RESP (codes with bit 0 set passed on), DECERR for the 16
above those; it raises reg_wr_ack / reg_rd_ack after a random number of
cycles (0 = at once, as kv_csr does; more = forwarded, as kv_mc_csr does).  cocotbext-axi's
AxiLiteMaster drives the bus with random gaps and response back-pressure, reads and writes
overlapping.

Checked: data read back equals the model (byte strobes included), every transaction gets the
response the register side gave (with FULL_RESP 0, whose register side answers OKAY or SLVERR
only, bit 0 is not stored), each access is performed exactly once (the model counts
them), the request signals stay stable while they wait for the ack, and with an immediate ack
the handshake timing of both request modes (REQ_REG 0: straight from the bus, 1: registered).
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

HW_DIR = Path(__file__).resolve().parents[2]
if str(HW_DIR) not in sys.path:
    sys.path.insert(0, str(HW_DIR))

TOPLEVEL = "kv_axil_regs"
WORDS = 16


def expected_resp(word: int) -> AxiResp:
    """The response the register model gives for a word, and so the one the bus must see."""
    return AxiResp.OKAY if word < WORDS else AxiResp.SLVERR if word < 2 * WORDS else AxiResp.DECERR


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner."""
    return json.loads(os.environ["KV_AXIL_PARAMS"])


class RegModel:
    """The register side: acks a request in its (1 + delay)-th cycle, delay random in
    0..max_delay; the access is performed in the cycle of the ack."""

    def __init__(self, dut, rng: random.Random, max_delay: int, full_resp: bool) -> None:
        self.dut = dut
        self.rng = rng
        self.max_delay = max_delay
        self.full_resp = full_resp
        self.mem = [0] * WORDS
        self.writes = 0
        self.reads = 0

    def words(self) -> int:
        """Words of the address space the test uses: memory, then SLVERR, then DECERR."""
        return (3 if self.full_resp else 2) * WORDS

    def resp(self, addr: int) -> int:
        return int(expected_resp(addr >> 2))

    async def run(self) -> None:
        dut = self.dut
        for s in (dut.reg_wr_ack, dut.reg_rd_ack, dut.reg_wr_resp, dut.reg_rd_resp, dut.reg_rd_data):
            s.value = 0
        wr_seen = rd_seen = None  # the request waiting for its ack, as first seen
        wr_left = rd_left = 0     # cycles until its ack
        while True:
            await ReadOnly()
            wr_req, rd_req = int(dut.reg_wr_req.value), int(dut.reg_rd_req.value)
            wr_ack, rd_ack = int(dut.reg_wr_ack.value), int(dut.reg_rd_ack.value)
            if wr_req:
                wr_now = (int(dut.reg_wr_addr.value), int(dut.reg_wr_data.value), int(dut.reg_wr_strb.value))
                if wr_seen is None:
                    wr_seen, wr_left = wr_now, self.rng.randint(0, self.max_delay)
                assert wr_now == wr_seen, "write request changed while waiting for its ack"
            else:
                assert wr_seen is None, "write request withdrawn before its ack"
            if rd_req:
                rd_now = int(dut.reg_rd_addr.value)
                if rd_seen is None:
                    rd_seen, rd_left = rd_now, self.rng.randint(0, self.max_delay)
                assert rd_now == rd_seen, "read request changed while waiting for its ack"
            else:
                assert rd_seen is None, "read request withdrawn before its ack"
            if wr_req and wr_ack:  # performed in this cycle
                addr, data, strb = wr_seen
                if self.resp(addr) == int(AxiResp.OKAY):
                    old = self.mem[addr >> 2]
                    mask = sum(0xFF << (8 * b) for b in range(4) if strb >> b & 1)
                    self.mem[addr >> 2] = (old & ~mask) | (data & mask)
                self.writes += 1
                wr_seen = None
            if rd_req and rd_ack:
                self.reads += 1
                rd_seen = None
            await RisingEdge(dut.clk)
            # acks of the next cycle: a waiting request whose delay has run out
            go_wr = wr_seen is not None and wr_left == 0
            go_rd = rd_seen is not None and rd_left == 0
            if wr_seen is not None:
                wr_left -= 1
            if rd_seen is not None:
                rd_left -= 1
            dut.reg_wr_ack.value = int(go_wr)
            dut.reg_wr_resp.value = self.resp(wr_seen[0]) if go_wr else 0
            dut.reg_rd_ack.value = int(go_rd)
            dut.reg_rd_resp.value = self.resp(rd_seen) if go_rd else 0
            dut.reg_rd_data.value = self.mem[rd_seen >> 2] if go_rd and (rd_seen >> 2) < WORDS else 0


@cocotb.test()
async def run_random_access(dut) -> None:
    """Random overlapping reads and writes with random gaps, back-pressure and ack delays."""
    p = dut_params()
    rng = random.Random(int(os.environ.get("KV_AXIL_RANDOM_SEED", "1")))
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    dut.rst.value = 1
    axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    for log in (axil.write_if.log, axil.read_if.log):
        log.setLevel(logging.WARNING)

    def pauses(prob: float):
        while True:
            yield int(rng.random() < prob)

    for ch in (axil.write_if.aw_channel, axil.write_if.w_channel, axil.write_if.b_channel,
               axil.read_if.ar_channel, axil.read_if.r_channel):
        ch.log.setLevel(logging.WARNING)
        ch.set_pause_generator(pauses(0.3))
    model = RegModel(dut, rng, p["MAX_DELAY"], bool(p["FULL_RESP"]))
    cocotb.start_soon(model.run())
    await ClockCycles(dut.clk, 4)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 2)

    shadow = [0] * WORDS
    space = model.words()

    async def writer(n: int) -> None:
        for _ in range(n):
            word = rng.randrange(space)
            data = rng.getrandbits(32).to_bytes(4, "little")
            lane = rng.randrange(4)
            whole = rng.random() < 0.7
            r = await (axil.write(4 * word, data) if whole else axil.write(4 * word + lane, data[:1]))
            expect = expected_resp(word)
            assert r.resp == expect, f"write {word}: {r.resp}"
            if word < WORDS:
                b = bytearray(shadow[word].to_bytes(4, "little"))
                if whole:
                    b[:] = data
                else:
                    b[lane] = data[0]
                shadow[word] = int.from_bytes(b, "little")

    async def reader(n: int) -> None:
        for _ in range(n):
            word = rng.randrange(space)
            r = await axil.read(4 * word, 4)
            expect = expected_resp(word)
            assert r.resp == expect, f"read {word}: {r.resp}"
            if word >= WORDS:
                assert int.from_bytes(r.data, "little") == 0
            # with writes in flight a word may be read before or after one; read it again
            # below, once the writer is done

    w = cocotb.start_soon(writer(300))
    r = cocotb.start_soon(reader(300))
    await w
    await r
    for word in range(WORDS):
        got = int.from_bytes((await axil.read(4 * word, 4)).data, "little")
        assert got == shadow[word] == model.mem[word], f"word {word}"
    assert model.writes == 300 and model.reads == 300 + WORDS, "each access performed exactly once"


@cocotb.test()
async def run_immediate_timing(dut) -> None:
    """Ack held high: REQ_REG 0 answers one cycle after awvalid/wvalid (arvalid), ready and
    response together; REQ_REG 1 pulses ready one cycle after and answers one cycle later.
    Both answer DECERR: the bus sees it with FULL_RESP, SLVERR (bit 0 not stored) without."""
    reg = dut_params()["REQ_REG"]
    full_resp = dut_params()["FULL_RESP"]
    cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
    for s in (dut.s_axil_awvalid, dut.s_axil_wvalid, dut.s_axil_arvalid, dut.s_axil_bready,
              dut.s_axil_rready, dut.s_axil_awaddr, dut.s_axil_araddr, dut.s_axil_wdata,
              dut.s_axil_wstrb, dut.s_axil_awprot, dut.s_axil_arprot, dut.reg_wr_resp,
              dut.reg_rd_resp):
        s.value = 0
    dut.reg_wr_ack.value = 1
    dut.reg_rd_ack.value = 1
    dut.reg_rd_data.value = 0x5A5AA5A5
    dut.reg_wr_resp.value = int(AxiResp.DECERR)
    dut.reg_rd_resp.value = int(AxiResp.DECERR)
    seen = int(AxiResp.DECERR if full_resp else AxiResp.SLVERR)
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    dut.s_axil_awvalid.value = 1
    dut.s_axil_wvalid.value = 1
    dut.s_axil_arvalid.value = 1
    await ReadOnly()
    assert int(dut.reg_wr_req.value) == 1 - reg and int(dut.reg_rd_req.value) == 1 - reg
    if reg:
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert int(dut.s_axil_awready.value) == 1 and int(dut.s_axil_arready.value) == 1
        assert int(dut.reg_wr_req.value) == 1 and int(dut.reg_rd_req.value) == 1, "captured"
        assert int(dut.s_axil_bvalid.value) == 0 and int(dut.s_axil_rvalid.value) == 0
        await RisingEdge(dut.clk)
        dut.s_axil_awvalid.value = 0
        dut.s_axil_wvalid.value = 0
        dut.s_axil_arvalid.value = 0
        await ReadOnly()
        assert int(dut.s_axil_awready.value) == 0 and int(dut.s_axil_arready.value) == 0
    else:
        await RisingEdge(dut.clk)
        await ReadOnly()
        assert int(dut.s_axil_awready.value) == 1 and int(dut.s_axil_wready.value) == 1
        assert int(dut.s_axil_arready.value) == 1
    assert int(dut.s_axil_bvalid.value) == 1 and int(dut.s_axil_bresp.value) == seen
    assert int(dut.s_axil_rvalid.value) == 1
    assert int(dut.s_axil_rresp.value) == seen
    assert int(dut.s_axil_rdata.value) == 0x5A5AA5A5
    assert int(dut.reg_wr_req.value) == 0 and int(dut.reg_rd_req.value) == 0, "one at a time"
    await RisingEdge(dut.clk)
    dut.s_axil_awvalid.value = 0
    dut.s_axil_wvalid.value = 0
    dut.s_axil_arvalid.value = 0
    await ReadOnly()
    # responses not accepted (bready/rready low): they hold, and no new request is offered
    assert int(dut.s_axil_bvalid.value) == 1 and int(dut.s_axil_rvalid.value) == 1
    await RisingEdge(dut.clk)
    dut.s_axil_bready.value = 1
    dut.s_axil_rready.value = 1
    await RisingEdge(dut.clk)
    await ReadOnly()
    assert int(dut.s_axil_bvalid.value) == 0 and int(dut.s_axil_rvalid.value) == 0


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-a{p['ADDR_WIDTH']}-r{p['REQ_REG']}-f{p['FULL_RESP']}-d{p['MAX_DELAY']}"


# MAX_DELAY is the register model's, not an HDL parameter (run_cocotb gets the HDL ones only)
CONFIGS = [
    ("icarus", {"ADDR_WIDTH": 12, "REQ_REG": 0, "FULL_RESP": 0, "MAX_DELAY": 0}),  # as kv_csr
    ("icarus", {"ADDR_WIDTH": 12, "REQ_REG": 0, "FULL_RESP": 1, "MAX_DELAY": 6}),
    ("icarus", {"ADDR_WIDTH": 12, "REQ_REG": 1, "FULL_RESP": 1, "MAX_DELAY": 4}),  # as kv_mc_csr
    ("verilator", {"ADDR_WIDTH": 8, "REQ_REG": 1, "FULL_RESP": 1, "MAX_DELAY": 3}),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_axil_regs(sim: str, params: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    import tools

    hdl = {k: params[k] for k in ("ADDR_WIDTH", "REQ_REG", "FULL_RESP")}
    monkeypatch.setenv("KV_AXIL_PARAMS", json.dumps(params))  # the simulator inherits it
    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL), hdl,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=20261124, params_env="KV_AXIL_HDL_PARAMS")
