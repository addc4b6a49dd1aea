"""cocotb testbench of hw/rtl/kv_engine.v against the reference model (pynq_kv.model).

The cocotb tests (``run_*``) run inside the simulator; the pytest function ``test_kv_engine`` at
the bottom builds and runs them with ``cocotb_tools.runner`` for several geometries, key widths
and simulators, each in its own directory under hw/build/kv_engine/.

Every request is applied to ``ModelBackend`` (batches of one, control methods) the moment the
testbench queues it, which gives the expected response; requests then go to the DUT, one at a
time in that order, each on the port its opcode names (``s_axis_req`` or ``s_axis_ctl_req``,
engine.md §5.7), with random idle cycles; responses come back on each port's response stream
under random back-pressure, and the scoreboard compares them in order, field by field
(engine.md §5, docs/rtl.md).  ``TB.free_run`` instead drives both ports independently and
applies the requests to the model as the DUT accepts them, in ``pynq_kv.model.engine_order``.  At the end of a test every counter, every
rule hit count and every slot is read back through the DUT and compared with the model.  The
response latency is measured: never below ``LATENCY`` and exactly ``LATENCY`` whenever the
response stream is not back-pressured.
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
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

HW_DIR = Path(__file__).resolve().parents[2]
REPO_DIR = HW_DIR.parent
for _p in (REPO_DIR, HW_DIR):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import numpy as np  # noqa: E402

import tools  # noqa: E402  (hw/tools.py)

from pynq_kv.backend import COUNTER_NAMES, MatchKind, RuleEntry  # noqa: E402
from pynq_kv.errors import CommandError  # noqa: E402
from pynq_kv.geometry import Geometry  # noqa: E402
from pynq_kv.hashing import hash_int  # noqa: E402
from pynq_kv.model import (CONTROL_PORT, REQUEST_PORT, REQUEST_PORT1, ModelBackend,  # noqa: E402
                           engine_order, engine_port)

TOPLEVEL = "kv_engine"
MODULES = ["kv_engine", "kv_h3_hash", "kv_bank_ram", "kv_rule_match", "kv_prio_tree"]
DEFAULT_SEED = 0x70796E712D6B7631
CLK_NS = 4

# opcodes (docs/rtl.md)
GET, LOOKUP, SET, DEL = 1, 2, 3, 4
READ_SLOT, WRITE_SLOT, MOVE, WRITE_RULE, READ_RULE = 8, 9, 10, 11, 12
CLEAR_TABLE, CLEAR_COUNTERS, READ_COUNTER, READ_RULE_HITS = 13, 14, 15, 16
KNOWN_OPS = {GET, LOOKUP, SET, DEL, READ_SLOT, WRITE_SLOT, MOVE, WRITE_RULE, READ_RULE,
             CLEAR_TABLE, CLEAR_COUNTERS, READ_COUNTER, READ_RULE_HITS}
REFUSED = 15

# request fields: name -> (offset, width); key/mask/value follow at 106
REQ_FIELDS = {"op": (0, 5), "flag": (5, 1), "bank": (6, 4), "index": (10, 24), "bank2": (34, 4),
              "index2": (38, 24), "entry": (62, 12), "prio": (74, 32)}
RSP_FIELDS = {"op": (0, 5), "status": (5, 4), "flag": (9, 1), "entry": (10, 12), "prio": (22, 32),
              "data64": (54, 64)}


def dut_params() -> dict:
    """HDL parameters of this run, handed over by the pytest runner (defaults = RTL defaults)."""
    params = {"KEY_W": 288, "VALUE_W": 32, "WAYS": 4, "ROWS": 1024, "STASH": 8, "RULES": 16,
              "PRIO_W": 16, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8, "HASH_STAGES": 2, "RAM_LAT": 1,
              "TREE_LEVELS_PER_STAGE": 2, "RULE_SLOTS": 4, "RSP_FIFO_DEPTH": 16, "CTL_FIFO_DEPTH": 16,
              "LOOKUP_PORTS": 1}
    params.update(json.loads(os.environ.get("KV_ENGINE_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def _bits_and_unknown(value) -> tuple[int, int]:
    """(value with X/Z read as 0, mask of the X/Z bits): an unwritten register reads X in
    simulation, which only fields the scoreboard does not check (expected None) may hold."""
    if value.is_resolvable:
        return _uint(value), 0
    text = str(value).upper()
    return (int("".join("1" if c == "1" else "0" for c in text), 2),
            int("".join("0" if c in "01" else "1" for c in text), 2))


class TB:
    """Clock, reset, request driver, response sink and scoreboard for kv_engine."""

    def __init__(self, dut, seed: int = 0):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.rng = random.Random(seed)

        p = dut_params()
        self.p = p
        self.key_w = p["KEY_W"]
        self.value_w = p["VALUE_W"]
        self.ways = p["WAYS"]
        self.rows = p["ROWS"]
        self.stash = p["STASH"]
        self.rules = p["RULES"]
        self.prio_w = p["PRIO_W"]
        self.seed = p["HASH_SEED"]
        self.tag_w = p["TAG_W"]
        self.latency = tools.engine_latency(p)
        self.port_latency = {REQUEST_PORT: self.latency, REQUEST_PORT1: self.latency,
                             CONTROL_PORT: self.latency + 1}
        self.lookup_ports = p["LOOKUP_PORTS"]
        self.geometry = Geometry(key_width=self.key_w, value_width=self.value_w, ways=self.ways,
                                 rows=self.rows, stash=self.stash, rules=self.rules,
                                 prio_width=self.prio_w, hash_seed=self.seed)
        self.model = ModelBackend(self.geometry)
        self.kb = self.key_w // 8
        self.vb = self.value_w // 8
        self.req_w = 106 + 2 * self.key_w + self.value_w
        assert len(dut.s_axis_req_tdata) == self.req_w
        assert len(dut.m_axis_rsp_tdata) == 118 + 2 * self.key_w + self.value_w
        assert len(dut.s_axis_req_tuser) == self.tag_w
        assert len(dut.s_axis_ctl_req_tdata) == self.req_w
        # per port: request tdata, tvalid, tready, tuser; response tdata, tvalid, tready, tuser
        self.ports = {
            REQUEST_PORT: (dut.s_axis_req_tdata, dut.s_axis_req_tvalid, dut.s_axis_req_tready,
                           dut.s_axis_req_tuser, dut.m_axis_rsp_tdata, dut.m_axis_rsp_tvalid,
                           dut.m_axis_rsp_tready, dut.m_axis_rsp_tuser),
            CONTROL_PORT: (dut.s_axis_ctl_req_tdata, dut.s_axis_ctl_req_tvalid, dut.s_axis_ctl_req_tready,
                           dut.s_axis_ctl_req_tuser, dut.m_axis_ctl_rsp_tdata, dut.m_axis_ctl_rsp_tvalid,
                           dut.m_axis_ctl_rsp_tready, dut.m_axis_ctl_rsp_tuser),
        }
        if self.lookup_ports == 2:
            self.ports[REQUEST_PORT1] = (dut.s_axis_req1_tdata, dut.s_axis_req1_tvalid, dut.s_axis_req1_tready,
                                         dut.s_axis_req1_tuser, dut.m_axis_rsp1_tdata, dut.m_axis_rsp1_tvalid,
                                         dut.m_axis_rsp1_tready, dut.m_axis_rsp1_tuser)
        else:  # the port exists and must stay quiet
            dut.s_axis_req1_tvalid.value = 0
            dut.m_axis_rsp1_tready.value = 0

        self.send_q: deque = deque()  # (request word, tag, expected, description, port)
        self.offering = False  # the program-order driver offers a request it took from send_q
        # per port: (accept cycle, tag, expected, description)
        self.inflight: dict[int, deque] = {port: deque() for port in self.ports}
        self.rules_written: set[int] = set()
        self.sent = 0
        self.checked = 0
        # (latency, sink was ready throughout, port)
        self.latencies: list[tuple[int, bool, int]] = []
        self.accept_cycles: list[int] = []  # request ports
        self.ctl_accept_cycles: list[int] = []  # control port
        self.stalls: list[tuple[int, int]] = []  # (cycle, opcode) of requests offered but refused
        self.errors: list[str] = []
        self.idle_prob = 0.0
        self.ready_prob = 1.0
        self.ready_hold = (1, 1)  # random run lengths of the sink's tready pattern
        self.tag = 0
        self.coverage: dict[tuple[int, int], int] = {}  # (op, expected status) -> count

        dut.rst.value = 1
        for tdata, tvalid, _, tuser, _, _, rsp_tready, _ in self.ports.values():
            tvalid.value = 0
            tdata.value = 0
            tuser.value = 0
            rsp_tready.value = 0

        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())
        cocotb.start_soon(self._driver())
        for port in self.ports:
            cocotb.start_soon(self._sink(port))

    # -- helpers -----------------------------------------------------------------------------
    @staticmethod
    def cycle() -> int:
        return int(get_sim_time("ns")) // CLK_NS

    def key_arr(self, key: int) -> np.ndarray:
        return np.frombuffer(key.to_bytes(self.kb, "big"), dtype=np.uint8).reshape(1, self.kb)

    def val_arr(self, value: int) -> np.ndarray:
        return np.frombuffer(value.to_bytes(self.vb, "big"), dtype=np.uint8).reshape(1, self.vb)

    def rows_of(self, key: int) -> list[int]:
        return [hash_int(key, self.seed, w, self.key_w) % self.rows for w in range(self.ways)]

    def pack(self, op: int, flag: int = 0, bank: int = 0, index: int = 0, bank2: int = 0,
             index2: int = 0, entry: int = 0, prio: int = 0, key: int = 0, mask: int = 0,
             value: int = 0) -> int:
        fields = dict(op=op, flag=flag, bank=bank, index=index, bank2=bank2, index2=index2,
                      entry=entry, prio=prio)
        word = 0
        for name, (off, width) in REQ_FIELDS.items():
            assert 0 <= fields[name] < 1 << width, (name, fields[name])
            word |= fields[name] << off
        word |= key << 106
        word |= mask << (106 + self.key_w)
        word |= value << (106 + 2 * self.key_w)
        return word

    def unpack_rsp(self, word: int) -> dict:
        out = {name: (word >> off) & ((1 << width) - 1) for name, (off, width) in RSP_FIELDS.items()}
        out["key"] = (word >> 118) & ((1 << self.key_w) - 1)
        out["mask"] = (word >> (118 + self.key_w)) & ((1 << self.key_w) - 1)
        out["value"] = (word >> (118 + 2 * self.key_w)) & ((1 << self.value_w) - 1)
        return out

    # -- operations: applied to the model now, queued for the DUT ------------------------------
    def _full(self, expected: dict) -> dict:
        full = {"status": 0, "flag": 0, "entry": 0, "prio": 0, "data64": 0, "key": 0, "mask": 0,
                "value": 0}
        full.update(expected)
        cov = (full["op"], full["status"])
        self.coverage[cov] = self.coverage.get(cov, 0) + 1
        return full

    def _next_tag(self) -> int:
        tag = self.tag
        self.tag = (self.tag + 1) & ((1 << self.tag_w) - 1)
        return tag

    def _queue(self, req: int, expected: dict, what: str, port: int | None = None) -> dict:
        """Queue req on its opcode's port (or `port`), after everything queued before; with two
        request ports a request-port opcode goes to either at random (the driver offers one
        request at a time, so port 1 is taken in a cycle in which port 0 offers nothing)."""
        full = self._full(expected)
        port = engine_port(req & 0x1F) if port is None else port
        if port == REQUEST_PORT and self.lookup_ports == 2 and self.rng.random() < 0.5:
            port = REQUEST_PORT1
        self.send_q.append((req, self._next_tag(), full, what, port))
        return full

    def op_wrong_port(self, req: int, what: str) -> dict:
        """req on the port its opcode does not belong on: refused, counts cmd_errors, no effect."""
        self.model._count("cmd_errors", 1)
        op = req & 0x1F
        other = REQUEST_PORT if engine_port(op) == CONTROL_PORT else CONTROL_PORT
        return self._queue(req, {"op": op, "status": REFUSED}, f"{what} on the wrong port", other)

    def op_get(self, key: int) -> dict:
        return self._queue(self.pack(GET, key=key), self.exp_get(key), f"GET {key:#x}")

    def exp_get(self, key: int) -> dict:
        res = self.model.get_batch(self.key_arr(key))
        hit = bool(res.hit[0])
        value = int.from_bytes(res.values[0].tobytes(), "big") if hit else 0
        return {"op": GET, "status": int(hit), "value": value}

    def op_lookup(self, key: int) -> dict:
        return self._queue(self.pack(LOOKUP, key=key), self.exp_lookup(key), f"LOOKUP {key:#x}")

    def exp_lookup(self, key: int) -> dict:
        res = self.model.lookup_batch(self.key_arr(key))
        kind = int(res.kind[0])
        exp = {"op": LOOKUP, "status": kind}
        if kind != MatchKind.MISS:
            exp["value"] = int.from_bytes(res.values[0].tobytes(), "big")
        if kind == MatchKind.RULE:
            e = int(res.entry[0])
            exp["entry"] = e
            exp["prio"] = self.model.read_rule(e).priority
        return exp

    def op_set(self, key: int, value: int) -> dict:
        st = int(self.model.set_batch(self.key_arr(key), self.val_arr(value))[0])
        return self._queue(self.pack(SET, key=key, value=value), {"op": SET, "status": st},
                           f"SET {key:#x}={value:#x}")

    def op_del(self, key: int) -> dict:
        st = int(self.model.delete_batch(self.key_arr(key))[0])
        return self._queue(self.pack(DEL, key=key), {"op": DEL, "status": st}, f"DEL {key:#x}")

    def op_read_slot(self, bank: int, index: int) -> dict:
        try:
            valid, key, value = self.model.read_slot(bank, index)
            exp = {"op": READ_SLOT, "flag": int(valid)}
            if valid:
                exp.update(key=int.from_bytes(key, "big"), value=int.from_bytes(value, "big"))
            else:
                exp.update(key=None, value=None)  # an invalid slot's leftovers are no contract
        except CommandError:
            exp = {"op": READ_SLOT, "status": REFUSED}
        return self._queue(self.pack(READ_SLOT, bank=bank, index=index), exp,
                           f"READ_SLOT ({bank},{index})")

    def op_write_slot(self, bank: int, index: int, valid: bool, key: int, value: int) -> dict:
        try:
            self.model.write_slot(bank, index, valid, key.to_bytes(self.kb, "big"),
                                  value.to_bytes(self.vb, "big"))
            exp = {"op": WRITE_SLOT}
        except CommandError:
            exp = {"op": WRITE_SLOT, "status": REFUSED}
        return self._queue(self.pack(WRITE_SLOT, flag=int(valid), bank=bank, index=index, key=key,
                                     value=value), exp, f"WRITE_SLOT ({bank},{index}) v={int(valid)} {key:#x}")

    def op_move(self, b1: int, i1: int, b2: int, i2: int) -> dict:
        try:
            self.model.move_slot(b1, i1, b2, i2)
            exp = {"op": MOVE}
        except CommandError:
            exp = {"op": MOVE, "status": REFUSED}
        return self._queue(self.pack(MOVE, bank=b1, index=i1, bank2=b2, index2=i2), exp,
                           f"MOVE ({b1},{i1})->({b2},{i2})")

    def op_write_rule(self, entry: int, valid: bool, match: int, mask: int, prio: int, value: int) -> dict:
        return self._queue(self.req_write_rule(entry, valid, match, mask, prio, value),
                           self.exp_write_rule(entry, valid, match, mask, prio, value),
                           f"WRITE_RULE {entry} prio {prio}")

    def req_write_rule(self, entry: int, valid: bool, match: int, mask: int, prio: int, value: int) -> int:
        return self.pack(WRITE_RULE, flag=int(valid), entry=entry, prio=prio, key=match, mask=mask,
                         value=value)

    def exp_write_rule(self, entry: int, valid: bool, match: int, mask: int, prio: int, value: int) -> dict:
        try:
            self.model.write_rule(entry, RuleEntry(valid, match, mask, prio, value.to_bytes(self.vb, "big")))
            exp = {"op": WRITE_RULE}
            self.rules_written.add(entry)
        except CommandError:
            exp = {"op": WRITE_RULE, "status": REFUSED}
        return exp

    def op_read_rule(self, entry: int) -> dict:
        return self._queue(self.pack(READ_RULE, entry=entry), self.exp_read_rule(entry), f"READ_RULE {entry}")

    def exp_read_rule(self, entry: int) -> dict:
        try:
            r = self.model.read_rule(entry)
            exp = {"op": READ_RULE, "flag": int(r.valid), "entry": entry, "prio": r.priority,
                   "key": r.match, "mask": r.mask, "value": int.from_bytes(r.value, "big")}
        except CommandError:
            exp = {"op": READ_RULE, "status": REFUSED}
        return exp

    def op_clear_table(self) -> dict:
        self.model.clear_table()
        return self._queue(self.pack(CLEAR_TABLE), {"op": CLEAR_TABLE}, "CLEAR_TABLE")

    def op_clear_counters(self) -> dict:
        return self._queue(self.pack(CLEAR_COUNTERS), self.exp_clear_counters(), "CLEAR_COUNTERS")

    def exp_clear_counters(self) -> dict:
        self.model.clear_counters()
        return {"op": CLEAR_COUNTERS}

    def op_read_counter(self, cid: int) -> dict:
        return self._queue(self.pack(READ_COUNTER, index=cid), self.exp_read_counter(cid), f"READ_COUNTER {cid}")

    def exp_read_counter(self, cid: int) -> dict:
        try:
            exp = {"op": READ_COUNTER, "data64": self.model.read_counter(cid)}
        except CommandError:
            exp = {"op": READ_COUNTER, "status": REFUSED}
        return exp

    def op_read_rule_hits(self, entry: int) -> dict:
        return self._queue(self.pack(READ_RULE_HITS, entry=entry), self.exp_read_rule_hits(entry),
                           f"READ_RULE_HITS {entry}")

    def exp_read_rule_hits(self, entry: int) -> dict:
        try:
            exp = {"op": READ_RULE_HITS, "data64": self.model.read_rule_hits(entry), "entry": entry}
        except CommandError:
            exp = {"op": READ_RULE_HITS, "status": REFUSED}
        return exp

    def op_unknown(self, op: int) -> dict:
        assert op not in KNOWN_OPS
        self.model._count("cmd_errors", 1)  # docs/rtl.md: refused, counts cmd_errors
        return self._queue(self.pack(op, key=self.rng.getrandbits(self.key_w)),
                           {"op": op, "status": REFUSED}, f"op {op}")

    # -- DUT side ------------------------------------------------------------------------------
    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        # the engine clears the table after reset (a sweep of ROWS cycles)
        for _ in range(self.rows + 20):
            await RisingEdge(self.dut.clk)
            if int(self.dut.s_axis_req_tready.value):
                break
        assert int(self.dut.s_axis_req_tready.value), "tready never rose after reset"

    def _accepted(self, port: int, tag: int, expected: dict, what: str) -> None:
        self.inflight[port].append((self.cycle(), tag, expected, what))
        (self.ctl_accept_cycles if port == CONTROL_PORT else self.accept_cycles).append(self.cycle())
        self.sent += 1

    def _pairs(self, first: tuple, second: tuple) -> bool:
        """The driver offers `second` on port 1 beside `first` on port 0 (LOOKUP_PORTS = 2): a
        GET or LOOKUP on port 0 and a GET queued for port 1, the pair lane B takes."""
        return (first[4] == REQUEST_PORT and second[4] == REQUEST_PORT1 and
                first[0] & 0x1F in (GET, LOOKUP) and second[0] & 0x1F == GET)

    async def _driver(self) -> None:
        """Program order: the request at the head of the queue on its port, the next after its
        acceptance. With two request ports, a port-1 request that may pair with the head is
        offered beside it in the same cycle; if port 0's is taken and it is not, it is offered
        alone next (the engine takes port 1 after port 0, never before, so program order is
        engine order either way)."""
        dut = self.dut
        cur: list[tuple] = []
        idle = 0
        while True:
            if not cur and idle == 0 and self.send_q:
                cur.append(self.send_q.popleft())
                if self.send_q and self._pairs(cur[0], self.send_q[0]):
                    cur.append(self.send_q.popleft())
                self.offering = True
                for item in cur:
                    tdata, tvalid, _, tuser = self.ports[item[4]][:4]
                    tdata.value = item[0]
                    tuser.value = item[1]
                    tvalid.value = 1
            await RisingEdge(dut.clk)
            if idle:
                idle -= 1
            if not cur:
                continue
            taken = [int(self.ports[item[4]][2].value) for item in cur]
            if len(cur) == 2 and taken[1] and not taken[0]:
                self.errors.append(f"cycle {self.cycle()}: port 1 taken before port 0's request")
            for item, ok in zip(cur, taken):
                if ok:
                    self._accepted(item[4], item[1], item[2], item[3])
                    self.ports[item[4]][1].value = 0
                else:
                    self.stalls.append((self.cycle(), item[0] & 0x1F))  # offered, not accepted
            if len(cur) == 2 and taken == [1, 0]:
                # port 1's request waits alone, offered again in the next cycle
                cur = [cur[1]]
                continue
            if all(taken):
                cur = []
                self.offering = False
                if self.idle_prob and self.rng.random() < self.idle_prob:
                    idle = self.rng.randint(1, 3)

    async def free_run(self, streams: dict[int, list[tuple[int, object, str]]]) -> None:
        """Offer each port's requests back to back, the ports independently of each other.

        streams maps a port to its (request word, expectation, description) list; an expectation
        is a function applying the request to the model and returning the expected response. The
        expectations run as the DUT accepts the requests, in engine order (engine_order: by cycle,
        the request port's first), which is what the scoreboard then holds the responses to.
        Returns once every request was accepted (use drain() for the responses).
        """
        dut = self.dut
        queues = {port: deque((w, self._next_tag(), fn, what) for w, fn, what in items)
                  for port, items in streams.items()}
        cur: dict[int, tuple | None] = {port: None for port in queues}
        while any(queues.values()) or any(c is not None for c in cur.values()):
            for port, q in queues.items():
                if cur[port] is None and q:
                    cur[port] = q.popleft()
                    tdata, tvalid, _, tuser = self.ports[port][:4]
                    tdata.value = cur[port][0]
                    tuser.value = cur[port][1]
                    tvalid.value = 1
            await RisingEdge(dut.clk)
            accepted = []
            for port, item in cur.items():
                if item is None:
                    continue
                _, tvalid, tready, _ = self.ports[port][:4]
                if int(tready.value):
                    accepted.append((self.cycle(), port, (port, item)))
                    cur[port] = None
                    tvalid.value = 0
                else:
                    self.stalls.append((self.cycle(), item[0] & 0x1F))
            for port, (_, tag, fn, what) in engine_order(accepted):
                self._accepted(port, tag, self._full(fn()), what)

    async def _sink(self, port: int) -> None:
        dut = self.dut
        rsp_tdata, rsp_tvalid, rsp_tready, rsp_tuser = self.ports[port][4:]
        ready = 1
        hold = 0
        stalled = False  # tready was low while this response may have been waiting
        while True:
            if hold == 0:
                ready = 1 if self.rng.random() < self.ready_prob else 0
                hold = self.rng.randint(*self.ready_hold)
            hold -= 1
            rsp_tready.value = ready
            await RisingEdge(dut.clk)
            if not ready:
                stalled = True
            valid = rsp_tvalid.value
            if not valid.is_resolvable:
                if not int(dut.rst.value):
                    self.errors.append(f"cycle {self.cycle()}: tvalid unresolved")
                continue
            if int(dut.rst.value):
                stalled = False
                continue
            if ready and int(valid):
                word, unknown = _bits_and_unknown(rsp_tdata.value)
                self._check(port, word, _uint(rsp_tuser.value), stalled, unknown)
                stalled = not ready

    def _check(self, port: int, word: int, tag: int, stalled: bool, unknown: int = 0) -> None:
        if not self.inflight[port]:
            self.errors.append(f"cycle {self.cycle()}: response on port {port} with no request in flight")
            return
        t_in, exp_tag, exp, what = self.inflight[port].popleft()
        lat = self.cycle() - t_in
        self.latencies.append((lat, not stalled, port))
        got = self.unpack_rsp(word)
        for name, value in self.unpack_rsp(unknown).items():
            if value and exp.get(name) is not None:
                self.errors.append(f"{what}: {name} has X/Z bits {value:#x}")
        if tag != exp_tag:
            self.errors.append(f"{what}: tag {tag} != {exp_tag}")
        for name, value in exp.items():
            if value is not None and got[name] != value:
                self.errors.append(f"{what}: {name} {got[name]:#x} != model {value:#x} (response {got})")
        if lat < self.port_latency[port]:
            self.errors.append(f"{what}: latency {lat} < {self.port_latency[port]}")
        self.checked += 1

    async def drain(self, timeout: int = 200000) -> None:
        for _ in range(timeout):
            if not self.send_q and not self.offering and not any(self.inflight.values()):
                break
            await RisingEdge(self.dut.clk)
        await ClockCycles(self.dut.clk, 4)

    def latency_exact(self) -> bool:
        """Every response not held by back-pressure came exactly its port's latency after its request."""
        return all(lat == self.port_latency[port] for lat, clean, port in self.latencies if clean)

    def no_credit_stalls(self) -> bool:
        """Both response FIFOs are deep enough that admission never waits for credits."""
        return self.p["RSP_FIFO_DEPTH"] > self.latency and self.p["CTL_FIFO_DEPTH"] > self.latency + 1

    def check(self) -> None:
        for e in self.errors[:20]:
            self.log.error("%s", e)
        assert not self.errors, f"{len(self.errors)} scoreboard errors, first: {self.errors[0]}"
        unanswered = sum(len(q) for q in self.inflight.values())
        assert not self.send_q and not unanswered, f"{len(self.send_q)} unsent, {unanswered} unanswered requests"
        self.log.info("scoreboard: %d responses checked, latency %d", self.checked, self.latency)
        self.log.info("coverage (op, status): count: %s", dict(sorted(self.coverage.items())))

    async def final_check(self) -> None:
        """Read back every counter, rule hit count and slot through the DUT."""
        for cid in range(len(COUNTER_NAMES)):
            self.op_read_counter(cid)
        for e in range(self.rules):
            self.op_read_rule_hits(e)
            self.op_read_rule(e)
        for b in range(self.ways):
            for i in range(self.rows):
                self.op_read_slot(b, i)
        for i in range(self.stash):
            self.op_read_slot(self.ways, i)
        await self.drain()
        self.check()

    # -- stimulus -------------------------------------------------------------------------------
    def random_key(self) -> int:
        rng = self.rng
        kind = rng.randrange(3)
        if kind == 0:
            key = 0
            for _ in range(rng.randint(1, 4)):
                key |= 1 << rng.randrange(self.key_w)
            return key
        if kind == 1:
            return rng.getrandbits(self.key_w)
        length = rng.randint(0, min(8, self.kb - 1))
        raw = bytes([length]) + rng.randbytes(length) + bytes(self.kb - 1 - length)
        return int.from_bytes(raw, "big")

    def random_rule(self, pool: list[int]) -> tuple[int, int]:
        """(match, mask) that some pool keys match: a few random mask bits of a pool key."""
        rng = self.rng
        key = rng.choice(pool)
        mask = 0
        for _ in range(rng.choice([0, 1, 2, 3, 6])):
            mask |= 1 << rng.randrange(self.key_w)
        if rng.random() < 0.3:
            mask |= ((1 << rng.randint(1, 16)) - 1) << rng.randrange(self.key_w - 16)
            mask &= (1 << self.key_w) - 1
        return key & mask, mask

    def valid_slots(self) -> list[tuple[int, int]]:
        g = self.geometry
        out = []
        for n in np.flatnonzero(self.model._valid):
            n = int(n)
            out.append((n // g.rows, n % g.rows) if n < g.way_slots else (g.ways, n - g.way_slots))
        return out

    def random_address(self) -> tuple[int, int]:
        rng = self.rng
        if rng.random() < 0.08:  # a bad one
            return rng.choice([(self.ways + 1, 0), (self.ways, self.stash), (0, self.rows),
                               (rng.randrange(self.ways), (1 << 24) - 1), (15, rng.randrange(4))])
        if self.stash and rng.random() < 0.3:
            return self.ways, rng.randrange(self.stash)
        return rng.randrange(self.ways), rng.randrange(self.rows)

    def random_op(self, pool: list[int], weights: dict) -> None:
        rng = self.rng
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        if kind == "get":
            self.op_get(rng.choice(pool))
        elif kind == "lookup":
            self.op_lookup(rng.choice(pool) if rng.random() < 0.8 else self.random_key())
        elif kind == "set":
            self.op_set(rng.choice(pool), rng.getrandbits(self.value_w))
        elif kind == "del":
            self.op_del(rng.choice(pool))
        elif kind == "read_slot":
            self.op_read_slot(*self.random_address())
        elif kind == "write_slot":
            key = rng.choice(pool)
            if rng.random() < 0.7:  # at a candidate row or in the stash: visible to the data plane
                w = rng.randrange(self.ways + (1 if self.stash else 0))
                addr = (w, self.rows_of(key)[w]) if w < self.ways else (w, rng.randrange(self.stash))
            else:
                addr = self.random_address()
            self.op_write_slot(*addr, rng.random() < 0.8, key, rng.getrandbits(self.value_w))
        elif kind == "move":
            valid = self.valid_slots()
            if valid and rng.random() < 0.8:
                b1, i1 = rng.choice(valid)
                key = int.from_bytes(self.model.read_slot(b1, i1)[1], "big")
                rows = self.rows_of(key)
                choices = [(w, rows[w]) for w in range(self.ways) if w != b1]
                if self.stash and b1 != self.ways:
                    choices.append((self.ways, rng.randrange(self.stash)))
                b2, i2 = rng.choice(choices)
            else:
                (b1, i1), (b2, i2) = self.random_address(), self.random_address()
            self.op_move(b1, i1, b2, i2)
        elif kind == "write_rule":
            entry = rng.randrange(self.rules + 1) if self.rules else rng.randrange(3)
            prio = rng.randrange(4) if rng.random() < 0.9 else rng.choice(
                [(1 << self.prio_w) - 1, 1 << self.prio_w if self.prio_w < 32 else 0])
            match, mask = self.random_rule(pool)
            self.op_write_rule(entry, rng.random() < 0.85, match, mask, prio, rng.getrandbits(self.value_w))
        elif kind == "read_rule":
            self.op_read_rule(rng.randrange(self.rules + 2))
        elif kind == "read_counter":
            self.op_read_counter(rng.randrange(13))
        elif kind == "read_rule_hits":
            self.op_read_rule_hits(rng.randrange(self.rules + 2))
        elif kind == "clear_counters":
            self.op_clear_counters()
        elif kind == "clear_table":
            self.op_clear_table()
        elif kind == "unknown":
            self.op_unknown(rng.choice([0, 5, 6, 7, 17, 20, 31]))
        else:
            raise AssertionError(kind)


DATA_MIX = {"get": 20, "lookup": 20, "set": 30, "del": 12}
FULL_MIX = {"get": 14, "lookup": 16, "set": 22, "del": 9, "read_slot": 5, "write_slot": 3, "move": 6,
            "write_rule": 6, "read_rule": 2, "read_counter": 2, "read_rule_hits": 2,
            "clear_counters": 0.4, "clear_table": 0.2, "unknown": 0.6}


def n_ops(default: int) -> int:
    return int(os.environ.get("KV_ENGINE_OPS", default))


@cocotb.test()
async def run_data_plane(dut):
    """GET/LOOKUP/SET/DEL from a small key pool (hits, updates, stash, FULL), back-to-back."""
    tb = TB(dut, cocotb.RANDOM_SEED)
    await tb.reset()
    capacity = tb.geometry.capacity
    pool = [tb.random_key() for _ in range(capacity + capacity // 2 + 2)]
    for _ in range(n_ops(1500)):
        tb.random_op(pool, DATA_MIX)
    await tb.drain()
    # one request per clock: with the sink always ready nothing ever waits for admission
    # (when RSP_FIFO_DEPTH > LATENCY)
    if tb.p["RSP_FIFO_DEPTH"] > tb.latency:
        cycles = tb.accept_cycles
        assert cycles[-1] - cycles[0] == len(set(cycles)) - 1, "admission stalled without back-pressure"
    assert tb.latency_exact()
    await tb.final_check()
    c = tb.model.counters()
    tb.log.info("counters: %s", c)
    if tb.stash:
        assert c["inserts"] and c["updates"], c


@cocotb.test()
async def run_full_mix(dut):
    """Every operation, random idle cycles on the input, random back-pressure on the output."""
    tb = TB(dut, cocotb.RANDOM_SEED + 1)
    tb.idle_prob = 0.3
    tb.ready_prob = 0.6
    tb.ready_hold = (1, 6)
    await tb.reset()
    capacity = tb.geometry.capacity
    pool = [tb.random_key() for _ in range(capacity + capacity // 2 + 2)]
    for _ in range(n_ops(2000)):
        tb.random_op(pool, FULL_MIX)
    await tb.drain()
    await tb.final_check()
    c = tb.model.counters()
    tb.log.info("counters: %s", c)


@cocotb.test()
async def run_full_mix_fast(dut):
    """Every operation back to back with the sink always ready (hazards everywhere)."""
    tb = TB(dut, cocotb.RANDOM_SEED + 2)
    await tb.reset()
    pool = [tb.random_key() for _ in range(tb.geometry.capacity + 2)]
    for _ in range(n_ops(1500)):
        tb.random_op(pool, FULL_MIX)
    await tb.drain()
    await tb.final_check()
    assert tb.latency_exact()


@cocotb.test()
async def run_hazards(dut):
    """Directed read-after-write sequences on consecutive cycles."""
    tb = TB(dut, cocotb.RANDOM_SEED + 3)
    await tb.reset()
    rng = tb.rng
    keys = [tb.random_key() for _ in range(6)]
    k = keys[0]
    # same key back to back; SET then GET next cycle; DEL then SET; DEL twice
    tb.op_set(k, 1)
    tb.op_get(k)
    tb.op_set(k, 2)
    tb.op_set(k, 3)
    tb.op_lookup(k)
    tb.op_del(k)
    tb.op_get(k)
    tb.op_set(k, 4)
    tb.op_del(k)
    tb.op_del(k)
    tb.op_set(k, 5)
    tb.op_get(k)
    # two keys sharing way-0's row alternately (if any collide), plus a burst of SETs of all keys
    for key in keys:
        tb.op_set(key, rng.getrandbits(tb.value_w))
    for key in keys:
        tb.op_get(key)
    for key in reversed(keys):
        tb.op_del(key)
        tb.op_set(key, rng.getrandbits(tb.value_w))
        tb.op_lookup(key)
    # MOVE chains: each move followed at once by lookups and another move
    for key in keys[:3]:
        for _ in range(4):
            valid = [s for s in tb.valid_slots()
                     if int.from_bytes(tb.model.read_slot(*s)[1], "big") == key]
            if not valid:
                break
            b1, i1 = valid[0]
            rows = tb.rows_of(key)
            dests = [(w, rows[w]) for w in range(tb.ways) if w != b1]
            if tb.stash and b1 != tb.ways:
                dests.append((tb.ways, 0))
            b2, i2 = rng.choice(dests)
            tb.op_move(b1, i1, b2, i2)
            tb.op_get(key)
            tb.op_read_slot(b2, i2)
            tb.op_read_slot(b1, i1)
            tb.op_set(key, rng.getrandbits(tb.value_w))
            tb.op_lookup(key)
    # WRITE_SLOT then everything on the next cycle
    key = keys[4]
    row = tb.rows_of(key)
    tb.op_write_slot(1, row[1], True, key, 77)
    tb.op_get(key)
    tb.op_write_slot(0, row[0], True, key, 78)  # a second copy: GET answers from way 0
    tb.op_get(key)
    tb.op_set(key, 79)  # updates both copies
    tb.op_read_slot(1, row[1])
    tb.op_del(key)  # deletes both
    tb.op_read_counter(10)
    # WRITE_RULE then LOOKUP next cycle, priority ties (lowest entry wins), rule rewrites
    if tb.rules:
        probe = keys[5]
        tb.op_del(probe)
        last = min(tb.rules, 4)
        for e in range(last):
            tb.op_write_rule(e, True, 0, 0, 5, 100 + e)  # match-all, tie
            tb.op_lookup(probe)
        tb.op_write_rule(last - 1, True, 0, 0, 6, 200)  # higher priority wins
        tb.op_lookup(probe)
        tb.op_write_rule(last - 1, False, 0, 0, 6, 201)  # disabled: back to the tie
        tb.op_lookup(probe)
        tb.op_read_rule_hits(0)
        tb.op_write_rule(0, True, probe, (1 << tb.key_w) - 1, 5, 300)  # exact-key rule
        tb.op_lookup(probe)
        tb.op_read_rule_hits(0)
        tb.op_read_rule(0)
        tb.op_set(probe, 9)
        tb.op_lookup(probe)  # the exact table wins over rules
        tb.op_del(probe)
        tb.op_lookup(probe)
        tb.op_clear_counters()
        tb.op_lookup(probe)
        tb.op_read_rule_hits(0)
        tb.op_write_rule(0, True, 0, 0, 5, 301)
        tb.op_read_rule_hits(0)
        tb.op_write_rule(tb.rules, True, 0, 0, 1, 0)  # refused
        if tb.prio_w < 32:
            tb.op_write_rule(0, True, 0, 0, 1 << tb.prio_w, 0)  # refused
        tb.op_lookup(probe)
        # each port refuses the other's opcodes and changes nothing
        tb.op_wrong_port(tb.req_write_rule(0, True, 0, 0, 7, 400), "WRITE_RULE")
        tb.op_lookup(probe)
        tb.op_read_rule(0)
        tb.op_wrong_port(tb.pack(READ_RULE_HITS, entry=0), "READ_RULE_HITS")
        tb.op_wrong_port(tb.pack(LOOKUP, key=probe), "LOOKUP")
        tb.op_wrong_port(tb.pack(SET, key=probe, value=5), "SET")
        tb.op_get(probe)
        tb.op_read_counter(9)
    # CLEAR_TABLE in the middle of traffic
    tb.op_set(keys[0], 1)
    tb.op_clear_table()
    tb.op_get(keys[0])
    tb.op_set(keys[0], 2)
    tb.op_get(keys[0])
    await tb.drain()
    await tb.final_check()
    assert tb.latency_exact()


@cocotb.test()
async def run_backpressure(dut):
    """Long tready-low bursts: admission stops (credits), nothing is lost, latency stays fixed."""
    tb = TB(dut, cocotb.RANDOM_SEED + 4)
    tb.ready_prob = 0.3
    tb.ready_hold = (1, 40)
    await tb.reset()
    pool = [tb.random_key() for _ in range(tb.geometry.capacity + 2)]
    for _ in range(n_ops(800)):
        tb.random_op(pool, DATA_MIX)
    await tb.drain()
    tb.ready_prob = 1.0
    await tb.final_check()


REWRITE_CYCLES = 34  # kv_rule_match: background rewrite of one rule entry


@cocotb.test()
async def run_rule_rewrites_streaming(dut):
    """Rule rewrites while LOOKUPs stream back to back: every LOOKUP sees exactly the rules
    written before it (the background rewrite of the matcher is invisible), READ_RULE and
    READ_RULE_HITS right after a WRITE_RULE, rewrites of one entry in consecutive cycles."""
    tb = TB(dut, cocotb.RANDOM_SEED + 5)
    await tb.reset()
    if not tb.rules:
        return
    rng = tb.rng
    pool = [tb.random_key() for _ in range(12)]
    for key in pool[:4]:
        tb.op_set(key, rng.getrandbits(tb.value_w))  # a few exact hits
    full = (1 << tb.key_w) - 1
    # every entry: a rule some pool keys match
    for e in range(tb.rules):
        match, mask = tb.random_rule(pool)
        tb.op_write_rule(e, True, match, mask, rng.randrange(1 << tb.prio_w), rng.getrandbits(tb.value_w))
    for _ in range(300):
        r = rng.random()
        if r < 0.06:  # WRITE_RULE, then at once the things that must see it
            e = rng.randrange(tb.rules)
            key = rng.choice(pool)
            if rng.random() < 0.5:
                match, mask = key, full  # exact-key rule, the LOOKUP below hits it unless exact
            else:
                match, mask = tb.random_rule(pool)
            prio = rng.randrange(1 << tb.prio_w)
            tb.op_write_rule(e, rng.random() < 0.85, match, mask, prio, rng.getrandbits(tb.value_w))
            tb.op_lookup(key)
            tb.op_read_rule(e)
            if rng.random() < 0.3:  # the same entry again before its rewrite even started
                tb.op_write_rule(e, True, 0, 0, prio, rng.getrandbits(tb.value_w))
                tb.op_lookup(rng.choice(pool))
                tb.op_read_rule(e)
            tb.op_read_rule_hits(e)
        elif r < 0.08:
            tb.op_read_rule_hits(rng.randrange(tb.rules))
        else:
            tb.op_lookup(rng.choice(pool) if rng.random() < 0.9 else tb.random_key())
    await tb.drain()
    await tb.final_check()
    assert tb.latency_exact()


@cocotb.test()
async def run_rule_slots_exhausted(dut):
    """More back-to-back WRITE_RULEs than RULE_SLOTS: the control port holds the WRITE_RULE that
    finds no free slot until a rewrite retires (the testbench sends in program order, so the
    lookups queued behind it wait in the testbench, not in the engine: run_rule_storm shows the
    request port never waits); nothing else is ever refused; rule writes spaced REWRITE_CYCLES
    apart never wait."""
    tb = TB(dut, cocotb.RANDOM_SEED + 6)
    await tb.reset()
    if not tb.rules:
        return
    rng = tb.rng
    slots = tb.p["RULE_SLOTS"]
    pool = [tb.random_key() for _ in range(8)]
    extra = 3
    for i in range(slots + extra):
        match, mask = tb.random_rule(pool)
        tb.op_write_rule(i % tb.rules, True, match, mask, rng.randrange(1 << tb.prio_w), i)
        tb.op_lookup(rng.choice(pool))  # lookups interleaved: answered with the rules so far
    for _ in range(REWRITE_CYCLES * 2):
        tb.op_lookup(rng.choice(pool))
    await tb.drain()
    if tb.no_credit_stalls():  # every refusal is a rule slot wait
        refused_ops = {op for _, op in tb.stalls}
        assert refused_ops == {WRITE_RULE}, f"refused requests other than WRITE_RULE: {refused_ops}"
        waited = len(tb.stalls)
        # the (slots+1)-th write waits for the first rewrite to retire, and so on
        assert 0 < waited <= REWRITE_CYCLES * (extra + 1), waited
        tb.log.info("WRITE_RULE waited %d cycles in total for a rule slot", waited)
    # at the sustainable rate nothing waits (once the burst's rewrites are done)
    await ClockCycles(dut.clk, REWRITE_CYCLES * (slots + extra + 1))
    tb.stalls.clear()
    for i in range(6):
        match, mask = tb.random_rule(pool)
        tb.op_write_rule(rng.randrange(tb.rules), True, match, mask, 1, i)
        for _ in range(REWRITE_CYCLES - 1):
            tb.op_lookup(rng.choice(pool))
    await tb.drain()
    if tb.no_credit_stalls() and slots >= 2:
        assert not tb.stalls, f"requests waited at one rule write per {REWRITE_CYCLES} cycles: {tb.stalls[:5]}"
    await tb.final_check()


@cocotb.test()
async def run_two_request_ports(dut):
    """LOOKUP_PORTS = 2: both request ports offered back to back at once (SET, DEL, GET and
    LOOKUP on a small key pool on port 0, GETs of the same keys on port 1, so the ports'
    requests depend on each other; a port-1 request that is not a GET would wait for port 0's
    stream to end, by design), the control port idle. Checked every cycle: port 1 is taken beside port 0
    only as a pair (port 0's GET or LOOKUP taken, port 1's GET) and never while port 0 offers
    and is not taken, and a pair is refused exactly when a writer (SET, DEL) went into lane A
    RAM_LAT + 2 cycles before (its RAM write meets lane B's read). Every response of both ports
    equals the model's with the requests applied in engine_order; some cycles take two."""
    tb = TB(dut, cocotb.RANDOM_SEED + 8)
    await tb.reset()
    if tb.lookup_ports != 2:
        return
    rng = tb.rng
    pool = [tb.random_key() for _ in range(6)]
    dut_ = tb.dut
    violations: list[str] = []
    writer_cycles: set[int] = set()  # cycles in which lane A took a SET or DEL
    pairs = blocked = 0
    delay = tb.p["RAM_LAT"] + 2

    async def watch_admission() -> None:
        nonlocal pairs, blocked
        while True:
            await RisingEdge(dut_.clk)
            await ReadOnly()
            now = tb.cycle()
            v0, r0 = int(dut_.s_axis_req_tvalid.value), int(dut_.s_axis_req_tready.value)
            v1, r1 = int(dut_.s_axis_req1_tvalid.value), int(dut_.s_axis_req1_tready.value)
            op0 = _uint(dut_.s_axis_req_tdata.value) & 0x1F
            op1 = _uint(dut_.s_axis_req1_tdata.value) & 0x1F
            lane_a_op = op0 if v0 else op1
            if (v0 and r0) or (not v0 and v1 and r1):
                if lane_a_op in (SET, DEL):
                    writer_cycles.add(now)
            if not (v0 and v1):
                continue
            pairable = op0 in (GET, LOOKUP) and op1 == GET
            if r1 and not (r0 and pairable):
                violations.append(f"cycle {now}: port 1 taken beside port 0 (op {op0}, ready {r0}) with op {op1}")
            if r0 and pairable and tb.p["RSP_FIFO_DEPTH"] > tb.latency:
                expect = (now - delay) not in writer_cycles
                if bool(r1) != expect:
                    violations.append(f"cycle {now}: pair {'refused' if expect else 'taken'} (writer "
                                      f"{delay} cycles before: {not expect})")
                pairs += r1
                blocked += not r1

    def stream(n: int, kinds: list[str]) -> list:
        items = []
        for _ in range(n):
            key = rng.choice(pool)
            kind = rng.choice(kinds)
            if kind == "set":
                value = rng.getrandbits(tb.value_w)
                items.append((tb.pack(SET, key=key, value=value),
                              lambda key=key, value=value: {"op": SET, "status": int(tb.model.set_batch(
                                  tb.key_arr(key), tb.val_arr(value))[0])}, f"SET {key:#x}={value:#x}"))
            elif kind == "del":
                items.append((tb.pack(DEL, key=key),
                              lambda key=key: {"op": DEL, "status": int(tb.model.delete_batch(tb.key_arr(key))[0])},
                              f"DEL {key:#x}"))
            elif kind == "get":
                items.append((tb.pack(GET, key=key), lambda key=key: tb.exp_get(key), f"GET {key:#x}"))
            else:
                items.append((tb.pack(LOOKUP, key=key), lambda key=key: tb.exp_lookup(key), f"LOOKUP {key:#x}"))
        return items

    watcher = cocotb.start_soon(watch_admission())
    await RisingEdge(dut_.clk)  # the watcher sees the first cycle's offers (a first writer too)
    first = len(tb.accept_cycles)
    n = n_ops(300)
    await tb.free_run({REQUEST_PORT: stream(n, ["set", "del", "get", "lookup", "get", "lookup"]),
                       REQUEST_PORT1: stream(n, ["get"])})
    await tb.drain()
    watcher.cancel()
    cycles = tb.accept_cycles[first:]
    assert not violations, f"{len(violations)} admission errors, first: {violations[:3]}"
    assert len(cycles) == 2 * n
    tb.log.info("two request ports: %d requests in %d cycles, %d pairs taken, %d refused for a write",
                len(cycles), cycles[-1] - cycles[0] + 1, pairs, blocked)
    if tb.p["RSP_FIFO_DEPTH"] > tb.latency:
        assert cycles[-1] - cycles[0] == len(set(cycles)) - 1, "a cycle with requests offered took none"
        assert pairs > n // 10 and blocked > 0, (pairs, blocked)
    await tb.final_check()
    assert tb.latency_exact()


STORM_CTL_EVERY = 4  # a WRITE_RULE in every 4th control-port slot


@cocotb.test()
async def run_rule_storm(dut):
    """LOOKUPs offered every cycle on the request port while the control port is kept busy
    with control operations, a WRITE_RULE in every STORM_CTL_EVERY-th slot (READ_RULE_HITS,
    READ_RULE, READ_COUNTER, now and then CLEAR_COUNTERS between): the request port takes one LOOKUP every cycle (no rule
    write, full rule slot or control response ever holds it), and every response of both ports
    equals the model's with the requests applied in engine_order."""
    tb = TB(dut, cocotb.RANDOM_SEED + 7)
    await tb.reset()
    if not tb.rules:
        return
    rng = tb.rng
    pool = [tb.random_key() for _ in range(10)]
    for key in pool[:3]:
        tb.op_set(key, rng.getrandbits(tb.value_w))
    for e in range(tb.rules):
        match, mask = tb.random_rule(pool)
        tb.op_write_rule(e, True, match, mask, rng.randrange(1 << tb.prio_w), rng.getrandbits(tb.value_w))
    await tb.drain()
    tb.stalls.clear()
    n = n_ops(400)
    lookups = []
    for _ in range(n):
        key = rng.choice(pool) if rng.random() < 0.9 else tb.random_key()
        lookups.append((tb.pack(LOOKUP, key=key), lambda key=key: tb.exp_lookup(key), f"LOOKUP {key:#x}"))
    controls = []
    full = (1 << tb.key_w) - 1
    for i in range(n // 2):
        if i % STORM_CTL_EVERY == 0:
            e = rng.randrange(tb.rules)
            key = rng.choice(pool)
            match, mask = (key, full) if rng.random() < 0.4 else tb.random_rule(pool)
            args = (e, rng.random() < 0.85, match, mask, rng.randrange(1 << tb.prio_w),
                    rng.getrandbits(tb.value_w))
            controls.append((tb.req_write_rule(*args), lambda args=args: tb.exp_write_rule(*args),
                             f"WRITE_RULE {e}"))
        elif rng.random() < 0.03:
            controls.append((tb.pack(CLEAR_COUNTERS), tb.exp_clear_counters, "CLEAR_COUNTERS"))
        else:
            kind = rng.randrange(3)
            if kind == 0:
                e = rng.randrange(tb.rules)
                controls.append((tb.pack(READ_RULE_HITS, entry=e), lambda e=e: tb.exp_read_rule_hits(e),
                                 f"READ_RULE_HITS {e}"))
            elif kind == 1:
                e = rng.randrange(tb.rules)
                controls.append((tb.pack(READ_RULE, entry=e), lambda e=e: tb.exp_read_rule(e), f"READ_RULE {e}"))
            else:
                cid = rng.choice([0, 2, 3])  # lookups, rule_hits, misses: they move every cycle
                controls.append((tb.pack(READ_COUNTER, index=cid), lambda cid=cid: tb.exp_read_counter(cid),
                                 f"READ_COUNTER {cid}"))
    first = len(tb.accept_cycles)
    ctl_first = len(tb.ctl_accept_cycles)
    await tb.free_run({REQUEST_PORT: lookups, CONTROL_PORT: controls})
    await tb.drain()
    cycles = tb.accept_cycles[first:]
    ctl_cycles = tb.ctl_accept_cycles[ctl_first:]
    writes = sum(1 for i in range(len(controls)) if i % STORM_CTL_EVERY == 0)
    tb.log.info("rule storm: %d LOOKUPs in %d cycles, %d control requests (%d WRITE_RULE) in %d cycles",
                len(cycles), cycles[-1] - cycles[0] + 1, len(ctl_cycles), writes,
                ctl_cycles[-1] - ctl_cycles[0] + 1)
    if tb.p["RSP_FIFO_DEPTH"] > tb.latency:  # else LOOKUPs wait for response credits (by design)
        assert cycles[-1] - cycles[0] == len(cycles) - 1, "the request port waited during the rule storm"
        assert LOOKUP not in {op for _, op in tb.stalls}, "a LOOKUP was offered and not taken"
    assert ctl_cycles[0] <= cycles[-1] and ctl_cycles[-1] >= cycles[0], "the two streams did not overlap"
    await tb.final_check()
    assert tb.latency_exact()


# ------------------------------------------------------------------------------------------
# pytest: build and run the cocotb tests above
# ------------------------------------------------------------------------------------------

def _config(key_w, ways, rows, stash, rules, value_w=32, prio_w=4, **extra):
    p = {"KEY_W": key_w, "VALUE_W": value_w, "WAYS": ways, "ROWS": rows, "STASH": stash,
         "RULES": rules, "PRIO_W": prio_w, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8}
    p.update(extra)
    return p


def _config_id(sim: str, p: dict) -> str:
    extra = "".join(f"-{k.lower()}{v}" for k, v in p.items()
                    if k in ("HASH_STAGES", "RAM_LAT", "TREE_LEVELS_PER_STAGE", "RULE_SLOTS", "RSP_FIFO_DEPTH",
                             "CTL_FIFO_DEPTH", "LOOKUP_PORTS"))
    return (f"{sim}-k{p['KEY_W']}-v{p['VALUE_W']}-w{p['WAYS']}-r{p['ROWS']}-s{p['STASH']}"
            f"-ru{p['RULES']}-p{p['PRIO_W']}{extra}")


# Every key width, WAYS 2..4 (and 8), ROWS 4..16, STASH 0..4, RULES 0..8, both RAM latencies,
# several tree shapes, RULE_SLOTS 1..8; Verilator gets one configuration (its build takes ~30 s).
CONFIGS = [
    ("icarus", _config(144, 2, 4, 2, 4, RULE_SLOTS=1)),
    ("icarus", _config(288, 3, 8, 0, 0, value_w=64, HASH_STAGES=1)),
    ("icarus", _config(576, 4, 16, 4, 8, prio_w=3, RAM_LAT=2, TREE_LEVELS_PER_STAGE=1)),
    ("icarus", _config(1152, 2, 8, 1, 3, value_w=96, prio_w=32, HASH_STAGES=3, RULE_SLOTS=8)),
    ("icarus", _config(144, 8, 2, 3, 1, prio_w=1, RSP_FIFO_DEPTH=4, CTL_FIFO_DEPTH=2)),
    ("icarus", _config(288, 2, 16, 0, 7, value_w=512, prio_w=16, TREE_LEVELS_PER_STAGE=3, RULE_SLOTS=2)),
    ("verilator", _config(288, 4, 8, 4, 8, value_w=128, prio_w=8, RAM_LAT=2)),
    # the second request port (LOOKUP_PORTS = 2)
    ("icarus", _config(144, 2, 4, 2, 4, RULE_SLOTS=1, LOOKUP_PORTS=2)),
    ("icarus", _config(576, 4, 16, 4, 8, prio_w=3, RAM_LAT=2, TREE_LEVELS_PER_STAGE=1, LOOKUP_PORTS=2)),
    ("icarus", _config(288, 3, 8, 0, 0, value_w=64, HASH_STAGES=1, LOOKUP_PORTS=2)),
    ("verilator", _config(288, 4, 8, 4, 8, value_w=128, prio_w=8, RAM_LAT=2, LOOKUP_PORTS=2)),
]



@pytest.mark.parametrize("sim,params", CONFIGS, ids=[_config_id(s, p) for s, p in CONFIGS])
def test_kv_engine(sim: str, params: dict) -> None:
    tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(*MODULES), params,
                     tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params),
                     seed=int(os.environ.get("KV_ENGINE_RANDOM_SEED", "20240601")),
                     params_env="KV_ENGINE_PARAMS", build_args=("-Wno-fatal",) if sim == "verilator" else ())


# A few seconds: the cocotb test that fails if a rule write (or any control request) ever holds
# the request port, alone, at a small geometry with one rule slot (every WRITE_RULE after the
# first waits for a rewrite on the control port) and at the default four.
STORM_CONFIGS = [_config(144, 2, 8, 2, 8, RULE_SLOTS=1), _config(288, 4, 8, 2, 16, prio_w=8)]


@pytest.mark.parametrize("params", STORM_CONFIGS, ids=[_config_id("icarus", p) for p in STORM_CONFIGS])
def test_rule_storm_never_holds_lookups(params: dict) -> None:
    tools.run_cocotb("icarus", TOPLEVEL, __file__, tools.rtl_sources(*MODULES), params,
                     tools.BUILD_DIR / TOPLEVEL / ("storm-" + _config_id("icarus", params)),
                     seed=int(os.environ.get("KV_ENGINE_RANDOM_SEED", "20240601")),
                     params_env="KV_ENGINE_PARAMS", testcase="run_rule_storm")
