"""cocotb side of benchmarks/rtl_frontend.py: cycle-accurate rate and latency of kv_top's
Ethernet front-end (MAC port in, MAC port out, the memcached core and the engine in between).

Runs inside the simulator (started by benchmarks/rtl_frontend.py through cocotb_tools.runner).
One coroutine drives the MAC receive port and watches both MAC ports every cycle: every beat
handshake is time-stamped (cycle of the rising edge), frames are cut at tlast, and every reply
frame is parsed (pynq_kv.net.eth.parse_frame: lengths and checksums) and its UDP payload compared
with the reference model, pynq_kv.serve.memcached.server.handle_datagram on a model KVEngine of the same
geometry, fed the same datagrams in the same order.  A mismatch fails the test (and the script).

Phases (one simulation, one model; between phases the design drains, so each measured window
starts empty):
  fill     SETQ datagrams store the keys the GETs read (every GET below is a hit)
  single   N frames, each one memcached GET, offered back to back: s_axis_rx_tvalid stays high
           from the first beat of the first frame to the last beat of the last one
  multi    datagrams of G GETs each (as many as one 1500-byte MTU holds), offered back to back
           too, with tvalid dropped only while F datagrams are waiting to be answered (the
           receive FIFO never overflows: it is store-and-forward and never back-pressures)
  alone    M single-GET frames, each sent when the previous reply has left (an idle pipeline)
m_axis_tx_tready is held high throughout. Results go to $KV_BENCH_OUT as JSON.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import deque
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

REPO_DIR = Path(__file__).resolve().parents[1]
if str(REPO_DIR) not in sys.path:
    sys.path.insert(0, str(REPO_DIR))

from pynq_kv import regmap  # noqa: E402
from pynq_kv.engine import KVEngine  # noqa: E402
from pynq_kv.geometry import Geometry  # noqa: E402
from pynq_kv.net.codec import Opcode, Request  # noqa: E402
from pynq_kv.net.eth import UdpDatagram, build_udp_frame, parse_frame  # noqa: E402
from pynq_kv.serve.memcached.server import handle_datagram  # noqa: E402
from pynq_kv.net.udpframe import wrap  # noqa: E402

CLK_NS = 4
BOARD_MAC, BOARD_IP, BOARD_PORT = "02:00:00:00:00:01", "10.0.0.1", 11211   # kv_top's CFG_* defaults
HOST_MAC, HOST_IP = "02:00:00:00:00:02", "10.0.0.2"


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


class Bench:
    def __init__(self, dut, cfg: dict):
        self.dut = dut
        self.cfg = cfg
        p = cfg["params"]
        self.p = p
        self.nb = p["DATA_W"] // 8
        self.geometry = Geometry(key_width=p["KEY_W"], value_width=p["VALUE_W"], ways=p["WAYS"],
                                 rows=p["ROWS"], stash=p["STASH"], rules=p["RULES"],
                                 prio_width=p["PRIO_W"], hash_seed=p["HASH_SEED"])
        self.engine = KVEngine(backend="model", geometry=self.geometry, relocation=False)
        self.rng = random.Random(cfg["seed"])
        # receive side: beats still to drive, and the frames behind them
        self.beats: deque = deque()          # (tdata, tkeep, tlast)
        self.gate = None                     # callable -> bool: may the next frame start?
        self.cycle = 0
        self.rx_first: list[int] = []        # cycle of each frame's first beat handshake
        self.rx_last: list[int] = []
        self.rx_beats = 0
        self.rx_valid_cycles = 0             # cycles with s_axis_rx_tvalid high
        self.tx_first: list[int] = []
        self.tx_last: list[int] = []
        self.tx_frames: list[bytes] = []
        self.tx_lens: list[int] = []
        self.expect: deque = deque()         # reply payloads, in order
        self.errors: list[str] = []
        self.checked = 0
        self.in_rx = False
        self.pending_frames: deque = deque()  # frames queued, not yet started on the wire
        self.trace = None                    # {stage: [cycles]} of internal handshakes, when set
        dut.rst.value = 1
        dut.s_axis_rx_tvalid.value = 0
        dut.s_axis_rx_tdata.value = 0
        dut.s_axis_rx_tkeep.value = 0
        dut.s_axis_rx_tlast.value = 0
        dut.s_axis_rx_tuser.value = 0
        dut.m_axis_tx_tready.value = 1
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())

    async def reset(self) -> None:
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, self.p["ROWS"] + 64)   # the engine clears its tables
        # every source trusted (no reply budget, frontend.md §10), as handle_datagram answers
        await self.axil.write_dword(regmap.REG_FE_ADMIT_DEFAULT, regmap.FE_ADMIT_DEFAULT_ALLOW)
        await self.axil.write_dword(regmap.REG_FE_CTRL, regmap.FE_CTRL_ADMIT_COMMIT)
        cocotb.start_soon(self._port())

    # -- frames ----------------------------------------------------------------------------
    def frame(self, payload: bytes, sport: int) -> bytes:
        return build_udp_frame(payload, src_mac=HOST_MAC, dst_mac=BOARD_MAC, src_ip=HOST_IP,
                               dst_ip=BOARD_IP, src_port=sport, dst_port=BOARD_PORT)

    def queue(self, payload: bytes, sport: int = 40000) -> int:
        """Queue one datagram for the wire; the model answers it now. Returns its frame length."""
        for reply in handle_datagram(self.engine, payload):
            self.expect.append(reply)
        raw = self.frame(payload, sport)
        self.pending_frames.append(raw)
        return len(raw)

    def _load_next_frame(self) -> None:
        raw = self.pending_frames.popleft()
        nb = self.nb
        for i in range(0, len(raw), nb):
            chunk = raw[i:i + nb]
            self.beats.append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1,
                               int(i + nb >= len(raw))))

    async def _port(self) -> None:
        dut = self.dut
        nb = self.nb
        cur = bytearray()
        in_tx = False
        driving = False
        while True:
            await RisingEdge(dut.clk)
            self.cycle += 1
            c = self.cycle
            # receive handshake at this edge
            if driving:
                self.rx_valid_cycles += 1
                if _uint(dut.s_axis_rx_tready.value):
                    _, _, last = self.beats.popleft()
                    self.rx_beats += 1
                    if not self.in_rx:
                        self.rx_first.append(c)
                    self.in_rx = not last
                    if last:
                        self.rx_last.append(c)
            # transmit handshake at this edge (tready is always high)
            if _uint(dut.m_axis_tx_tvalid.value):
                keep = _uint(dut.m_axis_tx_tkeep.value)
                n = bin(keep).count("1")
                if not in_tx:
                    self.tx_first.append(c)
                    in_tx = True
                cur += _uint(dut.m_axis_tx_tdata.value).to_bytes(nb, "little")[:n]
                if _uint(dut.m_axis_tx_tlast.value):
                    self.tx_last.append(c)
                    self.tx_frames.append(bytes(cur))
                    self.tx_lens.append(len(cur))
                    cur = bytearray()
                    in_tx = False
            if self.trace is not None:
                self._trace(c)
            # the next beat
            if not self.beats and not self.in_rx and self.pending_frames and (self.gate is None or self.gate()):
                self._load_next_frame()
            if self.beats:
                data, keep, last = self.beats[0]
                dut.s_axis_rx_tdata.value = data
                dut.s_axis_rx_tkeep.value = keep
                dut.s_axis_rx_tlast.value = last
                dut.s_axis_rx_tvalid.value = 1
                driving = True
            else:
                dut.s_axis_rx_tvalid.value = 0
                driving = False

    # internal streams of kv_top, in pipeline order: payload to the core, request to the
    # engine, its response, reply payload to the transmit side
    STAGES = (("payload_in", "pl"), ("engine_request", "fe_req"), ("engine_response", "fe_rsp"),
              ("reply_payload_out", "rpl"))

    def _trace(self, c: int) -> None:
        dut = self.dut
        for name, sig in self.STAGES:
            if _uint(getattr(dut, f"{sig}_tvalid").value) and _uint(getattr(dut, f"{sig}_tready").value):
                self.trace.setdefault(name, []).append(c)

    def check_replies(self) -> int:
        """Compare every transmitted frame so far with the model's replies; return how many."""
        n = 0
        while self.tx_frames:
            raw = self.tx_frames.pop(0)
            n += 1
            try:
                d = parse_frame(raw)
            except ValueError as exc:
                self.errors.append(f"malformed reply frame: {exc}")
                continue
            if not isinstance(d, UdpDatagram) or d.dst_mac != HOST_MAC or d.dst_ip != HOST_IP \
                    or d.src_port != BOARD_PORT:
                self.errors.append(f"unexpected frame {raw.hex()}")
                continue
            if not self.expect:
                self.errors.append(f"reply with none expected: {d.payload.hex()}")
                continue
            want = self.expect.popleft()
            if d.payload != want:
                self.errors.append(f"reply {d.payload.hex()} != model {want.hex()}")
            self.checked += 1
        return n

    async def drain(self, limit: int = 2_000_000) -> None:
        """Run until every queued frame has gone in and every expected reply has come out, with
        200 quiet cycles after the last beat (nothing more may come)."""
        start = self.cycle
        last = None
        quiet = 0
        while True:
            await ClockCycles(self.dut.clk, 10)
            self.check_replies()
            now = (len(self.tx_first), len(self.tx_last), self.rx_beats)
            quiet = 0 if (self.pending_frames or self.beats or now != last) else quiet + 10
            last = now
            if quiet >= 200 and not self.expect:
                return
            if quiet >= 5000 or self.cycle - start > limit:
                raise AssertionError(f"the front-end went idle with {len(self.expect)} replies missing")

    def mark(self) -> dict:
        return {"rx": len(self.rx_first), "rxl": len(self.rx_last), "tx": len(self.tx_first),
                "txl": len(self.tx_last), "beats": self.rx_beats, "valid": self.rx_valid_cycles}


