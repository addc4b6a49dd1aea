"""cocotb testbench of hw/rtl/kv_eth_if.v: the Ethernet/IPv4/UDP front-end (docs/frontend_rtl.md).

Frames are built with scapy (and mutated as raw bytes), driven into ``s_axis_rx`` by cocotbext-axi's
``AxiStreamSource``; transmitted frames are collected by an ``AxiStreamSink`` on ``m_axis_tx``.  The
core side (``m_axis_pl`` payloads with their metadata, ``s_axis_rpl`` replies) is driven by
``Harness._loop``, one coroutine per clock that also watches the protocol rules: ``s_axis_rx_tready``
always high, ``m_axis_tx_tvalid`` never dropping inside a frame, metadata held for a packet, tkeep
contiguous.

The reference is ``eth_model.classify`` (hw/tb/kv_eth_if/eth_model.py, shared with the kv_top
testbench), an independent Python statement of the receive rules of docs/frontend_rtl.md: for every frame sent it gives the one outcome counter it must land in, the
payload and metadata the core must see, or the ARP/ICMP reply frame expected (built with scapy).
Every test ends with ``Harness.check``: counters equal the model's counts (frames the model serves
may only turn into drop_fifo_full, and then their payload is missing), rx_frames equals the sum of
the outcomes, every payload matches in order, and every transmitted frame equals, byte for byte,
the frame scapy builds for it (the IPv4 identification, a counter, is taken from the frame and
checked to count up by one), with all checksums verified independently.

The pytest function at the bottom builds and runs the tests per configuration (DATA_W 64 and 512
under Icarus; the 10,000-frame fuzz under Verilator at DATA_W 64 -- kv_top's fuzz covers 512),
each in its own directory under hw/build/kv_eth_if/.
"""

from __future__ import annotations

import json
import logging
import os
import random
import struct
import sys
from collections import deque
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

TB_DIR = Path(__file__).resolve().parent
HW_DIR = TB_DIR.parents[1]
for _p in (HW_DIR, TB_DIR):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from eth_model import (COUNTERS, OUR_IP, OUR_MAC, OUR_PORT, SERVED, C,  # noqa: E402
                       arp_frame, classify, expect_arp_reply, expect_icmp_reply, expect_udp_reply,
                       icmp_frame, ip_i, mac_i, meta_int, mutate, udp_frame,
                       unpack_meta, verify_tx_checksums, directed_frames)

TOPLEVEL = "kv_eth_if"

