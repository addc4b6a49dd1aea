"""cocotb testbench of hw/rtl/kv_csr.v, the AXI4-Lite CSR and command mailbox (docs/registers.md).

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_csr`` at the
bottom builds and runs them with ``cocotb_tools.runner`` for several simulators and parameter
sets, each in its own directory under hw/build/kv_csr/.

The engine is not needed: ``EngineModel`` stands in for kv_engine's stream behaviour.  It takes
request beats with a random tready, checks each beat bit for bit against the request the test
wrote through the registers (packed with pynq_kv.regcodec), and answers after a random latency with
a response computed from every request field (``engine_response``), which the test then reads
back through the RSP_* registers.  All addresses, fields and codes come from pynq_kv.regmap, the
generated twin of the kv_regs.vh the RTL includes.
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
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

HW_DIR = Path(__file__).resolve().parents[2]
REPO_DIR = HW_DIR.parent
for _p in (REPO_DIR, HW_DIR):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from pynq_kv import regcodec  # noqa: E402
from pynq_kv import regmap as rm  # noqa: E402

TOPLEVEL = "kv_csr"
DEFAULT_SEED = 0x70796E712D6B7631
M32 = 0xFFFFFFFF


def dut_params() -> dict:
    """HDL parameters of this run (defaults = RTL defaults)."""
    params = {"KEY_W": 288, "VALUE_W": 32, "WAYS": 4, "ROWS": 8192, "STASH": 8, "RULES": 256,
              "PRIO_W": 16, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8, "ADDR_WIDTH": 12, "CHANGELOG_DEPTH": 0}
    params.update(json.loads(os.environ.get("KV_CSR_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def engine_response(req: dict, key_w: int, value_w: int) -> dict:
    """The stand-in engine's answer: every response field depends on request fields."""
    op = req["op"]
    known = op in rm.OPCODES.values()
    kmask = (1 << key_w) - 1
    return {
        "op": op,
        "status": rm.ST_REFUSED if not known else (op * 5 + req["flag"] + req["bank"]) % 15,
        "flag": req["flag"] ^ (op & 1),
        "entry": req["entry"] ^ 0xA5A,
        "prio": req["prio"] ^ 0xDEADBEEF,
        "data64": (req["index2"] << 40) | (req["bank2"] << 36) | (req["index"] << 8) | (req["bank"] << 4) | (op & 15),
        "key": req["key"] ^ (req["mask"] >> 1),
        "mask": ~req["mask"] & kmask,
        "value": (req["value"] + op) % (1 << value_w),
    }


class EngineModel:
    """Request sink + response source with the stream behaviour of kv_engine."""

    def __init__(self, tb):
        self.tb = tb
        self.dut = tb.dut
        self.rng = random.Random(cocotb.RANDOM_SEED + 7)
        self.ready_prob = 1.0       # probability of tready each cycle
        self.latency = (1, 8)       # response latency range in cycles
        self.drop_next = False      # lose the next response (to test ABORT)
        self.beats: list[tuple[int, int]] = []   # (tdata, tuser) of every request taken
        self.pending: deque[tuple[int, int, int]] = deque()  # (due cycle, tdata, tuser)
        self.inject: deque[tuple[int, int]] = deque()        # spurious responses (tdata, tuser)
        self.cycle = 0
        self.errors: list[str] = []
        self.req_layout = regcodec.req_layout(tb.key_w, tb.value_w)
        self.rsp_layout = regcodec.rsp_layout(tb.key_w, tb.value_w)
        self.last_tdata = None
        cocotb.start_soon(self._run())

    async def _run(self):
        dut = self.dut
        ready = 0
        dut.m_axis_req_tready.value = 0
        dut.s_axis_rsp_tvalid.value = 0
        dut.s_axis_rsp_tdata.value = 0
        dut.s_axis_rsp_tuser.value = 0
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            if int(dut.rst.value):
                ready = 0
                dut.m_axis_req_tready.value = 0
                dut.s_axis_rsp_tvalid.value = 0
                continue
            if _uint(dut.s_axis_rsp_tready.value) != 1:
                self.errors.append(f"cycle {self.cycle}: s_axis_rsp_tready low")
            valid = _uint(dut.m_axis_req_tvalid.value)
            if valid:
                tdata = _uint(dut.m_axis_req_tdata.value)
                if self.last_tdata is not None and tdata != self.last_tdata:
                    self.errors.append(f"cycle {self.cycle}: tdata changed while tvalid and not taken")
                self.last_tdata = tdata
                if ready:
                    tuser = _uint(dut.m_axis_req_tuser.value)
                    self.beats.append((tdata, tuser))
                    self.last_tdata = None
                    lo, hi = self.latency
                    due = self.cycle + self.rng.randint(lo, hi)
                    if self.drop_next:
                        self.drop_next = False
                    else:
                        self.pending.append((due, tdata, tuser))
            # next cycle's outputs
            ready = int(self.rng.random() < self.ready_prob)
            dut.m_axis_req_tready.value = ready
            if self.pending and self.pending[0][0] <= self.cycle:
                _, tdata, tuser = self.pending.popleft()
                rsp = engine_response(regcodec.unpack(self.req_layout, tdata), self.tb.key_w, self.tb.value_w)
                dut.s_axis_rsp_tdata.value = regcodec.pack(self.rsp_layout, rsp)
                dut.s_axis_rsp_tuser.value = tuser
                dut.s_axis_rsp_tvalid.value = 1
            elif self.inject:
                tdata, tuser = self.inject.popleft()
                dut.s_axis_rsp_tdata.value = tdata
                dut.s_axis_rsp_tuser.value = tuser
                dut.s_axis_rsp_tvalid.value = 1
            else:
                dut.s_axis_rsp_tvalid.value = 0