def get_request(key: bytes, opaque: int) -> bytes:
    return Request(Opcode.GET, key, opaque=opaque).encode()


@cocotb.test()
async def bench(dut):
    cfg = json.loads(os.environ["KV_BENCH_CFG"])
    b = Bench(dut, cfg)
    await b.reset()
    wall0 = time.perf_counter()
    cyc0 = b.cycle
    p = b.p
    max_value = p["VALUE_W"] // 8 - 1
    keys = [f"key{i:07d}".encode()[: p["KEY_W"] // 8 - 1] for i in range(cfg["keys"])]

    # fill: SETQ datagrams (no replies), then a NOOP to know they are done
    per = 30     # 30 SETQ of 45 bytes: a 1382-byte payload, within the MTU
    for d in range(0, len(keys), per):
        body = b"".join(Request(Opcode.SETQ, k, b"\0" * 8, b.rng.randbytes(max_value), opaque=i).encode()
                        for i, k in enumerate(keys[d:d + per]))
        b.queue(wrap(d & 0xFFFF, body + Request(Opcode.NOOP, opaque=0xFFFF).encode()))
    await b.drain()
    occupancy = b.engine.backend.counters().get("occupancy")
    fill_replies = b.checked

    # single: back-to-back one-GET frames
    n_single = cfg["single"]
    m0 = b.mark()
    flen = set()
    for i in range(n_single):
        flen.add(b.queue(wrap(i & 0xFFFF, get_request(b.rng.choice(keys), i)), sport=40000 + i % 1000))
    await b.drain()
    m1 = b.mark()
    single_frame_len = flen.pop()
    assert not flen, "single-GET frames of different lengths"
    rx_first = b.rx_first[m0["rx"]:m1["rx"]]
    tx_first = b.tx_first[m0["tx"]:m1["tx"]]
    tx_last = b.tx_last[m0["txl"]:m1["txl"]]
    assert len(rx_first) == len(tx_first) == n_single, (len(rx_first), len(tx_first))
    single_lat = [t - r for r, t in zip(rx_first, tx_first)]
    single = {
        "frames": n_single,
        "frame_bytes": single_frame_len,
        "frame_beats": -(-single_frame_len // b.nb),
        "rx_beats": m1["beats"] - m0["beats"],
        "rx_valid_cycles": m1["valid"] - m0["valid"],
        "rx_window_cycles": b.rx_last[m1["rxl"] - 1] - rx_first[0] + 1,
        "tx_window_cycles": tx_last[-1] - tx_first[0] + 1,
        "frames_per_cycle": (n_single - 1) / (tx_first[-1] - tx_first[0]),
        "reply_bytes": sorted(set(b.tx_lens[m0["txl"]:m1["txl"]])),
        "reply_beats": max(-(-n // b.nb) for n in b.tx_lens[m0["txl"]:m1["txl"]]),
        "reply_gaps": sorted({t2 - t1 for t1, t2 in zip(tx_first, tx_first[1:])}),
        "latency_min": min(single_lat),
        "latency_max": max(single_lat),
    }

    # multi: datagrams of G GETs, at most F waiting
    g = cfg["gets_per_datagram"]
    n_multi = cfg["multi"]
    f_ahead = cfg["ahead"]
    m0 = b.mark()
    base_tx = len(b.tx_first)
    base_rx = len(b.rx_first)
    b.gate = lambda: (len(b.rx_first) - base_rx) - (len(b.tx_first) - base_tx) < f_ahead
    mlen = set()
    for d in range(n_multi):
        body = b"".join(get_request(b.rng.choice(keys), i) for i in range(g))
        mlen.add(b.queue(wrap(d & 0xFFFF, body), sport=41000 + d % 1000))
    await b.drain()
    b.gate = None
    m1 = b.mark()
    tx_first = b.tx_first[m0["tx"]:m1["tx"]]
    tx_last = b.tx_last[m0["txl"]:m1["txl"]]
    rx_first = b.rx_first[m0["rx"]:m1["rx"]]
    assert len(tx_first) == n_multi, f"{len(tx_first)} reply frames for {n_multi} datagrams"
    # steady state: from the first reply's first beat to the last reply's first beat, n-1 datagrams
    steady = tx_first[-1] - tx_first[0]
    multi = {
        "datagrams": n_multi,
        "gets_per_datagram": g,
        "frame_bytes": max(mlen),
        "frame_beats": -(-max(mlen) // b.nb),
        "gets": n_multi * g,
        "window_cycles": tx_last[-1] - rx_first[0] + 1,
        "steady_cycles": steady,
        "steady_gets": (n_multi - 1) * g,
        "reply_bytes": sorted(set(b.tx_lens[m0["txl"]:m1["txl"]])),
        "reply_gaps": sorted({t2 - t1 for t1, t2 in zip(tx_first, tx_first[1:])}),
        "rx_beats": m1["beats"] - m0["beats"],
        "rx_valid_cycles": m1["valid"] - m0["valid"],
    }

    # alone: one frame at a time, idle pipeline
    lat_alone = []
    stages = set()
    for i in range(cfg["alone"]):
        m0 = b.mark()
        b.trace = {}
        b.queue(wrap(i, get_request(b.rng.choice(keys), i)), sport=42000 + i)
        await b.drain()
        t0 = b.rx_first[m0["rx"]]
        lat_alone.append(b.tx_first[m0["tx"]] - t0)
        # cycle of each internal handshake after the request's first beat, and the MAC side
        st = {"rx_last_beat": b.rx_last[m0["rxl"]] - t0}
        st.update({name: b.trace[name][0] - t0 for name, _ in b.STAGES if name in b.trace})
        st["tx_first_beat"] = b.tx_first[m0["tx"]] - t0
        stages.add(tuple(st.items()))
        b.trace = None
    alone = {"frames": cfg["alone"], "latency_min": min(lat_alone), "latency_max": max(lat_alone),
             "stages": [dict(s) for s in sorted(stages)]}

    b.check_replies()
    # every frame sent was served: the front-end counters over AXI4-Lite
    fe = {}
    for i, name in enumerate(regmap.FE_COUNTER_NAMES):
        lo = await b.axil.read_dword(regmap.REG_FE_COUNTER + 8 * i)
        hi = await b.axil.read_dword(regmap.REG_FE_COUNTER + 8 * i + 4)
        fe[name] = hi << 32 | lo
    sent = len(b.rx_first)
    if not fe["rx_frames"] == fe["rx_udp_payloads"] == fe["served"] == sent:
        b.errors.append(f"frames sent {sent}, counters {fe}")
    wall = time.perf_counter() - wall0
    for e in b.errors[:20]:
        dut._log.error("%s", e)
    assert not b.errors, f"{len(b.errors)} mismatches, first: {b.errors[0]}"
    assert not b.expect, f"{len(b.expect)} replies missing"
    out = {"fe_counters": {k: v for k, v in fe.items() if v}, "single": single, "multi": multi, "alone": alone, "checked": b.checked,
           "fill_replies": fill_replies, "keys": len(keys), "occupancy": occupancy,
           "sim_cycles": b.cycle - cyc0, "sim_wall_s": round(wall, 2),
           "sim_cycles_per_s": round((b.cycle - cyc0) / wall),
           "simulator": f"{cocotb.SIM_NAME} {cocotb.SIM_VERSION}"}
    Path(os.environ["KV_BENCH_OUT"]).write_text(json.dumps(out, indent=2) + "\n")
