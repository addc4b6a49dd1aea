"""cocotb testbench of kv_mc_core: the memcached request-processing core, payload level.

The DUT is tb_kv_mc_core.v: kv_mc_core on port B of kv_mc_arb in front of a real kv_engine,
port A (the CSR mailbox in kv_top) driven by this testbench.  UDP payloads go in with random
metadata; every payload is handed at the same moment to the reference model
(`pynq_kv.serve.memcached.server.handle_datagram_from` on a model KVEngine of the same geometry,
mc_stim.McModel, with the admission table the DUT's cfg_admit_* inputs carry), whose reply payloads
the DUT must send, byte for byte and in order, each with the request's metadata (frontend.md §2:
the reply goes back to the source).  At the end the core's frontend.md §8 and §10 counters and
the engine's counters must equal the model's.

Covered: every opcode, quiet ops, NOOP-terminated multi-gets, every §4.1 malformation,
oversized requests the walker skips, truncated and bad-magic datagrams, the text subset with
its errors, short / multi-datagram / empty datagrams, idle gaps and back-pressure on both
streams, mailbox requests interleaved with (and flooding against) the front-end, full-rate
multi-GET and single-GET streams at 512 bits, and constant latency; admission (denied sources
dropped and counted, prefix edges /0 and /32, first match wins, entries not valid ignored, the
table rewritten between datagrams) and the reply budget (multi-gets cut in binary and text, cuts
at reply-datagram boundaries, writes after the cut still done) under idle gaps and back-pressure.
"""

from __future__ import annotations

import ipaddress
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
from cocotb.utils import get_sim_time

TB_DIR = Path(__file__).resolve().parent
HW_DIR = TB_DIR.parents[1]
REPO_DIR = HW_DIR.parent
for _p in (REPO_DIR, HW_DIR, TB_DIR):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from pynq_kv import regcodec  # noqa: E402
from pynq_kv import regmap  # noqa: E402
from pynq_kv.backend import COUNTER_NAMES, RuleEntry  # noqa: E402
from pynq_kv.geometry import Geometry  # noqa: E402
from pynq_kv.hashing import hash_int  # noqa: E402
from pynq_kv.model import engine_port  # noqa: E402
from pynq_kv.net.codec import Opcode, Request  # noqa: E402
from pynq_kv.net.text import R_BUDGET  # noqa: E402
from pynq_kv.net.udpframe import wrap  # noqa: E402
from pynq_kv.admission import Admission, AdmissionEntry  # noqa: E402

from mc_stim import (CORE_COUNTERS, RESET_ADMISSION, TRUSTED, McModel, Stim, admission_signals,  # noqa: E402
                     directed_payloads, multiget)

TOPLEVEL = "tb_kv_mc_core"
ADMIT_ENTRIES = 8
CORE_MODULES = ["kv_mc_core", "kv_mc_admit", "kv_mc_rx", "kv_mc_dec", "kv_mc_text", "kv_mc_fmt", "kv_skid", "kv_fifo",
                "kv_mc_arb"]
ENGINE_MODULES = ["kv_engine", "kv_h3_hash", "kv_bank_ram", "kv_rule_match", "kv_prio_tree"]
DEFAULT_SEED = 0x70796E712D6B7631
CLK_NS = 4