class TB:
    def __init__(self, dut):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.p = dut_params()
        self.key_w = int(self.p["KEY_W"])
        self.value_w = int(self.p["VALUE_W"])
        self.tag_w = int(self.p["TAG_W"])
        self.key_words = (self.key_w + 31) // 32  # 144-bit keys: 4.5 words
        self.value_words = self.value_w // 32
        assert len(dut.m_axis_req_tdata) == regcodec.req_width(self.key_w, self.value_w)
        assert len(dut.s_axis_rsp_tdata) == regcodec.rsp_width(self.key_w, self.value_w)
        assert len(dut.counters) == 64 * rm.NUM_COUNTERS

        dut.rst.value = 1
        dut.counters.value = 0
        for name in ("cl_valid", "cl_seq", "cl_del", "cl_status", "cl_key", "cl_value", "cl_level",
                     "cl_dropped", "cl_overflowed"):
            getattr(dut, name).value = 0
        cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        for ch in (self.axil.write_if.aw_channel, self.axil.write_if.w_channel, self.axil.write_if.b_channel,
                   self.axil.read_if.ar_channel, self.axil.read_if.r_channel):
            ch.log.setLevel(logging.WARNING)
        self.axil.write_if.log.setLevel(logging.WARNING)
        self.axil.read_if.log.setLevel(logging.WARNING)
        self.engine = EngineModel(self)
        self.counter_base: list[int] = []
        self.counter_step: list[int] = []
        self.cycle = 0
        cocotb.start_soon(self._counters())

    async def _counters(self):
        """counter c = base_c + cycle * step_c (mod 2^64), cycle counted by this driver."""
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1
            if self.counter_base:
                v = 0
                for c, (b, s) in enumerate(zip(self.counter_base, self.counter_step)):
                    v |= ((b + self.cycle * s) & ((1 << 64) - 1)) << (64 * c)
                self.dut.counters.value = v

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    def set_idle(self, rng: random.Random | None, prob: float = 0.3):
        """Random idle cycles on every AXI-Lite channel (valid gaps and bready/rready back-pressure)."""
        def gen():
            while True:
                yield int(rng.random() < prob)
        for ch in (self.axil.write_if.aw_channel, self.axil.write_if.w_channel, self.axil.write_if.b_channel,
                   self.axil.read_if.ar_channel, self.axil.read_if.r_channel):
            if rng is None:
                ch.clear_pause_generator()
            else:
                ch.set_pause_generator(gen())

    # -- register access -----------------------------------------------------------------
    async def rd(self, addr: int, expect_resp=AxiResp.OKAY) -> int:
        r = await self.axil.read(addr, 4)
        assert r.resp == expect_resp, f"read {addr:#x}: resp {r.resp} != {expect_resp}"
        return int.from_bytes(r.data, "little")

    async def wr(self, addr: int, value: int, expect_resp=AxiResp.OKAY) -> None:
        r = await self.axil.write(addr, (value & M32).to_bytes(4, "little"))
        assert r.resp == expect_resp, f"write {addr:#x}: resp {r.resp} != {expect_resp}"

    async def status(self) -> int:
        return await self.rd(rm.REG_STATUS)

    # -- mailbox ---------------------------------------------------------------------------
    async def write_request(self, req: dict) -> None:
        for reg, name in ((rm.REG_REQ_OP, "op"), (rm.REG_REQ_FLAG, "flag"), (rm.REG_REQ_BANK, "bank"),
                          (rm.REG_REQ_INDEX, "index"), (rm.REG_REQ_BANK2, "bank2"),
                          (rm.REG_REQ_INDEX2, "index2"), (rm.REG_REQ_ENTRY, "entry"), (rm.REG_REQ_PRIO, "prio")):
            await self.wr(reg, req[name])
        for base, name, n in ((rm.REG_REQ_KEY, "key", self.key_words), (rm.REG_REQ_MASK, "mask", self.key_words),
                              (rm.REG_REQ_VALUE, "value", self.value_words)):
            for i, w in enumerate(regcodec.words(req[name], n)):
                await self.wr(base + 4 * i, w)

    async def wait_done(self, limit: int = 200) -> int:
        for _ in range(limit):
            st = await self.status()
            if not st & rm.STATUS_BUSY:
                return st
        raise AssertionError("mailbox stays BUSY")

    async def read_response(self) -> dict:
        rsp = {
            "op": await self.rd(rm.REG_RSP_OP),
            "status": await self.rd(rm.REG_RSP_STATUS),
            "flag": await self.rd(rm.REG_RSP_FLAG),
            "entry": await self.rd(rm.REG_RSP_ENTRY),
            "prio": await self.rd(rm.REG_RSP_PRIO),
            "data64": await self.rd(rm.REG_RSP_DATA_LO) | (await self.rd(rm.REG_RSP_DATA_HI) << 32),
        }
        for base, name, n in ((rm.REG_RSP_KEY, "key", self.key_words), (rm.REG_RSP_MASK, "mask", self.key_words),
                              (rm.REG_RSP_VALUE, "value", self.value_words)):
            rsp[name] = regcodec.from_words([await self.rd(base + 4 * i) for i in range(n)])
        return rsp

    def random_request(self, rng: random.Random, op: int) -> dict:
        lay = regcodec.req_layout(self.key_w, self.value_w)
        req = {name: rng.getrandbits(w) for name, (_, w) in lay.items()}
        req["op"] = op
        return req

    async def transact(self, req: dict) -> None:
        """One full mailbox round trip with checks of the beat and the response registers."""
        beats = len(self.engine.beats)
        tag = await self.rd(rm.REG_TAG)
        await self.write_request(req)
        await self.wr(rm.REG_CTRL, rm.CTRL_GO)
        st = await self.wait_done()
        assert st & rm.STATUS_DONE and not st & rm.STATUS_PENDING, f"STATUS {st:#x}"
        assert len(self.engine.beats) == beats + 1, "GO must send exactly one beat"
        tdata, tuser = self.engine.beats[-1]
        want = regcodec.pack(regcodec.req_layout(self.key_w, self.value_w), req)
        assert tdata == want, f"request beat {tdata:#x} != {want:#x}"
        assert tuser == (tag + 1) % (1 << self.tag_w), f"tuser {tuser} after TAG {tag}"
        expect = engine_response(req, self.key_w, self.value_w)
        got = await self.read_response()
        assert got == expect, f"op {req['op']}: response {got} != {expect}"
        assert await self.rd(rm.REG_RSP_TAG) == tuser
        refused = expect["status"] == rm.ST_REFUSED
        assert bool(st & rm.STATUS_REFUSED) == refused
        assert (st & rm.STATUS_RSP_STATUS) >> rm.STATUS_RSP_STATUS_SHIFT == expect["status"]
        assert not st & rm.STATUS_ERROR, f"STATUS {st:#x}"

    def check(self):
        for e in self.engine.errors[:10]:
            self.log.error("%s", e)
        assert not self.engine.errors, self.engine.errors[0]


