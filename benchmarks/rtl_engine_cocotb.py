"""cocotb side of benchmarks/rtl_engine.py: cycle-accurate throughput and latency of kv_engine.

Runs inside the simulator (started by benchmarks/rtl_engine.py through cocotb_tools.runner).
Every request is first applied to ``ModelBackend`` in stream order, which gives its expected
response; the stream is then driven with tvalid held at 1 and m_axis_rsp_tready held at 1, every
handshake is time-stamped (cycle of the rising edge), responses are paired with requests by their
tuser tag, and every response is compared field by field with the model afterwards.

Phases (one simulation, one model):
  fill     WRITE_RULE of every rule entry (control port), SETs of random keys (request port) until
           the model's occupancy reaches the target fraction of WAYS*ROWS+STASH, READ_COUNTER
           occupancy (control port)
  lookups  measured: LOOKUPs of random keys (half present in the table, half fresh), ~10 % SET/DEL
  storm    measured: LOOKUPs back to back on the request port while the control port is offered a
           control request every cycle, a WRITE_RULE (valid or invalid entry) in every
           STORM_EVERY-th slot and READ_RULE_HITS / READ_COUNTER / READ_RULE in the others
  writes   measured: the same with a WRITE_RULE in every control slot: the sustained rule-write
           rate (the rule matcher rewrites one entry in 34 cycles in the background)
In the two-port phases the expectations are computed after the run: the requests of both ports
are applied to the model in pynq_kv.model.engine_order (acceptance cycle, request port first),
the order the engine defines (docs/engine.md §5.7).
Between phases the streams are drained, so every measured window starts with the pipeline empty.
Results go to $KV_BENCH_OUT as JSON; a mismatch fails the test (and the script).
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

REPO_DIR = Path(__file__).resolve().parents[1]
if str(REPO_DIR) not in sys.path:
    sys.path.insert(0, str(REPO_DIR))

from pynq_kv.backend import COUNTER_NAMES, MatchKind, RuleEntry  # noqa: E402
from pynq_kv.geometry import Geometry  # noqa: E402
from pynq_kv.errors import CommandError  # noqa: E402
from pynq_kv.model import CONTROL_PORT, REQUEST_PORT, ModelBackend, engine_order  # noqa: E402

LOOKUP, SET, DEL, WRITE_RULE, READ_RULE, READ_COUNTER, READ_RULE_HITS = 2, 3, 4, 11, 12, 15, 16
OCCUPANCY = 10
REQ_FIELDS = {"op": (0, 5), "flag": (5, 1), "bank": (6, 4), "index": (10, 24), "bank2": (34, 4),
              "index2": (38, 24), "entry": (62, 12), "prio": (74, 32)}
RSP_FIELDS = {"op": (0, 5), "status": (5, 4), "flag": (9, 1), "entry": (10, 12), "prio": (22, 32),
              "data64": (54, 64)}
CLK_NS = 4


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


class Bench:
    def __init__(self, dut, cfg: dict):
        self.dut = dut
        self.cfg = cfg
        p = cfg["params"]
        self.p = p
        self.key_w, self.value_w = p["KEY_W"], p["VALUE_W"]
        self.ways, self.rows, self.stash, self.rules = p["WAYS"], p["ROWS"], p["STASH"], p["RULES"]
        self.prio_w, self.tag_w = p["PRIO_W"], p["TAG_W"]
        self.kb, self.vb = self.key_w // 8, self.value_w // 8
        self.geometry = Geometry(key_width=self.key_w, value_width=self.value_w, ways=self.ways,
                                 rows=self.rows, stash=self.stash, rules=self.rules,
                                 prio_width=self.prio_w, hash_seed=p["HASH_SEED"])
        self.model = ModelBackend(self.geometry)
        self.rng = random.Random(cfg["seed"])
        self.log = logging.getLogger("cocotb.bench")
        self.log.setLevel(logging.INFO)
        self.present: list[int] = []  # keys in the table (model), for hit lookups and DELs
        self.present_at: dict[int, int] = {}
        self.tag = 0
        self.rules_written: set[int] = set()

    # -- packing ----------------------------------------------------------------------------
    def pack(self, op, flag=0, entry=0, prio=0, index=0, key=0, mask=0, value=0) -> int:
        f = dict(op=op, flag=flag, bank=0, index=index, bank2=0, index2=0, entry=entry, prio=prio)
        word = 0
        for name, (off, _width) in REQ_FIELDS.items():
            word |= f[name] << off
        return word | key << 106 | mask << (106 + self.key_w) | value << (106 + 2 * self.key_w)

    def unpack(self, word: int) -> dict:
        out = {n: (word >> off) & ((1 << w) - 1) for n, (off, w) in RSP_FIELDS.items()}
        out["key"] = (word >> 118) & ((1 << self.key_w) - 1)
        out["mask"] = (word >> (118 + self.key_w)) & ((1 << self.key_w) - 1)
        out["value"] = (word >> (118 + 2 * self.key_w)) & ((1 << self.value_w) - 1)
        return out

    def keys_arr(self, keys: list[int]) -> np.ndarray:
        raw = b"".join(k.to_bytes(self.kb, "big") for k in keys)
        return np.frombuffer(raw, dtype=np.uint8).reshape(len(keys), self.kb)

    def vals_arr(self, vals: list[int]) -> np.ndarray:
        raw = b"".join(v.to_bytes(self.vb, "big") for v in vals)
        return np.frombuffer(raw, dtype=np.uint8).reshape(len(vals), self.vb)

    def _req(self, stream: list, word: int, exp: dict, kind: str) -> None:
        full = {"status": 0, "flag": 0, "entry": 0, "prio": 0, "data64": 0, "key": 0, "mask": 0,
                "value": 0}
        full.update(exp)
        stream.append((word, self.tag, full, kind))
        self.tag = (self.tag + 1) & ((1 << self.tag_w) - 1)

    # -- key bookkeeping --------------------------------------------------------------------
    def _add(self, key: int) -> None:
        if key not in self.present_at:
            self.present_at[key] = len(self.present)
            self.present.append(key)

    def _remove(self, key: int) -> None:
        i = self.present_at.pop(key, None)
        if i is None:
            return
        last = self.present.pop()
        if i < len(self.present):
            self.present[i] = last
            self.present_at[last] = i

    # -- operations: model now, request + expectation into the stream -------------------------
    def sets(self, stream: list, keys: list[int], values: list[int]) -> None:
        st = self.model.set_batch(self.keys_arr(keys), self.vals_arr(values))
        for k, v, s in zip(keys, values, st):
            s = int(s)
            if s != 3:  # not FULL: the key is in the table
                self._add(k)
            self._req(stream, self.pack(SET, key=k, value=v), {"op": SET, "status": s}, "set")

    def dels(self, stream: list, keys: list[int]) -> None:
        st = self.model.delete_batch(self.keys_arr(keys))
        for k, s in zip(keys, st):
            self._remove(k)
            self._req(stream, self.pack(DEL, key=k), {"op": DEL, "status": int(s)}, "del")

    def lookups(self, stream: list, keys: list[int]) -> None:
        for k, exp in zip(keys, self.expect_lookups(keys)):
            self._req(stream, self.pack(LOOKUP, key=k), exp, "lookup")

    def expect_lookups(self, keys: list[int]) -> list[dict]:
        """Apply LOOKUPs of keys to the model (one batch: sequential meaning); their expectations."""
        res = self.model.lookup_batch(self.keys_arr(keys))
        prio = {}
        out = []
        for i in range(len(keys)):
            kind = int(res.kind[i])
            exp = {"op": LOOKUP, "status": kind}
            if kind != MatchKind.MISS:
                exp["value"] = int.from_bytes(res.values[i].tobytes(), "big")
            if kind == MatchKind.RULE:
                e = int(res.entry[i])
                if e not in prio:
                    prio[e] = self.model.read_rule(e).priority
                exp["entry"] = e
                exp["prio"] = prio[e]
            out.append(exp)
        return out

    def random_rule(self) -> tuple[int, int]:
        """(match, mask): k random mask bits, k = log2(RULES) -2 .. +2, so that a random key
        matches about one rule on average (rule hits, priority contests and misses all occur);
        the match bits are half the time a present key's."""
        rng = self.rng
        lg = max(1, self.rules).bit_length() - 1
        mask = 0
        for _ in range(rng.randint(max(1, lg - 2), lg + 2)):
            mask |= 1 << rng.randrange(self.key_w)
        src = rng.choice(self.present) if self.present and rng.random() < 0.5 else rng.getrandbits(self.key_w)
        return src & mask, mask

    def random_write_rule(self, entry: int, valid: bool) -> tuple[int, bool, int, int, int, int]:
        match, mask = self.random_rule()
        return entry, valid, match, mask, self.rng.randrange(1 << self.prio_w), self.rng.getrandbits(self.value_w)

    def pack_write_rule(self, entry: int, valid: bool, match: int, mask: int, prio: int, value: int) -> int:
        return self.pack(WRITE_RULE, flag=int(valid), entry=entry, prio=prio, key=match, mask=mask, value=value)

    def apply_write_rule(self, entry: int, valid: bool, match: int, mask: int, prio: int, value: int) -> dict:
        self.model.write_rule(entry, RuleEntry(valid, match, mask, prio, value.to_bytes(self.vb, "big")))
        self.rules_written.add(entry)
        return {"op": WRITE_RULE}

    def write_rule(self, stream: list, entry: int, valid: bool) -> None:
        args = self.random_write_rule(entry, valid)
        self._req(stream, self.pack_write_rule(*args), self.apply_write_rule(*args),
                  "write_rule_valid" if valid else "write_rule_invalid")

    def read_occupancy(self, stream: list) -> None:
        self._req(stream, self.pack(READ_COUNTER, index=OCCUPANCY),
                  {"op": READ_COUNTER, "data64": self.model.read_counter(OCCUPANCY)}, "read_counter")

    # -- streams ------------------------------------------------------------------------------
    def rules_stream(self) -> list:
        stream: list = []
        for e in range(self.rules):
            self.write_rule(stream, e, self.rng.random() < 0.85)
        return stream

    def fill_stream(self, target: int) -> list:
        stream: list = []
        while True:
            occ = self.model.read_counter(OCCUPANCY)
            need = target - occ
            if need <= 0:
                break
            n = min(need, 4096)  # each SET adds at most one entry: never overshoots the target
            keys = [self.rng.getrandbits(self.key_w) for _ in range(n)]
            self.sets(stream, keys, [self.rng.getrandbits(self.value_w) for _ in range(n)])
            if len(stream) > 40 * target + 1000:
                raise RuntimeError(f"fill stuck at occupancy {occ} < {target}")
        return stream

    def mixed_stream(self, n: int, update_frac: float, occupancy_target: int) -> list:
        """n requests: LOOKUPs (half present keys, half fresh random keys) and update_frac SET/DEL
        (a third SETs of present keys; the rest DELs of present keys while the occupancy is at
        or above occupancy_target, else SETs of new keys)."""
        rng = self.rng
        stream: list = []
        pending: list[int] = []

        def flush():
            if pending:
                self.lookups(stream, pending)
                pending.clear()

        for _ in range(n):
            r = rng.random()
            if r < update_frac / 3:  # SET of a present key (UPDATED)
                flush()
                key = rng.choice(self.present) if self.present else rng.getrandbits(self.key_w)
                self.sets(stream, [key], [rng.getrandbits(self.value_w)])
            elif r < update_frac:
                # DEL of a present key or SET of a new key, whichever keeps the occupancy at
                # the fill target (new-key SETs often answer FULL at ~90 %)
                flush()
                if self.present and self.model.read_counter(OCCUPANCY) >= occupancy_target:
                    self.dels(stream, [rng.choice(self.present)])
                else:
                    self.sets(stream, [rng.getrandbits(self.key_w)], [rng.getrandbits(self.value_w)])
            else:
                if self.present and rng.random() < 0.5:
                    pending.append(rng.choice(self.present))
                else:
                    pending.append(rng.getrandbits(self.key_w))
        flush()
        return stream

    # -- simulation ---------------------------------------------------------------------------
    async def reset(self) -> None:
        dut = self.dut
        dut.rst.value = 1
        for port in (REQUEST_PORT, CONTROL_PORT):
            tdata, tvalid, _, tuser, _, _, rready, _ = self.port(port)
            tvalid.value = 0
            tdata.value = 0
            tuser.value = 0
            rready.value = 1
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await ClockCycles(dut.clk, self.rows)  # the clear sweep after reset
        for _ in range(100):
            await RisingEdge(dut.clk)
            if int(dut.s_axis_req_tready.value):
                return
        raise AssertionError("tready never rose after reset")

    def port(self, port: int) -> tuple:
        """Request tdata, tvalid, tready, tuser and response tdata, tvalid, tready, tuser."""
        d = self.dut
        if port == REQUEST_PORT:
            return (d.s_axis_req_tdata, d.s_axis_req_tvalid, d.s_axis_req_tready, d.s_axis_req_tuser,
                    d.m_axis_rsp_tdata, d.m_axis_rsp_tvalid, d.m_axis_rsp_tready, d.m_axis_rsp_tuser)
        return (d.s_axis_ctl_req_tdata, d.s_axis_ctl_req_tvalid, d.s_axis_ctl_req_tready,
                d.s_axis_ctl_req_tuser, d.m_axis_ctl_rsp_tdata, d.m_axis_ctl_rsp_tvalid,
                d.m_axis_ctl_rsp_tready, d.m_axis_ctl_rsp_tuser)

    async def run_stream(self, stream: list, port: int = REQUEST_PORT) -> dict:
        """Drive the stream back to back on one port (tvalid 1 from the first request to the
        last handshake, response tready always 1); time-stamp every handshake; check afterwards."""
        dut = self.dut
        n = len(stream)
        accept = [0] * n
        responses: list[tuple[int, int, int]] = []  # (cycle, tag, tdata)
        tdata, tvalid, tready, tuser, rdata, rvalid, rready, ruser = self.port(port)
        rready.value = 1
        i = 0
        tdata.value = stream[0][0]
        tuser.value = stream[0][1]
        tvalid.value = 1
        cyc = 0
        idle = 0
        t0 = time.perf_counter()
        while len(responses) < n:
            await RisingEdge(dut.clk)
            cyc += 1
            if i < n and int(tready.value):
                accept[i] = cyc
                i += 1
                if i < n:
                    tdata.value = stream[i][0]
                    tuser.value = stream[i][1]
                else:
                    tvalid.value = 0
            if int(rvalid.value):
                responses.append((cyc, _uint(ruser.value), _uint(rdata.value)))
                idle = 0
            else:
                idle += 1
                if idle > 10000:
                    raise AssertionError(f"no response for 10000 cycles ({len(responses)}/{n} answered)")
        wall = time.perf_counter() - t0
        await ClockCycles(dut.clk, 2)
        checked, latencies = self.check_responses(stream, accept, responses)
        window = accept[-1] - accept[0] + 1
        kinds: dict[str, int] = {}
        statuses: dict[str, int] = {}
        for _, _, exp, kind in stream:
            kinds[kind] = kinds.get(kind, 0) + 1
            k = f"{kind}:{exp['status']}"
            statuses[k] = statuses.get(k, 0) + 1
        return {"requests": n, "checked": checked, "window_cycles": window,
                "requests_per_cycle": n / window,
                "latency_min": min(latencies), "latency_max": max(latencies),
                "ops": kinds, "op_status": dict(sorted(statuses.items())),
                "sim_wall_s": round(wall, 2), "sim_cycles_per_s": round(cyc / wall)}

    def check_responses(self, stream: list, accept: list[int],
                        responses: list[tuple[int, int, int]]) -> tuple[int, list[int]]:
        """Pair one port's responses with its requests by tag (in flight tags are unique: fewer
        than 2^TAG_W requests in flight), in order, and compare every field with the expectation;
        returns (responses checked, latencies)."""
        n = len(stream)
        errors: list[str] = []
        by_tag: dict[int, list[int]] = {}
        latencies = []
        rsp_i = 0
        next_req = 0
        checked = 0
        for cyc_r, tag, word in responses:
            # requests accepted up to this cycle are in flight
            while next_req < n and accept[next_req] and accept[next_req] <= cyc_r:
                by_tag.setdefault(stream[next_req][1], []).append(next_req)
                next_req += 1
            idxs = by_tag.get(tag)
            if not idxs:
                errors.append(f"response {rsp_i} at cycle {cyc_r}: tag {tag} not in flight")
                rsp_i += 1
                continue
            j = idxs.pop(0)
            if j != rsp_i:
                errors.append(f"response {rsp_i}: out of order (request {j})")
            latencies.append(cyc_r - accept[j])
            _, _, exp, kind = stream[j]
            got = self.unpack(word)
            for name, value in exp.items():
                if value is not None and got[name] != value:
                    errors.append(f"request {j} ({kind}): {name} {got[name]:#x} != model {value:#x}")
            checked += 1
            rsp_i += 1
        if len(responses) != n:
            errors.append(f"{len(responses)} responses to {n} requests")
        for e in errors[:20]:
            self.log.error("%s", e)
        assert not errors, f"{len(errors)} mismatches against the model, first: {errors[0]}"
        return checked, latencies

    # -- two ports at once ----------------------------------------------------------------------
    def control_request(self, i: int, every: int) -> tuple:
        """The i-th control slot's request: (kind, args), a WRITE_RULE when i % every == 0."""
        rng = self.rng
        if i % every == 0:
            valid = rng.random() < 0.85
            return ("write_rule_valid" if valid else "write_rule_invalid",
                    self.random_write_rule(rng.randrange(max(1, self.rules)), valid))
        kind = rng.choice(["read_rule_hits", "read_rule_hits", "read_counter", "read_rule"])
        if kind == "read_counter":
            return kind, (rng.randrange(len(COUNTER_NAMES)),)
        return kind, (rng.randrange(max(1, self.rules)),)

    def pack_request(self, kind: str, args: tuple) -> int:
        if kind == "lookup":
            return self.pack(LOOKUP, key=args[0])
        if kind.startswith("write_rule"):
            return self.pack_write_rule(*args)
        if kind == "read_counter":
            return self.pack(READ_COUNTER, index=args[0])
        return self.pack(READ_RULE_HITS if kind == "read_rule_hits" else READ_RULE, entry=args[0])

    def expect_control(self, kind: str, args: tuple) -> dict:
        """Apply one control request to the model; its expected response."""
        m = self.model
        if kind.startswith("write_rule"):
            return self.apply_write_rule(*args)
        try:
            if kind == "read_counter":
                return {"op": READ_COUNTER, "data64": m.read_counter(args[0])}
            if kind == "read_rule_hits":
                return {"op": READ_RULE_HITS, "data64": m.read_rule_hits(args[0]), "entry": args[0]}
            r = m.read_rule(args[0])
            return {"op": READ_RULE, "flag": int(r.valid), "entry": args[0], "prio": r.priority,
                    "key": r.match, "mask": r.mask, "value": int.from_bytes(r.value, "big")}
        except CommandError:
            return {"op": {"read_counter": READ_COUNTER, "read_rule_hits": READ_RULE_HITS}.get(kind, READ_RULE),
                    "status": 15}

    async def run_two(self, lookup_keys: list[int], every: int) -> dict:
        """LOOKUPs of lookup_keys back to back on the request port while the control port is
        offered a new control request in every cycle it took the last one (control_request,
        a WRITE_RULE every `every` slots), until the last LOOKUP is accepted. Afterwards the
        requests of both ports are applied to the model in engine_order and every response of
        both ports is checked against it."""
        dut = self.dut
        reqs = {REQUEST_PORT: [("lookup", (k,)) for k in lookup_keys], CONTROL_PORT: []}
        tags = {REQUEST_PORT: [], CONTROL_PORT: []}
        accept = {REQUEST_PORT: [], CONTROL_PORT: []}
        responses = {REQUEST_PORT: [], CONTROL_PORT: []}
        sig = {p: self.port(p) for p in reqs}
        nxt = {REQUEST_PORT: 0, CONTROL_PORT: 0}  # next request to be accepted, per port
        offering = {REQUEST_PORT: False, CONTROL_PORT: False}

        def offer(port: int) -> None:
            i = nxt[port]
            if port == CONTROL_PORT:
                reqs[port].append(self.control_request(i, every))
            tdata, tvalid, _, tuser = sig[port][:4]
            tags[port].append(self.tag)
            tdata.value = self.pack_request(*reqs[port][i])
            tuser.value = self.tag
            tvalid.value = 1
            offering[port] = True
            self.tag = (self.tag + 1) & ((1 << self.tag_w) - 1)

        n = len(lookup_keys)
        offer(REQUEST_PORT)
        offer(CONTROL_PORT)
        cyc = 0
        idle = 0
        t0 = time.perf_counter()
        while (len(responses[REQUEST_PORT]) < n
               or len(responses[CONTROL_PORT]) < len(accept[CONTROL_PORT])):
            await RisingEdge(dut.clk)
            cyc += 1
            for port in (REQUEST_PORT, CONTROL_PORT):
                _, tvalid, tready, _, rdata, rvalid, _, ruser = sig[port]
                if offering[port] and int(tready.value):
                    accept[port].append(cyc)
                    nxt[port] += 1
                    offering[port] = False
                    tvalid.value = 0
                    if nxt[REQUEST_PORT] < n:  # the control port runs while LOOKUPs remain
                        offer(port)
                elif offering[port] and nxt[REQUEST_PORT] >= n:  # withdrawn: never sent
                    offering[port] = False
                    tvalid.value = 0
                if int(rvalid.value):
                    responses[port].append((cyc, _uint(ruser.value), _uint(rdata.value)))
                    idle = 0
            idle += 1
            if idle > 10000:
                raise AssertionError("no response for 10000 cycles")
        wall = time.perf_counter() - t0
        await ClockCycles(dut.clk, 2)
        if len(tags[CONTROL_PORT]) > len(accept[CONTROL_PORT]):  # offered, never taken: not sent
            reqs[CONTROL_PORT].pop()
            tags[CONTROL_PORT].pop()

        # the model, in engine order; consecutive LOOKUPs as one batch (same meaning)
        order = engine_order([(c, p, (p, i)) for p in reqs for i, c in enumerate(accept[p])])
        expected = {p: [None] * len(accept[p]) for p in reqs}
        run: list[int] = []

        def flush() -> None:
            if not run:
                return
            for i, exp in zip(run, self.expect_lookups([reqs[REQUEST_PORT][i][1][0] for i in run])):
                expected[REQUEST_PORT][i] = exp
            run.clear()

        for p, i in order:
            if p == REQUEST_PORT:
                run.append(i)
            else:
                flush()
                expected[p][i] = self.expect_control(*reqs[p][i])
        flush()
        out: dict = {"sim_wall_s": round(wall, 2), "sim_cycles_per_s": round(cyc / wall)}
        for p, name in ((REQUEST_PORT, "request_port"), (CONTROL_PORT, "control_port")):
            stream = []
            for i, exp in enumerate(expected[p]):
                full = {"status": 0, "flag": 0, "entry": 0, "prio": 0, "data64": 0, "key": 0, "mask": 0,
                        "value": 0}
                full.update(exp)
                stream.append((None, tags[p][i], full, reqs[p][i][0]))
            checked, lat = self.check_responses(stream, accept[p], responses[p])
            kinds: dict[str, int] = {}
            for kind, _ in reqs[p]:
                kinds[kind] = kinds.get(kind, 0) + 1
            out[name] = {"requests": len(stream), "checked": checked,
                         "window_cycles": accept[p][-1] - accept[p][0] + 1,
                         "first_accept": accept[p][0], "last_accept": accept[p][-1],
                         "latency_min": min(lat), "latency_max": max(lat), "ops": kinds}
        return out

    def counters_port(self) -> dict:
        word = _uint(self.dut.stat_counters.value)
        return {name: (word >> (64 * c)) & ((1 << 64) - 1) for c, name in enumerate(COUNTER_NAMES)}


