"""cocotb side of benchmarks/rtl_engine.py: cycle-accurate throughput and latency of kv_engine.

Runs inside the simulator (started by benchmarks/rtl_engine.py through cocotb_tools.runner).
Every request is first applied to ``ModelBackend`` in stream order, which gives its expected
response; the stream is then driven with tvalid held at 1 and m_axis_rsp_tready held at 1, every
handshake is time-stamped (cycle of the rising edge), responses are paired with requests by their
tuser tag, and every response is compared field by field with the model afterwards.

Phases (one simulation, one model):
  fill     WRITE_RULE of every rule entry, SETs of random keys until the model's occupancy reaches
           the target fraction of WAYS*ROWS+STASH, READ_COUNTER occupancy
  lookups  measured: LOOKUPs of random keys (half present in the table, half fresh), ~10 % SET/DEL
  rules    measured: the same mix with a WRITE_RULE (valid or invalid entry) every RULE_EVERY requests
  burst    measured (optional): the same with a WRITE_RULE every BURST_EVERY requests, faster than
           the rule matcher rewrites entries (34 cycles each), so WRITE_RULEs wait for a slot
Between phases the stream is drained, so every measured window starts with the pipeline empty.
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
from pynq_kv.model import ModelBackend  # noqa: E402

LOOKUP, SET, DEL, WRITE_RULE, READ_COUNTER = 2, 3, 4, 11, 15
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
        res = self.model.lookup_batch(self.keys_arr(keys))
        prio = {}
        for i, k in enumerate(keys):
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
            self._req(stream, self.pack(LOOKUP, key=k), exp, "lookup")

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

    def write_rule(self, stream: list, entry: int, valid: bool) -> None:
        match, mask = self.random_rule()
        prio = self.rng.randrange(1 << self.prio_w)
        value = self.rng.getrandbits(self.value_w)
        self.model.write_rule(entry, RuleEntry(valid, match, mask, prio, value.to_bytes(self.vb, "big")))
        self.rules_written.add(entry)
        self._req(stream, self.pack(WRITE_RULE, flag=int(valid), entry=entry, prio=prio, key=match,
                                    mask=mask, value=value), {"op": WRITE_RULE},
                  "write_rule_valid" if valid else "write_rule_invalid")

    def read_occupancy(self, stream: list) -> None:
        self._req(stream, self.pack(READ_COUNTER, index=OCCUPANCY),
                  {"op": READ_COUNTER, "data64": self.model.read_counter(OCCUPANCY)}, "read_counter")

    # -- streams ------------------------------------------------------------------------------
    def fill_stream(self, target: int) -> list:
        stream: list = []
        for e in range(self.rules):
            self.write_rule(stream, e, self.rng.random() < 0.85)
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
        self.read_occupancy(stream)
        return stream

    def mixed_stream(self, n: int, update_frac: float, occupancy_target: int, rule_every: int = 0) -> list:
        """n requests: LOOKUPs (half present keys, half fresh random keys), update_frac SET/DEL
        (a third SETs of present keys; the rest DELs of present keys while the occupancy is at
        or above occupancy_target, else SETs of new keys), and with
        rule_every > 0 a WRITE_RULE every rule_every-th request (85 % valid entries)."""
        rng = self.rng
        stream: list = []
        pending: list[int] = []

        def flush():
            if pending:
                self.lookups(stream, pending)
                pending.clear()

        for i in range(n):
            if rule_every and i % rule_every == rule_every - 1:
                flush()
                self.write_rule(stream, rng.randrange(max(1, self.rules)), rng.random() < 0.85)
                continue
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
        dut.s_axis_req_tvalid.value = 0
        dut.s_axis_req_tdata.value = 0
        dut.s_axis_req_tuser.value = 0
        dut.m_axis_rsp_tready.value = 1
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())
        await ClockCycles(dut.clk, 3)
        dut.rst.value = 0
        await ClockCycles(dut.clk, self.rows)  # the clear sweep after reset
        for _ in range(100):
            await RisingEdge(dut.clk)
            if int(dut.s_axis_req_tready.value):
                return
        raise AssertionError("tready never rose after reset")

    async def run_stream(self, stream: list) -> dict:
        """Drive the stream back to back (tvalid 1 from the first request to the last
        handshake, response tready always 1); time-stamp every handshake; check afterwards."""
        dut = self.dut
        n = len(stream)
        accept = [0] * n
        responses: list[tuple[int, int, int]] = []  # (cycle, tag, tdata)
        tdata, tvalid, tready = dut.s_axis_req_tdata, dut.s_axis_req_tvalid, dut.s_axis_req_tready
        tuser = dut.s_axis_req_tuser
        rvalid, rdata, ruser = dut.m_axis_rsp_tvalid, dut.m_axis_rsp_tdata, dut.m_axis_rsp_tuser
        dut.m_axis_rsp_tready.value = 1
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

        # pair by tag (in flight tags are unique: fewer than 2^TAG_W requests in flight) and check
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
        for e in errors[:20]:
            self.log.error("%s", e)
        assert not errors, f"{len(errors)} mismatches against the model, first: {errors[0]}"
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
    fill = b.fill_stream(target)
    b.log.info("fill stream: %d requests (model %.1f s)", len(fill), time.perf_counter() - t)
    await b.reset()
    res = await b.run_stream(fill)
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

    t = time.perf_counter()
    s2 = b.mixed_stream(cfg["n"], cfg["update_frac"], target, rule_every=cfg["rule_every"])
    b.log.info("rule-update stream: %d requests (model %.1f s)", len(s2), time.perf_counter() - t)
    res = await b.run_stream(s2)
    out["rules"] = dict(res, occupancy_after=b.model.read_counter(OCCUPANCY))
    b.log.info("rules: %s", out["rules"])

    if cfg.get("burst_n"):
        # above the sustainable rule-write rate: WRITE_RULEs wait for a free rule slot
        s3 = b.mixed_stream(cfg["burst_n"], cfg["update_frac"], target, rule_every=cfg["burst_every"])
        res = await b.run_stream(s3)
        out["rules_burst"] = dict(res, occupancy_after=b.model.read_counter(OCCUPANCY))
        b.log.info("rules above the sustainable rate: %s", out["rules_burst"])

    port = b.counters_port()
    assert port == b.model.counters(), (port, b.model.counters())
    out["counters"] = port
    out["rule_hits_model"] = int(b.model.rule_hits().sum())
    out["params"] = {k: v for k, v in p.items()}
    out["simulator"] = f"{cocotb.SIM_NAME} {cocotb.SIM_VERSION}"
    Path(os.environ["KV_BENCH_OUT"]).write_text(json.dumps(out, indent=2) + "\n")