@cocotb.test()
async def run_id_geometry(dut):
    """ID, VERSION and geometry read back; bad addresses and read-only writes answer SLVERR."""
    tb = TB(dut)
    await tb.reset()
    p = tb.p
    expect = {
        rm.REG_ID: rm.ID_MAGIC, rm.REG_VERSION: rm.VERSION, rm.REG_KEY_W: p["KEY_W"],
        rm.REG_VALUE_W: p["VALUE_W"], rm.REG_WAYS: p["WAYS"], rm.REG_ROWS: p["ROWS"],
        rm.REG_STASH: p["STASH"], rm.REG_RULES: p["RULES"], rm.REG_PRIO_W: p["PRIO_W"],
        rm.REG_HASH_SEED_LO: p["HASH_SEED"] & M32, rm.REG_HASH_SEED_HI: p["HASH_SEED"] >> 32,
        rm.REG_TAG_W: p["TAG_W"], rm.REG_NUM_COUNTERS: rm.NUM_COUNTERS,
    }
    for addr, value in expect.items():
        assert await tb.rd(addr) == value, f"register {addr:#x}"
    assert (await tb.rd(rm.REG_ID)).to_bytes(4, "big") == b"PQKV"
    assert await tb.status() == 0, "idle mailbox after reset"

    # unmapped addresses, unused array words, read-only registers: SLVERR, read 0, nothing changes
    bad_reads = [0x034, 0x07C, 0x0E0, 0x3FC, 0x700, 0xFFC,
                 rm.REG_REQ_KEY + 4 * tb.key_words, rm.REG_RSP_VALUE + 4 * tb.value_words,
                 rm.REG_COUNTER + 8 * rm.NUM_COUNTERS]
    if tb.key_words < rm.REG_REQ_KEY_SIZE:
        bad_reads.append(rm.REG_REQ_MASK + 4 * (rm.REG_REQ_MASK_SIZE - 1))
    for addr in bad_reads:
        assert await tb.rd(addr, AxiResp.SLVERR) == 0, f"read {addr:#x}"
    st = await tb.status()
    assert st & rm.STATUS_ERR_BAD_ADDR and st & rm.STATUS_ERROR
    await tb.wr(rm.REG_CTRL, rm.CTRL_CLR_ERR)
    assert await tb.status() == 0
    for addr in (rm.REG_ID, rm.REG_KEY_W, rm.REG_STATUS, rm.REG_RSP_OP, rm.REG_RSP_KEY, rm.REG_COUNTER, 0x034,
                 rm.REG_REQ_VALUE + 4 * tb.value_words):
        await tb.wr(addr, 0x12345678, AxiResp.SLVERR)
    assert await tb.rd(rm.REG_ID) == rm.ID_MAGIC
    assert await tb.rd(rm.REG_KEY_W) == p["KEY_W"]
    assert await tb.status() == rm.STATUS_ERROR | rm.STATUS_ERR_BAD_ADDR
    await tb.wr(rm.REG_CTRL, rm.CTRL_CLR_ERR)
    assert await tb.rd(rm.REG_CTRL) == 0

    # request registers: read back, truncated to their field width; byte strobes honoured
    lay = regcodec.req_layout(tb.key_w, tb.value_w)
    for reg, name in ((rm.REG_REQ_OP, "op"), (rm.REG_REQ_BANK, "bank"), (rm.REG_REQ_INDEX, "index"),
                      (rm.REG_REQ_ENTRY, "entry"), (rm.REG_REQ_PRIO, "prio")):
        await tb.wr(reg, M32)
        assert await tb.rd(reg) == (1 << lay[name][1]) - 1, name
    await tb.wr(rm.REG_REQ_PRIO, 0x11223344)
    await tb.axil.write(rm.REG_REQ_PRIO + 2, b"\xAA")  # wstrb = 0100
    assert await tb.rd(rm.REG_REQ_PRIO) == 0x11AA3344
    # each register merges the strobed bytes into its own value, not another register's
    await tb.wr(rm.REG_REQ_INDEX, 0x00ABCDEF)
    await tb.wr(rm.REG_REQ_KEY, 0x01020304)
    await tb.wr(rm.REG_REQ_MASK + 4, 0x05060708)
    await tb.wr(rm.REG_REQ_VALUE, 0x090A0B0C)
    await tb.axil.write(rm.REG_REQ_INDEX + 1, b"\x55")  # wstrb = 0010
    await tb.axil.write(rm.REG_REQ_KEY + 3, b"\x66")  # wstrb = 1000
    await tb.axil.write(rm.REG_REQ_MASK + 4, b"\x77")  # wstrb = 0001
    await tb.axil.write(rm.REG_REQ_VALUE + 1, b"\x88\x99")  # wstrb = 0110
    assert await tb.rd(rm.REG_REQ_INDEX) == 0x00AB55EF
    assert await tb.rd(rm.REG_REQ_KEY) == 0x66020304
    assert await tb.rd(rm.REG_REQ_MASK + 4) == 0x05060777
    assert await tb.rd(rm.REG_REQ_VALUE) == 0x0999880C
    await tb.wr(rm.REG_REQ_KEY + 4 * (tb.key_words - 1), 0xCAFEF00D)
    top_bits = tb.key_w - 32 * (tb.key_words - 1)  # 16 for 144-bit keys: the rest reads 0
    assert await tb.rd(rm.REG_REQ_KEY + 4 * (tb.key_words - 1)) == 0xCAFEF00D & ((1 << top_bits) - 1)
    assert await tb.status() == 0
    assert not tb.engine.beats, "no request without GO"
    tb.check()