@cocotb.test()
async def bench(dut):
    cfg = json.loads(os.environ["KV_BENCH_CFG"])
    b = Bench(dut, cfg)
    p = b.p
    capacity = b.geometry.capacity
    target = int(round(cfg["fill"] * capacity))
    out: dict = {"capacity": capacity}

    t = time.perf_counter()
    rules = b.rules_stream()
    fill = b.fill_stream(target)
    b.log.info("fill stream: %d requests (model %.1f s)", len(fill), time.perf_counter() - t)
    await b.reset()
    if rules:
        await b.run_stream(rules, CONTROL_PORT)
    res = await b.run_stream(fill)
    occ_read: list = []
    b.read_occupancy(occ_read)
    await b.run_stream(occ_read, CONTROL_PORT)
    occ = b.model.read_counter(OCCUPANCY)
    # read through the stream (READ_COUNTER, checked above) and on the stat_counters port
    port = b.counters_port()
    assert port == b.model.counters(), (port, b.model.counters())
    out["fill"] = dict(res, occupancy=occ, occupancy_fraction=occ / capacity)
    b.log.info("fill: %s", out["fill"])

    t = time.perf_counter()
    s1 = b.mixed_stream(cfg["n"], cfg["update_frac"], target)
    b.log.info("lookup stream: %d requests (model %.1f s)", len(s1), time.perf_counter() - t)
    if cfg.get("inject_mismatch"):  # check of the checker: one wrong expectation must fail the run
        word, tag, exp, kind = s1[len(s1) // 2]
        s1[len(s1) // 2] = (word, tag, dict(exp, status=exp["status"] ^ 1), kind)
    res = await b.run_stream(s1)
    out["lookups"] = dict(res, occupancy_after=b.model.read_counter(OCCUPANCY))
    b.log.info("lookups: %s", out["lookups"])

    def storm_keys(count: int) -> list[int]:
        return [b.rng.choice(b.present) if b.present and b.rng.random() < 0.5 else b.rng.getrandbits(b.key_w)
                for _ in range(count)]

    if b.rules:
        # a WRITE_RULE in every STORM_EVERY-th control slot, then in every slot
        out["storm"] = await b.run_two(storm_keys(cfg["storm_n"]), cfg["storm_every"])
        b.log.info("rule storm: %s", out["storm"])
        out["writes"] = await b.run_two(storm_keys(cfg["storm_n"]), 1)
        b.log.info("rule writes back to back: %s", out["writes"])

    port = b.counters_port()
    assert port == b.model.counters(), (port, b.model.counters())
    out["counters"] = port
    out["rule_hits_model"] = int(b.model.rule_hits().sum())
    out["params"] = {k: v for k, v in p.items()}
    out["simulator"] = f"{cocotb.SIM_NAME} {cocotb.SIM_VERSION}"
    Path(os.environ["KV_BENCH_OUT"]).write_text(json.dumps(out, indent=2) + "\n")