def dut_params() -> dict:
    params = {"DATA_W": 64, "KEY_W": 144, "VALUE_W": 32, "WAYS": 2, "ROWS": 16, "STASH": 2,
              "RULES": 4, "PRIO_W": 4, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8}
    params.update(json.loads(os.environ.get("KV_MC_CORE_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def cycle() -> int:
    return int(get_sim_time("ns")) // CLK_NS


class TB:
    """Payload driver, reply sink, mailbox port and scoreboard."""

    def __init__(self, dut, seed: int):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.rng = random.Random(seed)
        p = dut_params()
        self.p = p
        self.data_w = p["DATA_W"]
        self.nbytes = self.data_w // 8
        self.key_w, self.value_w = p["KEY_W"], p["VALUE_W"]
        self.geometry = Geometry(key_width=self.key_w, value_width=self.value_w, ways=p["WAYS"],
                                 rows=p["ROWS"], stash=p["STASH"], rules=p["RULES"],
                                 prio_width=p["PRIO_W"], hash_seed=p["HASH_SEED"])
        self.model = McModel(self.geometry)
        self.req_layout = regcodec.req_layout(self.key_w, self.value_w)
        self.rsp_layout = regcodec.rsp_layout(self.key_w, self.value_w)

        self.send_q: deque = deque()        # (index, payload, meta)
        self.expect: deque = deque()        # (index, reply payload, meta)
        self.first_beat: dict[int, int] = {}  # datagram index -> cycle its first beat was taken
        self.latencies: list[tuple[int, int]] = []  # (datagram index, cycles to first reply beat)
        self.reply_cycles: list[int] = []      # first beat of each reply datagram
        self.reply_ends: list[int] = []        # last beat of each reply datagram
        self.n_dgrams = 0
        self.replies = 0
        self.errors: list[str] = []
        self.idle_prob = 0.0
        self.ready_prob = 1.0
        self.ready_hold = (1, 1)
        self.driver_busy = False
        self.sources: list[int] = []          # source addresses to draw from (empty: any)
        self.set_admission(TRUSTED)

        self.mb_q: deque = deque()          # (request word, tag, expected fields, description)
        self.mb_inflight: deque = deque()
        self.mb_tag = 0
        self.mb_checked = 0
        self.mb_continuous = False

        dut.rst.value = 1
        dut.s_axis_pl_tvalid.value = 0
        dut.s_axis_pl_tdata.value = 0
        dut.s_axis_pl_tkeep.value = 0
        dut.s_axis_pl_tlast.value = 0
        dut.s_axis_pl_meta.value = 0
        dut.m_axis_rpl_tready.value = 0
        dut.s_axis_mb_req_tvalid.value = 0
        dut.s_axis_mb_req_tdata.value = 0
        dut.s_axis_mb_req_tuser.value = 0
        dut.m_axis_mb_rsp_tready.value = 1
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())
        cocotb.start_soon(self._driver())
        cocotb.start_soon(self._sink())
        cocotb.start_soon(self._mb_driver())
        cocotb.start_soon(self._mb_sink())

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        # the engine clears its table after reset (ROWS cycles)
        await ClockCycles(self.dut.clk, self.p["ROWS"] + 20)

    # -- admission table --------------------------------------------------------------------
    def set_admission(self, admission: Admission, junk: bool = False) -> None:
        """Drive cfg_admit_* with a table (call only while no datagram is in the DUT's admission
        stage: the model decides each datagram with the table in force when it is queued). junk:
        the entries past the table's are not valid but would match every source."""
        s = admission_signals(admission, ADMIT_ENTRIES)
        if junk:
            for i in range(len(admission.entries), ADMIT_ENTRIES):
                s["allow"] |= self.rng.getrandbits(1) << i
                s["budget"] |= self.rng.randrange(256) << (8 * i)
        dut = self.dut
        dut.cfg_admit_valid.value = s["valid"]
        dut.cfg_admit_allow.value = s["allow"]
        dut.cfg_admit_addr.value = s["addr"]
        dut.cfg_admit_mask.value = s["mask"]
        dut.cfg_admit_budget.value = s["budget"]
        dut.cfg_admit_def_allow.value = s["def_allow"]
        dut.cfg_admit_def_budget.value = s["def_budget"]
        self.model.admission = admission

    # -- front-end ------------------------------------------------------------------------
    def random_meta(self, payload_len: int) -> int:
        rng = self.rng
        vlan = rng.random() < 0.3
        src = rng.choice(self.sources) if self.sources else rng.getrandbits(32)
        return ((int(vlan) << 128) | ((rng.getrandbits(16) if vlan else 0) << 112)
                | (rng.getrandbits(48) << 64) | (src << 32) | (rng.getrandbits(16) << 16)
                | (payload_len & 0xFFFF))

    def send(self, payload: bytes, source: int | None = None) -> list[bytes]:
        """Queue one datagram; the model answers it now (the DUT sees it in the same order)."""
        index = self.n_dgrams
        self.n_dgrams += 1
        meta = self.random_meta(len(payload))
        if source is not None:
            meta = meta & ~(0xFFFFFFFF << 32) | (source << 32)
        replies = self.model.datagram(payload, (meta >> 32) & 0xFFFFFFFF)
        for reply in replies:  # same addresses and VLAN; payload_len 0 (tx measures the payload)
            self.expect.append((index, reply, meta >> 16 << 16))
        self.send_q.append((index, payload, meta))
        return replies

    async def _driver(self) -> None:
        dut = self.dut
        nb = self.nbytes
        while True:
            if not self.send_q:
                self.driver_busy = False
                await RisingEdge(dut.clk)
                continue
            self.driver_busy = True
            index, payload, meta = self.send_q.popleft()
            beats = [payload[i:i + nb] for i in range(0, len(payload), nb)]
            for n, beat in enumerate(beats):
                while self.idle_prob and self.rng.random() < self.idle_prob:
                    dut.s_axis_pl_tvalid.value = 0
                    await RisingEdge(dut.clk)
                dut.s_axis_pl_tdata.value = int.from_bytes(beat.ljust(nb, b"\0"), "little")
                dut.s_axis_pl_tkeep.value = (1 << len(beat)) - 1
                dut.s_axis_pl_tlast.value = int(n == len(beats) - 1)
                dut.s_axis_pl_meta.value = meta
                dut.s_axis_pl_tvalid.value = 1
                while True:
                    await RisingEdge(dut.clk)
                    if int(dut.s_axis_pl_tready.value):
                        break
                if n == 0:
                    self.first_beat[index] = cycle()
            dut.s_axis_pl_tvalid.value = 0

    async def _sink(self) -> None:
        dut = self.dut
        nb = self.nbytes
        cur = b""
        cur_meta = None
        cur_first = 0
        ready, hold = 1, 0
        while True:
            if hold == 0:
                ready = 1 if self.rng.random() < self.ready_prob else 0
                hold = self.rng.randint(*self.ready_hold)
            hold -= 1
            dut.m_axis_rpl_tready.value = ready
            await RisingEdge(dut.clk)
            if int(dut.rst.value) or not ready or not int(dut.m_axis_rpl_tvalid.value):
                continue
            keep = _uint(dut.m_axis_rpl_tkeep.value)
            n = bin(keep).count("1")
            if keep != (1 << n) - 1 or (n == 0):
                self.errors.append(f"cycle {cycle()}: tkeep {keep:#x} not contiguous from lane 0")
            data = _uint(dut.m_axis_rpl_tdata.value).to_bytes(nb, "little")
            meta = _uint(dut.m_axis_rpl_meta.value)
            if not cur:
                cur_meta = meta
                cur_first = cycle()
            elif meta != cur_meta:
                self.errors.append(f"cycle {cycle()}: meta changed inside a reply")
            if not int(dut.m_axis_rpl_tlast.value) and n != nb:
                self.errors.append(f"cycle {cycle()}: partial beat before tlast")
            cur += data[:n]
            if int(dut.m_axis_rpl_tlast.value):
                self.reply_ends.append(cycle())
                self._check(cur, cur_meta, cur_first)
                cur = b""

    def _check(self, reply: bytes, meta: int, first: int) -> None:
        self.replies += 1
        self.reply_cycles.append(first)
        if not self.expect:
            self.errors.append(f"unexpected reply {reply.hex()}")
            return
        index, exp, exp_meta = self.expect.popleft()
        if reply != exp:
            self.errors.append(f"datagram {index}: reply {reply!r} != model {exp!r}")
        if meta != exp_meta:
            self.errors.append(f"datagram {index}: reply meta {meta:#x} != {exp_meta:#x}")
        if index in self.first_beat:
            self.latencies.append((index, first - self.first_beat.pop(index)))

    async def drain(self, timeout: int = 400000) -> None:
        for _ in range(timeout):
            if not self.send_q and not self.driver_busy and not self.expect and not self.mb_q \
                    and not self.mb_inflight:
                break
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, 50)  # nothing else may come out

    # -- mailbox (arbiter port A) ---------------------------------------------------------------
    def mb_op(self, what: str, expect: dict, **fields) -> None:
        word = regcodec.pack(self.req_layout, fields)
        tag = self.mb_tag
        self.mb_tag = (self.mb_tag + 1) & 0xFF
        self.mb_q.append((word, tag, expect, what))

    async def _mb_driver(self) -> None:
        dut = self.dut
        while True:
            if not self.mb_q:
                dut.s_axis_mb_req_tvalid.value = 0
                await RisingEdge(dut.clk)
                continue
            word, tag, expect, what = self.mb_q.popleft()
            dut.s_axis_mb_req_tdata.value = word
            dut.s_axis_mb_req_tuser.value = tag
            dut.s_axis_mb_req_tvalid.value = 1
            while True:
                await RisingEdge(dut.clk)
                if int(dut.s_axis_mb_req_tready.value):
                    break
            self.mb_inflight.append((tag, expect, what))
            if not self.mb_continuous:
                dut.s_axis_mb_req_tvalid.value = 0
                while self.mb_inflight:  # one command at a time, as the CSR mailbox
                    await RisingEdge(dut.clk)

    async def _mb_sink(self) -> None:
        dut = self.dut
        while True:
            await RisingEdge(dut.clk)
            if int(dut.rst.value) or not int(dut.m_axis_mb_rsp_tvalid.value):
                continue
            word = _uint(dut.m_axis_mb_rsp_tdata.value)
            tag = _uint(dut.m_axis_mb_rsp_tuser.value)
            got = regcodec.unpack(self.rsp_layout, word)
            # Rule and counter operations run on the engine's control port, the rest on its
            # request port (docs/engine.md §5.7): each port answers in order, but with several
            # commands in flight the two ports' responses may interleave.
            port = engine_port(got["op"])
            pending = [i for i, (_, expect, _) in enumerate(self.mb_inflight)
                       if engine_port(expect["op"]) == port]
            if not pending:
                self.errors.append(f"mailbox: response (op {got['op']:#x}, tag {tag}) with "
                                   "nothing of its port in flight")
                continue
            exp_tag, expect, what = self.mb_inflight[pending[0]]
            del self.mb_inflight[pending[0]]
            if tag != exp_tag:
                self.errors.append(f"mailbox {what}: tag {tag} != {exp_tag}")
            for name, value in expect.items():
                if got[name] != value:
                    self.errors.append(f"mailbox {what}: {name} {got[name]:#x} != {value:#x}")
            self.mb_checked += 1

    # -- engine set-up through the mailbox, mirrored in the model --------------------------------
    def raw_key(self, key: bytes) -> int:
        kb = self.key_w // 8
        return int.from_bytes(bytes([len(key)]) + key + bytes(kb - 1 - len(key)), "big")

    def raw_value(self, value: bytes) -> bytes:
        vb = self.value_w // 8
        return bytes([len(value)]) + value + bytes(vb - 1 - len(value))

    def setup_rules(self) -> None:
        """Rules that MATCH hits: by key length, by first key byte; one with an untagged value."""
        g = self.geometry
        kw = self.key_w
        vb = self.value_w // 8
        rules = []
        if g.rules >= 1:  # keys of length 1, 2 or 3 (length byte 0000 00xx, xx != 0)
            rules.append((0, (0x00 << (kw - 8)), (0xFC << (kw - 8)), 3, self.raw_value(b"short"[: vb - 1])))
        if g.rules >= 2:  # first key byte 'A'..'O' (0x41..0x4F): high nibble 4
            rules.append((1, (0x40 << (kw - 16)), (0xF0 << (kw - 16)), 5, self.raw_value(b"R1"[: vb - 1])))
        if g.rules >= 3:  # every key, lowest priority, an untagged raw value
            rules.append((2, 0, 0, 1, bytes([0xFF]) + bytes(range(1, vb))))
        for entry, match, mask, prio, value in rules:
            value = value[:vb].ljust(vb, b"\0")
            self.model.engine.backend.write_rule(entry, RuleEntry(True, match, mask, prio, value))
            self.mb_op(f"WRITE_RULE {entry}", {"op": regmap.OP_WRITE_RULE, "status": 0},
                       op=regmap.OP_WRITE_RULE, flag=1, entry=entry, prio=prio, key=match, mask=mask,
                       value=int.from_bytes(value, "big"))

    def setup_untagged_slot(self, key: bytes) -> None:
        """An exact entry with an untagged raw value (written as an integer by a host)."""
        vb = self.value_w // 8
        raw = self.raw_key(key)
        row = hash_int(raw, self.geometry.hash_seed, 0, self.key_w) % self.geometry.rows
        value = bytes([0xF0]) + bytes(range(0x61, 0x61 + vb - 1))
        self.model.engine.backend.write_slot(0, row, True, raw.to_bytes(self.key_w // 8, "big"), value)
        self.mb_op("WRITE_SLOT", {"op": regmap.OP_WRITE_SLOT, "status": 0}, op=regmap.OP_WRITE_SLOT,
                   flag=1, bank=0, index=row, key=raw, value=int.from_bytes(value, "big"))

    # -- final checks ------------------------------------------------------------------------
    def check(self) -> None:
        core = _uint(self.dut.counters.value)
        got = {name: (core >> (64 * i)) & ((1 << 64) - 1) for i, name in enumerate(CORE_COUNTERS)}
        want = self.model.datagram_counters()
        if got != want:
            self.errors.append(f"core counters {got} != model {want}")
        eng = _uint(self.dut.engine_counters.value)
        got_e = {name: (eng >> (64 * i)) & ((1 << 64) - 1) for i, name in enumerate(COUNTER_NAMES)}
        want_e = self.model.engine.backend.counters()
        if got_e != want_e:
            self.errors.append(f"engine counters {got_e} != model {want_e}")
        for e in self.errors[:20]:
            self.log.error("%s", e)
        assert not self.errors, f"{len(self.errors)} errors, first: {self.errors[0]}"
        assert not self.expect, f"{len(self.expect)} replies missing, next: {self.expect[0]}"
        self.log.info("%d datagrams, %d replies, %d mailbox responses; counters %s",
                      self.n_dgrams, self.replies, self.mb_checked, got)


def n_dgrams(default: int) -> int:
    return int(os.environ.get("KV_MC_DGRAMS", default))


async def _setup(dut, seed: int) -> TB:
    tb = TB(dut, seed)
    await tb.reset()
    tb.setup_rules()
    await tb.drain()
    return tb


def ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def allow(network: str, budget: int) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(network), True, budget)


def deny(network: str) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(network), False, 0)


# sources around the prefixes of the tables below: inside, at both ends, just outside
EDGE_SOURCES = [ip(a) for a in (
    "10.1.2.3", "10.1.2.2", "10.1.2.4", "10.1.0.0", "10.1.255.255", "10.0.0.0", "10.255.255.255",
    "11.0.0.0", "9.255.255.255", "0.0.0.0", "255.255.255.255", "172.16.0.1", "172.31.255.255",
    "172.32.0.0", "192.168.1.7", "192.168.1.6", "192.168.0.0")]


def random_admission(rng: random.Random) -> Admission:
    """A table over EDGE_SOURCES' prefixes: overlapping entries, a /32 and a /0, random budgets."""
    budget = lambda: rng.choice([0, 1, 1, 2, 2, 3, 5, 255])  # noqa: E731
    pool = [deny("10.1.2.3/32"), allow("10.1.2.3/32", budget()), allow("10.1.0.0/16", budget()),
            deny("10.1.2.0/24"), allow("10.0.0.0/8", budget()), allow("172.16.0.0/12", budget()),
            deny("192.168.1.7/32"), allow("192.168.0.0/16", budget())]
    entries = rng.sample(pool, rng.randint(0, ADMIT_ENTRIES - 1))
    if rng.random() < 0.4:  # a /0 last (earlier it would hide every entry after it)
        entries.append(rng.choice([deny("0.0.0.0/0"), allow("0.0.0.0/0", budget())]))
    return Admission(tuple(entries), default_allow=rng.random() < 0.7, default_budget=budget())


def boundary_cut(max_key: int) -> bytes:
    """A binary datagram for M = 1 whose VERSION and NOOP responses (33 and 24 bytes, no engine)
    fill the first reply datagram to within 30 bytes of 1400, whose next VERSION exceeds the
    budget, and whose length (silent GETKQ misses after it) puts the budget between the two."""
    r = 24 + 9                                      # a VERSION response
    a = (1392 - 30) // r
    room = 1392 - a * r
    b = max(0, -(-(room - 30) // 24))               # NOOPs: room left 7..30 bytes
    used = a * r + 24 * b
    reqs = [Request(Opcode.VERSION, opaque=i).encode() for i in range(a)]
    reqs += [Request(Opcode.NOOP, opaque=i).encode() for i in range(b)]
    reqs.append(Request(Opcode.VERSION, opaque=0xC07).encode())
    length = 8 + sum(len(q) for q in reqs)
    lo, hi = 8 + used - length, 16 + used + r - 1 - length   # L - length must lie in [lo, hi]
    m = max(1, -(-lo // (24 + max_key)))
    sizes = [max_key] * m
    excess = m * (24 + max_key) - hi
    for i in range(m):
        cut = min(max(excess, 0), max_key - 1)
        sizes[i] -= cut
        excess -= cut
    assert lo <= sum(24 + s for s in sizes) <= hi, (lo, hi, sizes)
    reqs += [Request(Opcode.GETKQ, b"\x01" * s).encode() for s in sizes]   # misses: no reply
    return wrap(0xB0B, b"".join(reqs))


async def fill(tb: TB, keys: list[bytes]) -> None:
    """Every key of the pool stored (longest values), as a trusted source."""
    vb = tb.value_w // 8 - 1
    saved = tb.model.admission
    tb.set_admission(TRUSTED)
    for i in range(0, len(keys), 8):
        tb.send(wrap(0, b"".join(Request(Opcode.SETQ, k, b"\0" * 8, bytes([0x41 + i % 26]) * vb).encode()
                                 for k in keys[i:i + 8])))
    await tb.drain()
    tb.set_admission(saved)


@cocotb.test()
async def run_mixed(dut):
    """Random binary and text datagrams with every fault, idle gaps and back-pressure, from
    sources of a random admission table with budgets."""
    tb = await _setup(dut, cocotb.RANDOM_SEED)
    stim = Stim(tb.rng, tb.key_w, tb.value_w, pool=40)
    tb.setup_untagged_slot(stim.keys[0])
    await tb.drain()
    tb.set_admission(random_admission(tb.rng), junk=True)
    tb.sources = EDGE_SOURCES
    tb.idle_prob = 0.2
    tb.ready_prob = 0.7
    tb.ready_hold = (1, 5)
    for _ in range(n_dgrams(300)):
        tb.send(stim.payload(text_share=0.3))
    await tb.drain()
    tb.check()


@cocotb.test()
async def run_admission(dut):
    """Admission, directed: prefix edges (/32 and its neighbours, /16 and /8 ends, /0), the first
    matching entry wins over a later one, entries not valid are ignored, the default decides
    the rest; the table rewritten between datagrams. Every source sends a binary and a text
    multi-get; the counters must show exactly the predicted drops."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 4)
    stim = Stim(tb.rng, tb.key_w, tb.value_w, pool=24)
    await fill(tb, stim.keys)
    line = 2048 - 8
    every = {str(ipaddress.IPv4Address(a)) for a in EDGE_SOURCES}
    tables = [
        (Admission((deny("10.1.2.3/32"), allow("10.1.0.0/16", 0), allow("10.1.2.0/24", 1),
                    allow("10.0.0.0/8", 1), deny("0.0.0.0/0")), default_allow=True, default_budget=7),
         {"10.1.2.3", "11.0.0.0", "9.255.255.255", "0.0.0.0", "255.255.255.255", "172.16.0.1",
          "172.31.255.255", "172.32.0.0", "192.168.1.7", "192.168.1.6", "192.168.0.0"}),
        (Admission((allow("0.0.0.0/0", 3),), default_allow=False), set()),
        (Admission((), default_allow=False), every),
        (Admission((allow("10.1.2.3/32", 0), deny("10.1.2.3/32")), default_allow=False, default_budget=0),
         every - {"10.1.2.3"}),
        (Admission((), default_allow=True, default_budget=1), set()),
    ]
    for admission, denied in tables:
        tb.set_admission(admission, junk=True)
        before = tb.model.counters["drop_denied"]
        for src in EDGE_SOURCES:
            for binary in (True, False):
                tb.send(multiget(tb.rng, stim.keys, binary, line, 65000), source=src)
        # the hand-worked decisions (the DUT is held to the model, the model to these)
        assert tb.model.counters["drop_denied"] - before == 2 * len(denied), admission.describe()
        await tb.drain()
    tb.check()


@cocotb.test()
async def run_budget(dut):
    """The reply budget: multi-gets (binary and text, up to several reply datagrams) and random
    datagrams from sources of random tables (rewritten between phases), with idle gaps and
    back-pressure; the cuts must include binary and text ones and ones whose budget reply opens
    a reply datagram of its own."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 5)
    stim = Stim(tb.rng, tb.key_w, tb.value_w, pool=16)
    await fill(tb, stim.keys)
    tb.idle_prob = 0.15
    tb.ready_prob = 0.75
    tb.ready_hold = (1, 4)
    tb.sources = EDGE_SOURCES
    cuts = {"binary": 0, "text": 0, "alone": 0}
    tight = Admission((deny("192.168.1.7/32"), allow("10.0.0.0/8", 1)), default_allow=True, default_budget=1)
    for phase in range(3):
        tb.set_admission(random_admission(tb.rng) if phase < 2 else tight, junk=True)
        tb.log.info("phase %d: %s", phase, tb.model.admission.describe())
        for _ in range(n_dgrams(60)):
            if tb.rng.random() < 0.6:
                binary = tb.rng.random() < 0.5
                payload = multiget(tb.rng, stim.keys, binary, 2048 - 8, 65000)
            else:
                payload = stim.payload(text_share=0.3)
                binary = payload[8:9] == b"\x80"
            before = tb.model.counters["budget_exceeded"]
            replies = tb.send(payload)
            if tb.model.counters["budget_exceeded"] > before:
                cuts["binary" if binary else "text"] += 1
                last = replies[-1][8:]
                alone = last == R_BUDGET if not binary else len(last) == 31 and last[6:8] == b"\x00\x85"
                if len(replies) > 1 and alone:
                    cuts["alone"] += 1
        await tb.drain()
    # directed: the first reply datagram filled to less than a budget reply's room, the next
    # GETK over the budget (M = 1): the budget reply opens a datagram of its own
    tb.set_admission(Admission((allow("0.0.0.0/0", 1),), default_allow=False))
    payload = boundary_cut(tb.key_w // 8 - 1)
    before = tb.model.counters["budget_exceeded"]
    replies = tb.send(payload, source=ip("1.2.3.4"))
    assert tb.model.counters["budget_exceeded"] == before + 1 and [len(r) for r in replies][1:] == [8 + 31], \
        [len(r) for r in replies]
    cuts["alone"] += 1
    await tb.drain()
    tb.check()
    tb.log.info("cuts: %s", cuts)
    assert cuts["binary"] and cuts["text"] and cuts["alone"], cuts


@cocotb.test()
async def run_directed(dut):
    """Directed cases of frontend.md §3-§6, each alone in a datagram, sink always ready."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 1)
    for payload in directed_payloads(tb.key_w // 8 - 1, tb.value_w // 8 - 1):
        tb.send(payload)
    await tb.drain()
    tb.check()


@cocotb.test()
async def run_mailbox(dut):
    """Mailbox commands interleaved with front-end traffic, then a mailbox flood against it."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 2)
    tb.set_admission(RESET_ADMISSION)  # the table kv_top resets with: everyone, budget 2
    stim = Stim(tb.rng, tb.key_w, tb.value_w, pool=20)
    mb_key = b"~mb"
    # an entry only the mailbox reads (the front-end pool does not contain it)
    tb.model.engine.set(mb_key, b"m")
    raw = tb.raw_key(mb_key)
    mb_val = int.from_bytes(tb.raw_value(b"m"), "big")

    def mailbox_ops(n: int) -> None:
        for _ in range(n):
            r = tb.rng.randrange(3)
            if r == 0:
                rule = tb.model.engine.backend.read_rule(1)
                tb.mb_op("READ_RULE 1", {"op": regmap.OP_READ_RULE, "flag": int(rule.valid),
                                         "prio": rule.priority}, op=regmap.OP_READ_RULE, entry=1)
            elif r == 1:
                tb.model.engine.get(mb_key)  # the model counts the lookup as the engine will
                tb.mb_op("GET", {"op": regmap.OP_GET, "status": 1, "value": mb_val}, op=regmap.OP_GET, key=raw)
            else:
                tb.mb_op("READ_COUNTER cmd_errors", {"op": regmap.OP_READ_COUNTER, "data64": 0},
                         op=regmap.OP_READ_COUNTER, index=regmap.CNT_CMD_ERRORS)

    tb.mb_op("SET", {"op": regmap.OP_SET, "status": 0}, op=regmap.OP_SET, key=raw, value=mb_val)
    await tb.drain()
    for _ in range(n_dgrams(120)):
        tb.send(stim.payload(text_share=0.2))
    mailbox_ops(40)
    await tb.drain()
    # flood: the mailbox port asks every cycle; the front-end still gets half the slots
    tb.mb_continuous = True
    mailbox_ops(200)
    for _ in range(40):
        tb.send(wrap(1, b"".join(stim.binary_request("get") for _ in range(4))))
    await tb.drain()
    tb.check()


@cocotb.test()
async def run_rate(dut):
    """Full rate: GETs of multi-request datagrams and one-GET datagrams; constant latency."""
    tb = await _setup(dut, cocotb.RANDOM_SEED + 3)
    mk = tb.key_w // 8 - 1
    keys = [b"r%02d" % i for i in range(8)] if mk >= 3 else [b"r"]
    for i, k in enumerate(keys):
        tb.send(wrap(0, Request(Opcode.SETQ, k, b"\0" * 8, b"v"[: tb.value_w // 8 - 1]).encode()))
    await tb.drain()
    # single-GET datagrams, back to back
    tb.latencies.clear()
    start = len(tb.reply_cycles)
    n_single = 64
    for i in range(n_single):
        tb.send(wrap(i, Request(Opcode.GET, keys[i % len(keys)], opaque=i).encode()))
    await tb.drain()
    single = tb.reply_cycles[start:]
    assert len(single) == n_single
    lat = sorted({lat for _, lat in tb.latencies})
    tb.log.info("single-GET datagrams: latency %s cycles (payload first beat -> reply first beat)", lat)
    assert len(lat) == 1, f"latency not constant: {lat}"
    # multi-GET datagrams: their responses are packed, one reply datagram per request datagram
    start = len(tb.reply_cycles)
    n_multi, per = 16, 16
    for d in range(n_multi):
        tb.send(wrap(d, b"".join(Request(Opcode.GET, keys[(d + i) % len(keys)], opaque=i).encode()
                                 for i in range(per))))
    await tb.drain()
    tb.check()
    span_s = tb.reply_ends[start - 1] - single[0] + 1
    span_m = tb.reply_ends[-1] - tb.reply_cycles[start] + 1
    n_req = n_multi * per
    req_bytes = 24 + len(keys[0])
    rsp_bytes = 24 + 4 + 1
    tb.log.info("single-GET: %d datagrams in %d cycles; multi-GET: %d requests in %d cycles "
                "(%.3f requests/cycle)", n_single, span_s, n_req, span_m, n_req / span_m)
    if tb.data_w == 512:
        assert span_s <= n_single + 2, "one-GET datagrams not at one per cycle"
        # the first and the last datagram's walker time are not overlapped: 2 * per
        assert n_req / (span_m - per) >= 1.0, "multi-GET datagrams below one request per cycle"
    else:
        # bounded by the request bytes (the walker) and by the response chunks (a response of
        # n bytes takes ceil(n / BYTES) cycles in the packer)
        in_beats = -(-(8 + req_bytes) // tb.nbytes)
        out_beats = -(-(8 + rsp_bytes) // tb.nbytes)
        assert span_s <= n_single * max(in_beats, out_beats) + lat[0]
        per_req = max(req_bytes / tb.nbytes, -(-rsp_bytes // tb.nbytes))
        assert span_m <= n_req * per_req * 1.05 + 2 * lat[0]


# ------------------------------------------------------------------------------------------
# pytest: build and run the cocotb tests above
# ------------------------------------------------------------------------------------------

def _config(data_w, key_w, value_w, ways=2, rows=16, stash=2, rules=4, prio_w=4, **extra):
    p = {"DATA_W": data_w, "KEY_W": key_w, "VALUE_W": value_w, "WAYS": ways, "ROWS": rows,
         "STASH": stash, "RULES": rules, "PRIO_W": prio_w, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8}
    p.update(extra)
    return p


def _config_id(sim: str, p: dict) -> str:
    return f"{sim}-d{p['DATA_W']}-k{p['KEY_W']}-v{p['VALUE_W']}-w{p['WAYS']}-r{p['ROWS']}"


CONFIGS = [
    ("icarus", _config(64, 144, 32)),
    ("icarus", _config(512, 288, 64, ways=2, rows=16, stash=2, rules=3)),
]


def _sources() -> list:
    import tools

    return tools.rtl_sources(*CORE_MODULES, *ENGINE_MODULES) + [TB_DIR / f"{TOPLEVEL}.v"]


@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_mc_core(sim: str, params: dict) -> None:
    import tools

    tools.run_cocotb(sim, TOPLEVEL, __file__, _sources(), params,
                     tools.BUILD_DIR / "kv_mc_core" / _config_id(sim, params),
                     seed=int(os.environ.get("KV_MC_RANDOM_SEED", "20240604")),
                     params_env="KV_MC_CORE_PARAMS",
                     build_args=("-Wno-fatal",) if sim == "verilator" else ())