@cocotb.test()
async def run_mailbox_all_ops(dut):
    """A mailbox round trip of every opcode (and unknown ones, answered REFUSED)."""
    tb = TB(dut)
    rng = random.Random(cocotb.RANDOM_SEED)
    await tb.reset()
    ops = list(rm.OPCODES.values()) + [0, 5, 31]
    for round_ in range(2):
        tb.engine.ready_prob = 1.0 if round_ == 0 else 0.4
        tb.engine.latency = (1, 1) if round_ == 0 else (1, 20)
        for op in ops:
            await tb.transact(tb.random_request(rng, op))
    assert await tb.rd(rm.REG_TAG) == (2 * len(ops)) % (1 << tb.tag_w)
    tb.check()


@cocotb.test()
async def run_mailbox_misuse(dut):
    """GO while busy, writes while pending, stray responses, ABORT: errors, never a wedged bus."""
    tb = TB(dut)
    rng = random.Random(cocotb.RANDOM_SEED + 1)
    await tb.reset()
    eng = tb.engine

    # engine not ready: the request stays PENDING, REQ_* are locked, a second GO is refused
    eng.ready_prob = 0.0
    req = tb.random_request(rng, rm.OP_SET)
    await tb.write_request(req)
    await tb.wr(rm.REG_CTRL, rm.CTRL_GO)
    st = await tb.status()
    assert st & rm.STATUS_BUSY and st & rm.STATUS_PENDING and not st & rm.STATUS_ERROR
    await tb.wr(rm.REG_REQ_OP, rm.OP_DEL, AxiResp.SLVERR)
    await tb.wr(rm.REG_REQ_KEY, 0xFFFFFFFF ^ (req["key"] & M32), AxiResp.SLVERR)
    assert await tb.rd(rm.REG_REQ_OP) == rm.OP_SET
    await tb.wr(rm.REG_CTRL, rm.CTRL_GO, AxiResp.SLVERR)
    st = await tb.status()
    assert st & rm.STATUS_ERR_REQ_LOCKED and st & rm.STATUS_ERR_GO_BUSY and st & rm.STATUS_ERROR
    # ABORT is ignored while PENDING (a stream beat cannot be withdrawn)
    await tb.wr(rm.REG_CTRL, rm.CTRL_ABORT)
    assert (await tb.status()) & rm.STATUS_PENDING
    await tb.wr(rm.REG_CTRL, rm.CTRL_CLR_ERR)
    assert await tb.status() == rm.STATUS_BUSY | rm.STATUS_PENDING

    # accepted, slow response: REQ_* writable again, GO still refused, a stray response dropped
    eng.latency = (60, 60)
    eng.ready_prob = 1.0
    for _ in range(50):
        st = await tb.status()
        if not st & rm.STATUS_PENDING:
            break
    assert st & rm.STATUS_BUSY and not st & rm.STATUS_PENDING
    assert len(eng.beats) == 1 and eng.beats[0][0] == regcodec.pack(regcodec.req_layout(tb.key_w, tb.value_w), req)
    await tb.wr(rm.REG_REQ_OP, rm.OP_GET)
    await tb.wr(rm.REG_CTRL, rm.CTRL_GO, AxiResp.SLVERR)
    tag = await tb.rd(rm.REG_TAG)
    eng.inject.append((regcodec.pack(regcodec.rsp_layout(tb.key_w, tb.value_w), {"op": 3, "status": 7}),
                       (tag + 1) % (1 << tb.tag_w)))
    for _ in range(10):
        st = await tb.status()
        if st & rm.STATUS_ERR_UNEXPECTED_RSP:
            break
    assert st & rm.STATUS_ERR_UNEXPECTED_RSP and st & rm.STATUS_ERR_GO_BUSY and st & rm.STATUS_BUSY
    st = await tb.wait_done()
    assert st & rm.STATUS_DONE
    assert await tb.read_response() == engine_response(req, tb.key_w, tb.value_w)
    assert len(eng.beats) == 1, "refused GOs must not send"

    # a response while idle is dropped too
    eng.inject.append((regcodec.pack(regcodec.rsp_layout(tb.key_w, tb.value_w), {"op": 1}), tag))
    await ClockCycles(dut.clk, 5)
    await tb.wr(rm.REG_CTRL, rm.CTRL_CLR_ERR)
    eng.inject.append((regcodec.pack(regcodec.rsp_layout(tb.key_w, tb.value_w), {"op": 1}), tag))
    await ClockCycles(dut.clk, 5)
    st = await tb.status()
    assert st & rm.STATUS_ERR_UNEXPECTED_RSP and st & rm.STATUS_DONE
    assert await tb.rd(rm.REG_RSP_OP) == rm.OP_SET, "a stray response must not overwrite RSP_*"
    await tb.wr(rm.REG_CTRL, rm.CTRL_CLR_ERR)

    # a lost response: ABORT frees the mailbox; the late response is then unexpected
    eng.latency = (1, 4)
    eng.drop_next = True
    await tb.write_request(tb.random_request(rng, rm.OP_READ_SLOT))
    await tb.wr(rm.REG_CTRL, rm.CTRL_GO)
    await ClockCycles(dut.clk, 30)
    st = await tb.status()
    assert st & rm.STATUS_BUSY and not st & rm.STATUS_PENDING and not st & rm.STATUS_DONE
    await tb.wr(rm.REG_CTRL, rm.CTRL_ABORT)
    st = await tb.status()
    assert not st & rm.STATUS_BUSY and not st & rm.STATUS_DONE
    for op in (rm.OP_READ_COUNTER, rm.OP_MOVE):
        await tb.transact(tb.random_request(rng, op))
    tb.check()