def dut_params() -> dict:
    params = {"DATA_W": 64, "MAX_FRAME": 1522, "RX_FIFO_BYTES": 16384, "RX_DESC_DEPTH": 64,
              "TX_BUF_BYTES": 8192, "TX_MAX_PAYLOAD": 1472, "TX_DESC_DEPTH": 32}
    params.update(json.loads(os.environ.get("KV_ETH_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


# ------------------------------------------------------------------------------------------
# harness
# ------------------------------------------------------------------------------------------

class Harness:
    def __init__(self, dut):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.p = dut_params()
        self.w = int(self.p["DATA_W"])
        self.k = self.w // 8
        self.cfg = {"mac": OUR_MAC, "ip": OUR_IP, "port": OUR_PORT}
        dut.rst.value = 1
        self.apply_cfg()
        dut.counters_clear.value = 0
        dut.m_axis_pl_tready.value = 0
        dut.s_axis_rpl_tvalid.value = 0
        dut.s_axis_rpl_tdata.value = 0
        dut.s_axis_rpl_tkeep.value = 0
        dut.s_axis_rpl_tlast.value = 0
        dut.s_axis_rpl_meta.value = 0
        cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
        self.rx = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_rx"), dut.clk, dut.rst)
        self.tx = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_tx"), dut.clk, dut.rst)
        self.rx.log.setLevel(logging.WARNING)
        self.tx.log.setLevel(logging.WARNING)
        self.rng = random.Random(cocotb.RANDOM_SEED)
        # core-side behaviour
        self.pl_ready_prob = 1.0
        self.rpl_idle_prob = 0.0
        self.reply_fn = None
        self.rpl_queue: deque = deque()
        # observations
        self.cycle = 0
        self.last_activity = 0
        self.errors: list[str] = []
        self.pl_packets: list[tuple[bytes, int]] = []
        self.pl_first_cycles: list[int] = []
        self.rx_last_cycles: list[int] = []
        self.rx_first_cycles: list[int] = []
        self.rpl_last_cycles: list[int] = []
        self.tx_first_cycles: list[int] = []
        # expectations
        self.sent: list[tuple[int, object]] = []       # (outcome, info) per frame sent
        self.udp_replies: list[tuple[bytes, int]] = []   # replies the core sent, in order
        self.tx_frames: list[bytes] = []                 # frames transmitted
        cocotb.start_soon(self._loop())

    def apply_cfg(self):
        self.dut.cfg_mac.value = mac_i(self.cfg["mac"])
        self.dut.cfg_ip.value = ip_i(self.cfg["ip"])
        self.dut.cfg_udp_port.value = self.cfg["port"]

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    def set_rx_idle(self, prob: float):
        if prob <= 0:
            self.rx.clear_pause_generator()
            self.rx.pause = False       # (clearing the generator leaves the last value)
        else:
            rng = random.Random(self.rng.random())
            self.rx.set_pause_generator(iter(lambda: int(rng.random() < prob), 2))

    def set_tx_backpressure(self, prob: float):
        if prob <= 0:
            self.tx.clear_pause_generator()
            self.tx.pause = False
        else:
            rng = random.Random(self.rng.random())
            self.tx.set_pause_generator(iter(lambda: int(rng.random() < prob), 2))

    def beats(self, payload: bytes) -> list[tuple[int, int, int]]:
        """(tdata, tkeep, tlast) beats of a payload; an empty payload is one beat with tkeep 0."""
        k = self.k
        if not payload:
            return [(0, 0, 1)]
        out = []
        for i in range(0, len(payload), k):
            chunk = payload[i:i + k]
            out.append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1, int(i + k >= len(payload))))
        return out

    async def _loop(self):
        d = self.dut
        k = self.k
        pl_ready = 0
        cur_pl = None
        rpl_beats: deque = deque()
        rpl_meta = 0
        rpl_valid = 0
        tx_in_frame = False
        rx_in_frame = False
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            if _uint(d.rst.value):
                pl_ready = 0
                rpl_valid = 0
                d.m_axis_pl_tready.value = 0
                d.s_axis_rpl_tvalid.value = 0
                continue
            # MAC receive side: never back-pressured
            if _uint(d.s_axis_rx_tvalid.value):
                self.last_activity = self.cycle
                if not _uint(d.s_axis_rx_tready.value):
                    self.errors.append(f"cycle {self.cycle}: s_axis_rx_tready low")
                if not rx_in_frame:
                    self.rx_first_cycles.append(self.cycle)
                rx_in_frame = not _uint(d.s_axis_rx_tlast.value)
                if not rx_in_frame:
                    self.rx_last_cycles.append(self.cycle)
            # payload sink
            if pl_ready and _uint(d.m_axis_pl_tvalid.value):
                self.last_activity = self.cycle
                data = _uint(d.m_axis_pl_tdata.value)
                keep = _uint(d.m_axis_pl_tkeep.value)
                last = _uint(d.m_axis_pl_tlast.value)
                meta = _uint(d.m_axis_pl_meta.value)
                if cur_pl is None:
                    cur_pl = [bytearray(), meta]
                    self.pl_first_cycles.append(self.cycle)
                elif meta != cur_pl[1]:
                    self.errors.append(f"cycle {self.cycle}: m_axis_pl_meta changed inside a packet")
                n = bin(keep).count("1")
                if keep != (1 << n) - 1 or (not last and n != k) or n == 0:
                    self.errors.append(f"cycle {self.cycle}: m_axis_pl_tkeep {keep:#x} (last {last})")
                if data >> (8 * n):
                    self.errors.append(f"cycle {self.cycle}: m_axis_pl_tdata not zero beyond tkeep")
                cur_pl[0] += (data & ((1 << (8 * n)) - 1)).to_bytes(k, "little")[:n]
                if last:
                    payload, meta = bytes(cur_pl[0]), cur_pl[1]
                    cur_pl = None
                    self.pl_packets.append((payload, meta))
                    if self.reply_fn is not None:
                        rep = self.reply_fn(payload, meta)
                        if rep is not None:
                            self.rpl_queue.append(rep)
            # reply source
            if rpl_valid and _uint(d.s_axis_rpl_tready.value):
                self.last_activity = self.cycle
                b = rpl_beats.popleft()
                if b[2]:
                    self.rpl_last_cycles.append(self.cycle)
                rpl_valid = 0
            # transmit side: no gaps inside a frame
            tv = _uint(d.m_axis_tx_tvalid.value)
            if tx_in_frame and not tv:
                self.errors.append(f"cycle {self.cycle}: m_axis_tx_tvalid dropped inside a frame")
            if tv and _uint(d.m_axis_tx_tready.value):
                self.last_activity = self.cycle
                if not tx_in_frame:
                    self.tx_first_cycles.append(self.cycle)
                tx_in_frame = not _uint(d.m_axis_tx_tlast.value)
            # next cycle's core-side outputs
            pl_ready = int(self.rng.random() < self.pl_ready_prob)
            d.m_axis_pl_tready.value = pl_ready
            if not rpl_beats and self.rpl_queue:
                payload, meta = self.rpl_queue.popleft()
                self.udp_replies.append((payload, meta))
                rpl_beats.extend(self.beats(payload))
                rpl_meta = meta
            # (once valid, a beat stays valid until taken)
            if rpl_beats and (rpl_valid or not (self.rpl_idle_prob and self.rng.random() < self.rpl_idle_prob)):
                data, keep, last = rpl_beats[0]
                d.s_axis_rpl_tdata.value = data
                d.s_axis_rpl_tkeep.value = keep
                d.s_axis_rpl_tlast.value = last
                d.s_axis_rpl_meta.value = rpl_meta
                rpl_valid = 1
            d.s_axis_rpl_tvalid.value = rpl_valid
            if rpl_beats:
                self.last_activity = self.cycle

    # -- traffic ----------------------------------------------------------------------------
    async def send(self, frame: bytes, user: int = 0, expect: tuple[int, object] | None = None):
        """Queue one frame for the MAC side and remember its expected outcome."""
        if expect is None:
            expect = classify(frame, user, int(self.p["MAX_FRAME"]), self.cfg)
        self.sent.append(expect)
        tuser = [0] * (len(frame) - 1) + [1] if user else 0
        await self.rx.send(AxiStreamFrame(frame, tuser=tuser))

    async def wait_idle(self, quiet: int = 300, limit: int = 2_000_000):
        start = self.cycle
        while True:
            await ClockCycles(self.dut.clk, 50)
            if (self.rx.empty() and self.rx.idle() and not self.rpl_queue
                    and self.cycle - self.last_activity > quiet):
                return
            assert self.cycle - start < limit, "front-end does not go idle"

    def counters(self) -> list[int]:
        v = _uint(self.dut.counters.value)
        return [(v >> (64 * i)) & ((1 << 64) - 1) for i in range(len(COUNTERS))]

    def check(self, allow_full: bool = False) -> dict:
        """Compare everything observed with the model; return the counters."""
        for e in self.errors[:10]:
            self.log.error("%s", e)
        assert not self.errors, self.errors[0]
        cnt = self.counters()
        rx_outcomes = sum(cnt[1:C["drop_fifo_full"] + 1])
        assert cnt[C["rx_frames"]] == len(self.sent), f"rx_frames {cnt[0]} != {len(self.sent)} sent"
        assert cnt[C["rx_frames"]] == rx_outcomes, f"rx_frames {cnt[0]} != sum of outcomes {rx_outcomes}"

        # payloads in order; a frame the model serves may only be missing as drop_fifo_full
        got = deque(self.pl_packets)
        lost = {c: 0 for c in SERVED}
        ctl_expect = []
        want = [0] * len(COUNTERS)
        for code, info in self.sent:
            want[code] += 1
            if code == C["rx_udp_payloads"]:
                if got and got[0] == info:
                    got.popleft()
                else:
                    assert allow_full, f"payload missing or wrong: want {info!r}, got {got[0] if got else None!r}"
                    lost[code] += 1
            elif code in SERVED:
                ctl_expect.append((code, info))
        assert not got, f"{len(got)} unexpected payloads, first {got[0]!r}"

        # transmitted frames: ARP/ICMP replies in request order, UDP replies in reply order
        while not self.tx.empty():
            self.tx_frames.append(bytes(self.tx.recv_nowait().tdata))
        frames = self.tx_frames
        ctl = deque(ctl_expect)
        udp = deque(r for r in self.udp_replies if len(r[0]) <= int(self.p["TX_MAX_PAYLOAD"]))
        n_drop_tx = len(self.udp_replies) - len(udp)
        next_id = None
        n_udp = 0
        for f in frames:
            assert len(f) >= 60, f"transmitted frame of {len(f)} bytes"
            verify_tx_checksums(f)
            etype, e = struct.unpack_from(">H", f, 12)[0], 14
            if etype == 0x8100:
                etype, e = struct.unpack_from(">H", f, 16)[0], 18
            if etype == 0x0806:
                self._match_ctl(ctl, f, lambda info: expect_arp_reply(info, self.cfg), C["arp_replies"], lost, allow_full)
                continue
            ip_id = struct.unpack_from(">H", f, e + 4)[0]
            if next_id is not None:
                assert ip_id == next_id, f"IPv4 identification {ip_id} after {next_id - 1}"
            next_id = (ip_id + 1) & 0xFFFF
            if f[e + 9] == 1:
                self._match_ctl(ctl, f, lambda info: expect_icmp_reply(info, ip_id, self.cfg), C["icmp_replies"], lost,
                                allow_full)
            else:
                assert udp, "unexpected UDP frame transmitted"
                payload, meta = udp.popleft()
                want_f = expect_udp_reply(payload, meta, ip_id, self.cfg)
                assert f == want_f, f"UDP reply\n got  {f.hex()}\n want {want_f.hex()}"
                n_udp += 1
        assert not udp, f"{len(udp)} UDP replies not transmitted"
        for code, _ in ctl:
            assert allow_full, f"reply {COUNTERS[code]} not transmitted"
            lost[code] += 1

        for c in SERVED:
            want[c] -= lost[c]
        want[C["drop_fifo_full"]] += sum(lost.values())
        want[C["rx_frames"]] = len(self.sent)
        want[C["tx_frames"]] = len(frames)
        want[C["tx_udp_replies"]] = n_udp
        want[C["tx_drop_oversize"]] = n_drop_tx
        assert want[C["tx_frames"]] == n_udp + want[C["arp_replies"]] + want[C["icmp_replies"]]
        diff = {COUNTERS[i]: (cnt[i], want[i]) for i in range(len(COUNTERS)) if cnt[i] != want[i]}
        assert not diff, f"counters (got, want): {diff}"
        return dict(zip(COUNTERS, cnt))

    @staticmethod
    def _match_ctl(ctl: deque, frame: bytes, build, code: int, lost: dict, allow_full: bool):
        """The next expected ARP/ICMP reply; requests skipped over were lost to drop_fifo_full."""
        while ctl:
            c, info = ctl.popleft()
            want = build(info) if c == code else None
            if want == frame:
                return
            assert allow_full, f"{COUNTERS[code]} reply\n got  {frame.hex()}\n want {want.hex() if want else COUNTERS[c]}"
            lost[c] += 1
        raise AssertionError(f"unexpected {COUNTERS[code]} reply {frame.hex()}")

    def reset_stats(self):
        """Forget what was sent and seen (after a check); the caller pulses counters_clear."""
        self.sent.clear()
        self.pl_packets.clear()
        self.udp_replies.clear()
        self.tx_frames.clear()


def echo_reply(payload: bytes, meta: int):
    """The stand-in core: answers every payload with a transformed one, back to the sender."""
    m = unpack_meta(meta)
    body = b"R" + payload[::-1]
    return body, meta_int(m["vlan"], m["tci"], m["mac"], m["ip"], m["port"], len(body))


# ------------------------------------------------------------------------------------------
# tests
# ------------------------------------------------------------------------------------------

@cocotb.test()
async def run_directed(dut):
    """Every outcome at least once, config changes, then the counters, payloads and replies."""
    tb = Harness(dut)
    await tb.reset()
    tb.reply_fn = echo_reply
    rng = random.Random(cocotb.RANDOM_SEED + 1)
    frames = directed_frames(rng)
    seen = set()
    for name, frame, user in frames:
        code, _ = classify(frame, user, int(tb.p["MAX_FRAME"]), tb.cfg)
        seen.add(code)
        await tb.send(frame, user)
        await ClockCycles(dut.clk, rng.choice([0, 0, 3]))
    missing = set(range(1, C["drop_fifo_full"])) - seen
    assert not missing, f"directed frames miss outcomes {[COUNTERS[c] for c in missing]}"
    await tb.wait_idle()
    cnt = tb.check()
    tb.log.info("directed: %d frames, counters %s", len(tb.sent), {k: v for k, v in cnt.items() if v})

    # counters_clear, then the configuration registers: a new port, IP and MAC take effect
    dut.counters_clear.value = 1
    await RisingEdge(dut.clk)
    dut.counters_clear.value = 0
    await RisingEdge(dut.clk)
    assert not any(tb.counters()), "counters_clear"
    tb.reset_stats()
    tb.cfg = {"mac": "02:00:5e:10:00:77", "ip": "192.168.7.9", "port": 9999}
    tb.apply_cfg()
    await ClockCycles(dut.clk, 2)
    for frame in (udp_frame(b"old", dst_mac=OUR_MAC), udp_frame(b"new", dst_mac=tb.cfg["mac"], dst_ip=tb.cfg["ip"],
                                                                 dport=9999),
                  udp_frame(b"oldport", dst_mac=tb.cfg["mac"], dst_ip=tb.cfg["ip"]),
                  arp_frame(tpa="192.168.7.9")):
        await tb.send(frame)
    await tb.wait_idle()
    tb.check()   # replies now come from the new addresses
    tb.log.info("after the configuration change: %s", {k: v for k, v in zip(COUNTERS, tb.counters()) if v})


@cocotb.test()
async def run_backpressure(dut):
    """Mixed valid traffic and replies with idle cycles and back-pressure everywhere (loopback)."""
    tb = Harness(dut)
    await tb.reset()
    rng = random.Random(cocotb.RANDOM_SEED + 2)
    tb.set_rx_idle(0.3)
    tb.set_tx_backpressure(0.4)
    tb.pl_ready_prob = 0.6
    tb.rpl_idle_prob = 0.3
    max_p = int(tb.p["TX_MAX_PAYLOAD"])

    def reply(payload, meta):
        m = unpack_meta(meta)
        n = rng.choice([0, 1, 2, rng.randint(3, 200), rng.randint(3, max_p), max_p, max_p + rng.randint(1, 40)])
        body = bytes(rng.getrandbits(8) for _ in range(n))
        return body, meta_int(m["vlan"], m["tci"], m["mac"], m["ip"], m["port"], rng.getrandbits(16))

    tb.reply_fn = reply
    n = int(os.environ.get("KV_ETH_BP_FRAMES", "120"))
    for i in range(n):
        kind = rng.random()
        tci = rng.choice([None, None, rng.getrandbits(16)])
        if kind < 0.7:
            size = rng.choice([rng.randint(1, 64), rng.randint(1, 300), rng.randint(1, 1472)])
            frame = udp_frame(i.to_bytes(4, "big") + bytes(rng.getrandbits(8) for _ in range(size)),
                              sport=rng.randint(1, 65535), tci=tci, opt_words=rng.choice([0, 0, 0, rng.randint(1, 10)]),
                              src_ip=f"10.1.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                              zero_csum=rng.random() < 0.1)
        elif kind < 0.85:
            frame = icmp_frame(bytes(rng.getrandbits(8) for _ in range(rng.choice([0, rng.randint(1, 100),
                                                                                     rng.randint(1, 1400)]))),
                               ident=rng.getrandbits(16), seq=i, tci=tci)
        else:
            frame = arp_frame(tci=tci, spa=f"10.2.0.{rng.randint(1, 254)}")
        await tb.send(frame)
    await tb.wait_idle()
    cnt = tb.check(allow_full=True)
    tb.log.info("backpressure: %s", {k: v for k, v in cnt.items() if v})


@cocotb.test()
async def run_line_rate(dut):
    """Back-to-back frames of one size at one beat per cycle (minimum memcached GETs, 60-byte frames,
    and sizes that need the realigner's extra flush beat): the MAC is never back-pressured, one payload
    leaves per frame time at a constant latency, and the replies (as long as the requests) are framed
    back to back at a constant latency too."""
    tb = Harness(dut)
    await tb.reset()
    k = tb.k
    n = int(os.environ.get("KV_ETH_LINE_FRAMES", "100"))
    # memcached binary GET over UDP: 8-byte frame header, 24-byte request header, 10-byte key
    get = lambda i: struct.pack(">HHHH", i & 0xFFFF, 0, 1, 0) + struct.pack(">BBHBBHIIQ", 0x80, 0, 10, 0, 0, 0, 10, i, 0) \
        + f"key{i:07d}".encode()
    # a response as long as the request (a GET miss is 8 + 24 + "Not found"): the reply frames then
    # need the line rate of the requests, no more
    tb.reply_fn = lambda payload, meta: (b"R" + payload[1:], meta)
    results = []
    for name, make in (("min GET", get), ("60-byte frame", lambda i: i.to_bytes(4, "big") + bytes(14)),
                       ("flush 80", lambda i: i.to_bytes(4, "big") + bytes(76)),
                       ("vlan 300", lambda i: i.to_bytes(4, "big") + bytes(296))):
        tci = 0x123 if "vlan" in name else None
        frames = [udp_frame(make(i), sport=40000 + i, tci=tci) for i in range(n)]
        beats = (len(frames[0]) + k - 1) // k
        marks = (len(tb.rx_first_cycles), len(tb.rx_last_cycles), len(tb.pl_first_cycles), len(tb.tx_first_cycles),
                 len(tb.rpl_last_cycles))
        for f in frames:
            await tb.send(f)
        await tb.wait_idle()
        cnt = tb.check()
        firsts = tb.rx_first_cycles[marks[0]:]
        assert all(b - a == beats for a, b in zip(firsts, firsts[1:])), f"{name}: rx frames not back to back"
        rx_lat = [p - r for p, r in zip(tb.pl_first_cycles[marks[2]:], tb.rx_last_cycles[marks[1]:])]
        assert len(rx_lat) == n and len(set(rx_lat)) == 1, f"{name}: rx latency varies: {sorted(set(rx_lat))}"
        pl = tb.pl_first_cycles[marks[2]:]
        assert all(b - a == beats for a, b in zip(pl, pl[1:])), f"{name}: payloads not one per frame time"
        tx_lat = [t - r for t, r in zip(tb.tx_first_cycles[marks[3]:], tb.rpl_last_cycles[marks[4]:])]
        assert len(tx_lat) == n and len(set(tx_lat)) == 1, f"{name}: tx latency varies: {sorted(set(tx_lat))}"
        txf = tb.tx_first_cycles[marks[3]:]
        assert all(b - a == beats for a, b in zip(txf, txf[1:])), f"{name}: replies not framed back to back"
        results.append(f"{name}: {len(frames[0])} B = {beats} beats, rx {rx_lat[0]}, tx {tx_lat[0]}")
    assert cnt["rx_udp_payloads"] == 4 * n and cnt["tx_udp_replies"] == 4 * n and cnt["drop_fifo_full"] == 0
    tb.log.info("line rate DATA_W=%d, latency in cycles (rx: last frame beat in -> first payload beat out; "
                "tx: last reply beat in -> first frame beat out): %s", tb.w, "; ".join(results))


@cocotb.test()
async def run_stall(dut):
    """The core stops taking payloads while valid and invalid frames keep arriving at line rate:
    the FIFO fills, frames are dropped as drop_fifo_full, dropped frames give their space back
    without freeing unread ones; after the stall every accepted payload comes out intact."""
    tb = Harness(dut)
    await tb.reset()
    rng = random.Random(cocotb.RANDOM_SEED + 5)
    tb.reply_fn = echo_reply
    for phase in range(3):
        tb.pl_ready_prob = 0.0 if phase < 2 else 1.0
        tb.set_tx_backpressure(0.9 if phase == 1 else 0.0)
        for i in range(int(os.environ.get("KV_ETH_STALL_FRAMES", "60"))):
            r = rng.random()
            tag = f"{phase}/{i}".encode()
            if r < 0.45:
                frame = udp_frame(tag + bytes(rng.getrandbits(8) for _ in range(rng.choice([1, 40, 300, 1400]))),
                                  tci=rng.choice([None, 17]))
            elif r < 0.75:
                bad = bytearray(udp_frame(tag + bytes(rng.randint(1, 900))))
                bad[-1] ^= 0xFF                                  # UDP checksum: dropped after the last beat
                frame = bytes(bad)
            elif r < 0.9:
                frame = icmp_frame(tag + bytes(rng.randint(0, 500)), seq=i)
            else:
                frame = arp_frame(spa=f"10.4.0.{i + 1}")
            await tb.send(frame)
        while not (tb.rx.empty() and tb.rx.idle()):       # the phase's frames have all gone in
            await ClockCycles(dut.clk, 20)
    tb.pl_ready_prob = 1.0
    tb.set_tx_backpressure(0.0)
    await tb.wait_idle()
    cnt = tb.check(allow_full=True)
    assert cnt["drop_fifo_full"] > 0, "the stall should overflow the FIFO"
    tb.log.info("stall: %s", {k: v for k, v in cnt.items() if v})


@cocotb.test()
async def run_fuzz(dut):
    """Random and mutated frames (truncated, wrong lengths and checksums, runts, oversize, tuser),
    then valid frames: everything accounted for and still served."""
    tb = Harness(dut)
    await tb.reset()
    rng = random.Random(cocotb.RANDOM_SEED + 4)
    tb.reply_fn = echo_reply
    n = int(os.environ.get("KV_ETH_FUZZ", "10000"))
    bases = []
    for i in range(200):
        tci = rng.choice([None, rng.getrandbits(16)])
        r = rng.random()
        if r < 0.6:
            bases.append(udp_frame(bytes(rng.getrandbits(8) for _ in range(rng.choice([rng.randint(1, 80),
                                                                                         rng.randint(1, 600)]))),
                                   tci=tci, opt_words=rng.choice([0, 0, rng.randint(1, 10)]),
                                   zero_csum=rng.random() < 0.2, sport=rng.getrandbits(16)))
        elif r < 0.8:
            bases.append(icmp_frame(bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))), tci=tci,
                                    ident=rng.getrandbits(16), opt_words=rng.choice([0, 0, 2])))
        else:
            bases.append(arp_frame(tci=tci, spa=f"10.3.{rng.randint(0, 255)}.{rng.randint(1, 254)}"))
    for i in range(n):
        base = rng.choice(bases)
        if rng.random() < 0.3:
            await tb.send(base)
        else:
            frame, user = mutate(base, rng)
            if not frame:
                frame = b"\x00"
            await tb.send(frame, user)
        if rng.random() < 0.01:
            await ClockCycles(dut.clk, rng.randint(1, 20))
    await tb.wait_idle()
    cnt = tb.check()
    valid_before = cnt["rx_udp_payloads"] + cnt["arp_replies"] + cnt["icmp_replies"]
    # the front-end still serves: valid frames after the storm
    for i in range(50):
        await tb.send(udp_frame(f"after fuzz {i}".encode(), tci=rng.choice([None, 3])))
    await tb.wait_idle()
    cnt = tb.check()
    assert cnt["rx_udp_payloads"] + cnt["arp_replies"] + cnt["icmp_replies"] == valid_before + 50
    tb.log.info("fuzz: %d frames, %s", len(tb.sent), {k: v for k, v in cnt.items() if v})