@cocotb.test()
async def run_counters_atomic(dut):
    """64-bit counters change every cycle with carries into the high word; LO then HI is atomic."""
    tb = TB(dut)
    rng = random.Random(cocotb.RANDOM_SEED + 2)
    n = rm.NUM_COUNTERS
    tb.counter_base = [((1 << 32) - rng.randint(1, 64)) + (rng.getrandbits(31) << 32) for _ in range(n)]
    tb.counter_base[-1] = (1 << 64) - 40  # wraps modulo 2^64 during the test
    tb.counter_step = [rng.choice([1, 3, (1 << 28) + 1, (1 << 31) - 1]) for _ in range(n)]
    await tb.reset()
    tb.set_idle(rng, 0.3)

    def consistent(c: int, value: int, cyc0: int, cyc1: int) -> bool:
        b, s = tb.counter_base[c], tb.counter_step[c]
        return any(((b + k * s) & ((1 << 64) - 1)) == value for k in range(cyc0 - 2, cyc1 + 2))

    lo_addr = lambda c: rm.REG_COUNTER + 8 * c
    checked = 0
    for _ in range(60):
        c = rng.randrange(n)
        cyc0 = tb.cycle
        lo = await tb.rd(lo_addr(c))
        cyc1 = tb.cycle
        if rng.random() < 0.4:  # interleave another counter's LO/HI between them
            d = (c + rng.randrange(1, n)) % n  # (a LO read of c itself would re-latch c)
            lo_d = await tb.rd(lo_addr(d))
            hi_d = await tb.rd(lo_addr(d) + 4)
            assert consistent(d, lo_d | hi_d << 32, cyc0, tb.cycle), f"counter {d}"
        await ClockCycles(dut.clk, rng.randint(0, 40))
        hi = await tb.rd(lo_addr(c) + 4)
        assert consistent(c, lo | hi << 32, cyc0, cyc1), f"counter {c}: {lo | hi << 32:#x} not atomic"
        checked += 1
    tb.log.info("%d atomic counter reads", checked)
    tb.check()


@cocotb.test()
async def run_random_traffic(dut):
    """Random ops with AXI-Lite idle/back-pressure on every channel and a random-speed engine,
    counter reads running concurrently."""
    tb = TB(dut)
    rng = random.Random(cocotb.RANDOM_SEED + 3)
    await tb.reset()
    tb.set_idle(rng, 0.4)
    tb.engine.ready_prob = 0.5
    tb.engine.latency = (1, 12)
    tb.counter_base = [rng.getrandbits(64) for _ in range(rm.NUM_COUNTERS)]
    tb.counter_step = [rng.randint(1, 1 << 40) for _ in range(rm.NUM_COUNTERS)]

    async def reader():
        for _ in range(30):
            c = rng.randrange(rm.NUM_COUNTERS)
            cyc0 = tb.cycle
            lo = await tb.rd(rm.REG_COUNTER + 8 * c)
            cyc1 = tb.cycle
            hi = await tb.rd(rm.REG_COUNTER + 8 * c + 4)
            v = lo | hi << 32
            b, s = tb.counter_base[c], tb.counter_step[c]
            assert any(((b + k * s) & ((1 << 64) - 1)) == v for k in range(cyc0 - 2, cyc1 + 2))

    task = cocotb.start_soon(reader())
    ops = list(rm.OPCODES.values()) + [7]
    for _ in range(int(os.environ.get("KV_CSR_OPS", "12"))):
        await tb.transact(tb.random_request(rng, rng.choice(ops)))
    await task
    tb.check()