# ------------------------------------------------------------------------------------------
# pytest: build and run the cocotb tests above
# ------------------------------------------------------------------------------------------

SOURCES = ["kv_eth_if", "kv_eth_rx", "kv_eth_tx", "kv_fifo"]

# (simulator, DATA_W, extra parameters, cocotb tests)
CONFIGS = [
    ("icarus", 64, {}, "run_directed|run_backpressure|run_line_rate|run_stall"),
    ("icarus", 512, {}, "run_directed|run_backpressure|run_line_rate|run_stall"),
    # small FIFOs: drop_fifo_full and the free-space bookkeeping under back-pressure
    ("icarus", 64, {"RX_FIFO_BYTES": 4096, "RX_DESC_DEPTH": 16, "TX_BUF_BYTES": 4096, "TX_DESC_DEPTH": 8,
              "TX_MAX_PAYLOAD": 1001},
     "run_backpressure|run_stall"),
    ("verilator", int(os.environ.get("KV_ETH_FUZZ_W", "64")), {}, "run_fuzz"),
]


def _config_id(sim: str, w: int, extra: dict, tests: str) -> str:
    tag = "-small" if extra else ""
    kind = "fuzz" if "fuzz" in tests else "main"
    return f"{sim}-w{w}{tag}-{kind}"


@pytest.mark.parametrize("sim,w,extra,tests", CONFIGS, ids=[_config_id(*c) for c in CONFIGS])
def test_kv_eth_if(sim: str, w: int, extra: dict, tests: str) -> None:
    import tools

    params = {"DATA_W": w, **extra}
    saved = os.environ.get("COCOTB_TEST_FILTER")
    os.environ["COCOTB_TEST_FILTER"] = rf"\.({tests})$"
    try:
        tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(*SOURCES), params,
                         tools.BUILD_DIR / TOPLEVEL / _config_id(sim, w, extra, tests),
                         seed=int(os.environ.get("KV_ETH_RANDOM_SEED", "20260401")),
                         params_env="KV_ETH_PARAMS", build_args=())
    finally:
        if saved is None:
            os.environ.pop("COCOTB_TEST_FILTER", None)
        else:
            os.environ["COCOTB_TEST_FILTER"] = saved