@cocotb.test()
async def run_changelog_registers(dut):
    """CL_* (engine.md §10): the head record, level, depth, drops and flags read back as
    kv_changelog presents them; CL_DATA gives the key words then the value words, one per read,
    then 0, and starts again after a CL_STATUS read or a POP (not after other reads);
    CL_DROPPED_LO latches the high word; CL_CTRL bits leave as one-cycle strobes (nothing for a
    0 bit); the word after CL_DATA and read-only writes answer SLVERR. Without a log
    (CHANGELOG_DEPTH 0) the registers read 0 whatever the inputs."""
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(cocotb.RANDOM_SEED + 11)
    strobes = {"cl_pop": 0, "cl_clear_overflow": 0}

    async def watch():
        while True:
            await RisingEdge(dut.clk)
            for name in strobes:
                strobes[name] += _uint(getattr(dut, name).value)

    cocotb.start_soon(watch())
    assert await tb.rd(rm.REG_CL_DEPTH) == tb.p["CHANGELOG_DEPTH"]
    on = int(tb.p["CHANGELOG_DEPTH"] != 0)
    for _ in range(4):
        drive = {"cl_valid": rng.getrandbits(1), "cl_seq": rng.getrandbits(64), "cl_del": rng.getrandbits(1),
                "cl_status": rng.getrandbits(4), "cl_key": rng.getrandbits(tb.key_w),
                "cl_value": rng.getrandbits(tb.value_w), "cl_level": rng.getrandbits(17),
                "cl_overflowed": rng.getrandbits(1)}
        for name, value in drive.items():
            getattr(dut, name).value = value
        head = {name: value * on for name, value in drive.items()}
        status = await tb.rd(rm.REG_CL_STATUS)
        assert status == (head["cl_valid"] * rm.CL_STATUS_VALID | head["cl_overflowed"] * rm.CL_STATUS_OVERFLOWED
                          | head["cl_del"] * rm.CL_STATUS_DELETE | head["cl_status"] << rm.CL_STATUS_REC_STATUS_SHIFT)
        assert await tb.rd(rm.REG_CL_LEVEL) == head["cl_level"]
        assert await tb.rd(rm.REG_CL_SEQ_LO) | await tb.rd(rm.REG_CL_SEQ_HI) << 32 == head["cl_seq"]
        words = tb.key_words + tb.value_words
        data = [await tb.rd(rm.REG_CL_DATA) for _ in range(words + 2)]
        key = regcodec.from_words(data[:tb.key_words])
        value = regcodec.from_words(data[tb.key_words:words])
        assert (key, value) == (head["cl_key"], head["cl_value"])
        assert data[words:] == [0, 0]  # past the record's last word
        await tb.rd(rm.REG_CL_STATUS)
        assert await tb.rd(rm.REG_CL_DATA) == data[0]
        await tb.rd(rm.REG_CL_SEQ_HI)
        await tb.rd(rm.REG_CL_LEVEL)
        assert await tb.rd(rm.REG_CL_DATA) == data[1]
        await tb.wr(rm.REG_CL_CTRL, rm.CL_CTRL_POP)
        assert await tb.rd(rm.REG_CL_DATA) == data[0]
        dropped = rng.getrandbits(64)
        dut.cl_dropped.value = dropped
        assert await tb.rd(rm.REG_CL_DROPPED_LO) == (dropped & M32) * on
        dut.cl_dropped.value = dropped ^ (0xFFFF << 40)  # the high word moves after the LO read
        assert await tb.rd(rm.REG_CL_DROPPED_HI) == (dropped >> 32) * on
    assert await tb.rd(rm.REG_CL_CTRL) == 0
    await tb.wr(rm.REG_CL_CTRL, rm.CL_CTRL_POP)
    await tb.wr(rm.REG_CL_CTRL, rm.CL_CTRL_POP | rm.CL_CTRL_CLR_OVERFLOW)
    await tb.wr(rm.REG_CL_CTRL, 0)
    await ClockCycles(dut.clk, 2)
    assert strobes == {"cl_pop": 6, "cl_clear_overflow": 1}
    assert await tb.rd(rm.REG_CL_DATA + 4, AxiResp.SLVERR) == 0
    for addr in (rm.REG_CL_STATUS, rm.REG_CL_SEQ_LO, rm.REG_CL_DATA, rm.REG_CL_DEPTH):
        await tb.wr(addr, 0x12345678, AxiResp.SLVERR)
    assert strobes == {"cl_pop": 6, "cl_clear_overflow": 1}
    tb.check()


# ------------------------------------------------------------------------------------------
# pytest: build and run the cocotb tests above
# ------------------------------------------------------------------------------------------

def _config(key_w, value_w, ways=4, rows=8192, stash=8, rules=256, prio_w=16, seed=DEFAULT_SEED,
            tag_w=8, addr_width=12, changelog_depth=512):
    return {"KEY_W": key_w, "VALUE_W": value_w, "WAYS": ways, "ROWS": rows, "STASH": stash,
            "RULES": rules, "PRIO_W": prio_w, "HASH_SEED": seed, "TAG_W": tag_w, "ADDR_WIDTH": addr_width,
            "CHANGELOG_DEPTH": changelog_depth}


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-k{p['KEY_W']}-v{p['VALUE_W']}-w{p['WAYS']}-t{p['TAG_W']}-a{p['ADDR_WIDTH']}"


# the reference configuration, the largest one (every width at its maximum, tags that wrap,
# a wider AXI address) and, on Verilator, the smallest
CONFIGS = [
    ("icarus", _config(288, 32)),
    ("icarus", _config(1152, 512, ways=8, rows=1 << 24, stash=64, rules=4096, prio_w=32,
                       seed=0x0123456789ABCDEF, tag_w=3, addr_width=16)),
    ("verilator", _config(144, 256, ways=2, rows=2, stash=0, rules=0, prio_w=1, seed=0xFFFFFFFF00000001,
                          tag_w=1, changelog_depth=0)),
]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_csr(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(TOPLEVEL, "kv_axil_regs"), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_CSR_RANDOM_SEED", "20240601")),
                     params_env="KV_CSR_PARAMS", build_args=())
