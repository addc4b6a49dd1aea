"""cocotb testbench of hw/rtl/kv_top.v: Ethernet frames in, reply frames out, AXI4-Lite on the side.

Frames are built with scapy (hw/tb/kv_eth_if/eth_model.py: Ethernet, sometimes an 802.1Q tag, IPv4
with or without options, UDP / ARP / ICMP) around memcached payloads from hw/tb/kv_mc_core/mc_stim.py
(every binary opcode, quiet forms, multi-request datagrams, the text subset, every refusal and
datagram-level fault). They reach the MAC receive port through cocotbext-eth's ``EthMac`` (a MAC at
line rate: preamble and inter-frame gap between frames, beats at the wire's pace, and a transmit
side that takes beats only at the wire's pace too) or through cocotbext-axi's ``AxiStreamSource`` /
``AxiStreamSink`` with random idle cycles and back-pressure.

Two references, both independent of the RTL:
  - ``eth_model.classify`` (the L2-L4 rules of docs/frontend_rtl.md) gives every frame's one outcome
    counter and, for a datagram to our port, the UDP payload and metadata the memcached core must
    receive; the core's input (kv_top's internal ``pl_*`` stream) is watched and must carry exactly
    those, in order (a frame the rules accept may only be missing as drop_fifo_full);
  - the software server, ``pynq_kv.serve.memcached.server.handle_datagram_from`` on a model KVEngine of
    the same geometry (mc_stim.McModel), with the admission table kv_top holds (its reset table, or
    the one written and committed over AXI4-Lite: the model switches tables in the cycle the
    committed table changes, and each datagram is decided by the table in force when the core took
    its first beat), is given each payload the moment the core takes it and returns the reply
    payloads the design must send.
Every transmitted frame is compared byte for byte with the frame scapy builds for it
(``expect_udp_reply`` / ``expect_arp_reply`` / ``expect_icmp_reply``: addresses and VLAN tag back to
the requester, IPv4 identification counting up by one, checksums), UDP replies in order, ARP/ICMP
replies in order.  At the end all 34 front-end counters and the engine counters are read over
AXI4-Lite and must equal the references: rx_frames = frames sent = the sum of the outcomes, each
outcome as predicted, the datagram/request counters as the model's, the engine's as the model's.

Tests: run_directed (every opcode, the directed datagrams of mc_stim and the directed frames of
eth_model, rules for MATCH written through the mailbox), run_traffic (random traffic through a
line-rate MAC with extra idle and back-pressure, mailbox commands meanwhile), run_overload (frames
back to back faster than text is served: drop_fifo_full, still every frame accounted for),
run_config (registers), run_admission (admission tables written, staged and committed over
AXI4-Lite while datagrams from several sources flow: denied ones dropped and counted, replies
within the budgets), run_latency (constant port-to-port latency), run_fuzz (10,000 random and
mutated frames, then valid requests still served).  The pytest function at the bottom runs them
for DATA_W 64 and 512 under Icarus and the fuzz under Verilator (small engine geometry), each
configuration in its own build directory under hw/build/kv_top/.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import random
import struct
import sys
from collections import Counter, deque
from pathlib import Path

import cocotb
import pytest
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource
from cocotbext.eth import EthMac

TB_DIR = Path(__file__).resolve().parent
HW_DIR = TB_DIR.parents[1]
REPO_DIR = HW_DIR.parent
for _p in (REPO_DIR, HW_DIR, HW_DIR / "tb" / "kv_mc_core", HW_DIR / "tb" / "kv_eth_if"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from pynq_kv import regcodec  # noqa: E402
from pynq_kv import regmap  # noqa: E402
from pynq_kv.backend import COUNTER_NAMES, RuleEntry  # noqa: E402
from pynq_kv.geometry import Geometry  # noqa: E402
from pynq_kv.net.codec import Opcode, Request  # noqa: E402
from pynq_kv.net.udpframe import wrap  # noqa: E402

from eth_model import (COUNTERS as ETH_COUNTERS, OUR_IP, OUR_MAC, OUR_PORT, SERVED, C,  # noqa: E402
                       arp_frame, classify, directed_frames, expect_arp_reply, expect_icmp_reply,
                       expect_udp_reply, icmp_frame, ip_i, mac_i, mutate, udp_frame, verify_tx_checksums)
from mc_stim import McModel, Stim, admission_signals, directed_payloads, multiget  # noqa: E402
from pynq_kv.admission import Admission, AdmissionEntry  # noqa: E402

TOPLEVEL = "kv_top"
MODULES = ["kv_top", "kv_mc_csr", "kv_mc_core", "kv_mc_admit", "kv_mc_rx", "kv_mc_dec", "kv_mc_text", "kv_mc_fmt", "kv_skid",
           "kv_fifo", "kv_mc_arb", "kv_engine_top", "kv_csr", "kv_axil_regs", "kv_engine", "kv_h3_hash", "kv_bank_ram",
           "kv_rule_match", "kv_prio_tree", "kv_changelog", "kv_eth_if", "kv_eth_rx", "kv_eth_tx"]
DEFAULT_SEED = 0x70796E712D6B7631
CLK_NS = 4

# kv_top's reset values of FE_MAC / FE_IP / FE_UDP_PORT (CFG_* parameters)
RESET_CFG = {"mac": "02:00:00:00:00:01", "ip": "10.0.0.1", "port": 11211}
CLIENTS = [("02:aa:00:00:00:01", "10.0.0.2", 40000), ("02:aa:00:00:00:02", "10.0.0.3", 51234),
           ("02:aa:00:00:00:03", "192.168.7.9", 11211)]
ADMIT_CLIENTS = CLIENTS + [("02:aa:00:00:00:04", "172.16.5.5", 4000), ("02:aa:00:00:00:05", "10.255.0.1", 5000),
                           ("02:aa:00:00:00:06", "11.0.0.1", 6000)]
ADMIT_ENTRIES = 8   # kv_top's default
BIN_OPS = {op.value: op.name for op in Opcode}
TEXT_OPS = (b"get", b"set", b"delete", b"version")


def dut_params() -> dict:
    params = {"DATA_W": 64, "KEY_W": 144, "VALUE_W": 32, "WAYS": 2, "ROWS": 16, "STASH": 2,
              "RULES": 2, "PRIO_W": 4, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8, "MAX_FRAME": 1522}
    params.update(json.loads(os.environ.get("KV_TOP_PARAMS", "{}")))
    return params


def _uint(value) -> int:
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


def cycle() -> int:
    return int(get_sim_time("ns")) // CLK_NS


def payload_ops(payload: bytes) -> set[str]:
    """The binary opcodes / text commands a served datagram payload carries (for coverage)."""
    body = payload[8:]
    ops: set[str] = set()
    if len(payload) < 8 or struct.unpack_from(">H", payload, 4)[0] != 1 or not body:
        return ops
    if body[0] == 0x80:
        at = 0
        while at + 24 <= len(body) and body[at] == 0x80:
            ops.add(BIN_OPS.get(body[at + 1], "unknown"))
            at += 24 + struct.unpack_from(">I", body, at + 8)[0]
        return ops
    for line in body.split(b"\n"):
        words = line.split(b" ")
        words = [w for w in words if w]
        if words and words[0] in TEXT_OPS:
            ops.add("text " + words[0].decode())
    return ops


class TB:
    """Drivers, monitors and the two references (classify, McModel) for kv_top."""

    def __init__(self, dut, seed: int, *, line_rate: bool = False):
        self.dut = dut
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        self.rng = random.Random(seed)
        p = dut_params()
        self.p = p
        self.nb = p["DATA_W"] // 8
        self.key_w, self.value_w = p["KEY_W"], p["VALUE_W"]
        self.geometry = Geometry(key_width=self.key_w, value_width=self.value_w, ways=p["WAYS"],
                                 rows=p["ROWS"], stash=p["STASH"], rules=p["RULES"],
                                 prio_width=p["PRIO_W"], hash_seed=p["HASH_SEED"])
        self.model = McModel(self.geometry)
        self.cfg = dict(RESET_CFG)
        self.allow_full = False
        self.max_ahead = 3          # datagrams allowed to wait for the core (the FIFO never fills)
        # references
        self.outcomes: Counter = Counter()     # predicted outcome counter per frame sent
        self.sent = 0
        self.pred_pl: deque = deque()          # (payload, meta) the core must take, in order
        self.pl_sent = 0
        self.pl_taken = 0
        self.pred_ctl: deque = deque()         # (outcome, request info) of ARP/ICMP replies
        self.exp_udp: deque = deque()          # (reply payload, request meta)
        self.lost = Counter()                  # served outcomes that became drop_fifo_full
        self.coverage: Counter = Counter()
        # observations
        self.errors: list[str] = []
        self.tx_seen = Counter()               # "udp" / "arp" / "icmp" frames transmitted
        self.next_ip_id = None
        self.rx_first_beats: deque = deque()
        self.tx_first_beats: deque = deque()
        self.last_activity = 0
        self.pl_bytes = bytearray()
        self.pl_admission = self.model.admission   # the table that decided the datagram in flight
        self.watch_admit = False                    # follow the committed table (run_admission)
        self.pending_admission = self.model.admission
        self.admit_seen = None

        dut.rst.value = 1
        cocotb.start_soon(Clock(dut.clk, CLK_NS, unit="ns").start())
        if line_rate:
            speed = 10e9 if p["DATA_W"] == 64 else 100e9
            self.mac = EthMac(tx_bus=AxiStreamBus.from_prefix(dut, "m_axis_tx"), tx_clk=dut.clk, tx_rst=dut.rst,
                              rx_bus=AxiStreamBus.from_prefix(dut, "s_axis_rx"), rx_clk=dut.clk, rx_rst=dut.rst,
                              speed=speed)
            self.source, self.sink = self.mac.rx.stream, self.mac.tx.stream
            for log in (self.mac.rx.log, self.mac.tx.log):
                log.setLevel(logging.WARNING)
        else:
            self.mac = None
            self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_rx"), dut.clk, dut.rst)
            self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_tx"), dut.clk, dut.rst)
        self.sink.log.setLevel(logging.WARNING)
        self.source.log.setLevel(logging.WARNING)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.axil.write_if.log.setLevel(logging.WARNING)
        self.axil.read_if.log.setLevel(logging.WARNING)
        cocotb.start_soon(self._monitor())

    async def reset(self, program: bool = True) -> None:
        """Reset; wait for the engine to clear its tables; set the addresses of eth_model (OUR_*)."""
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 6)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, self.p["ROWS"] + 20)
        if program:
            await self.set_cfg({"mac": OUR_MAC, "ip": OUR_IP, "port": OUR_PORT})

    async def set_cfg(self, cfg: dict) -> None:
        mac = mac_i(cfg["mac"])
        await self.axil.write_dword(regmap.REG_FE_MAC_LO, mac & 0xFFFFFFFF)
        await self.axil.write_dword(regmap.REG_FE_MAC_HI, mac >> 32)
        await self.axil.write_dword(regmap.REG_FE_IP, ip_i(cfg["ip"]))
        await self.axil.write_dword(regmap.REG_FE_UDP_PORT, cfg["port"])
        self.cfg = dict(cfg)

    def set_rx_idle(self, prob: float) -> None:
        if prob <= 0:
            self.source.clear_pause_generator()
            self.source.pause = False
        else:
            rng = random.Random(self.rng.random())
            self.source.set_pause_generator(iter(lambda: int(rng.random() < prob), 2))

    def set_tx_backpressure(self, prob: float, hold: int = 1) -> None:
        if prob <= 0:
            self.sink.clear_pause_generator()
            self.sink.pause = False
        else:
            rng = random.Random(self.rng.random())

            def gen():
                while True:
                    v = int(rng.random() < prob)
                    for _ in range(rng.randint(1, hold)):
                        yield v
            self.sink.set_pause_generator(gen())

    # -- monitor: the core's input, first beats, activity ------------------------------------
    async def _monitor(self) -> None:
        dut = self.dut
        in_rx = in_tx = False
        nb = self.nb
        while True:
            await RisingEdge(dut.clk)
            if not dut.rst.value.is_resolvable or _uint(dut.rst.value):
                in_rx = in_tx = False
                continue
            c = cycle()
            if _uint(dut.s_axis_rx_tvalid.value):
                self.last_activity = c
                if not _uint(dut.s_axis_rx_tready.value):
                    self.errors.append(f"cycle {c}: s_axis_rx_tready low (the MAC must never be back-pressured)")
                if not in_rx:
                    self.rx_first_beats.append(c)
                in_rx = not _uint(dut.s_axis_rx_tlast.value)
            if self.watch_admit:
                self._watch_admission()
            if _uint(dut.pl_tvalid.value) and _uint(dut.pl_tready.value):
                self.last_activity = c
                if not self.pl_bytes:
                    self.pl_admission = self.model.admission
                n = bin(_uint(dut.pl_tkeep.value)).count("1")
                self.pl_bytes += _uint(dut.pl_tdata.value).to_bytes(nb, "little")[:n]
                if _uint(dut.pl_tlast.value):
                    self._core_took(bytes(self.pl_bytes), _uint(dut.pl_meta.value))
                    self.pl_bytes = bytearray()
            if _uint(dut.rpl_tvalid.value) or _uint(dut.m_axis_tx_tvalid.value):
                self.last_activity = c
            if _uint(dut.m_axis_tx_tvalid.value) and _uint(dut.m_axis_tx_tready.value):
                if not in_tx:
                    self.tx_first_beats.append(c)
                in_tx = not _uint(dut.m_axis_tx_tlast.value)

    def _core_took(self, payload: bytes, meta: int) -> None:
        """The core took a datagram: it must be the next one classify accepted (frames before it
        may have been dropped as drop_fifo_full); the model answers it now."""
        self.pl_taken += 1
        while self.pred_pl and self.pred_pl[0] != (payload, meta):
            if not self.allow_full:
                self.errors.append(f"core took {payload.hex()} meta {meta:#x}, expected "
                                   f"{self.pred_pl[0][0].hex()} meta {self.pred_pl[0][1]:#x}")
                break
            self.pred_pl.popleft()
            self.lost[C["rx_udp_payloads"]] += 1
        if not self.pred_pl:
            self.errors.append(f"core took an unexpected datagram {payload.hex()}")
            return
        self.pred_pl.popleft()
        for reply in self.model.datagram(payload, (meta >> 32) & 0xFFFFFFFF, self.pl_admission):
            self.exp_udp.append((reply, meta))

    # -- admission table ---------------------------------------------------------------------------
    def _watch_admission(self) -> None:
        """The committed table (kv_mc_csr's cfg_admit_*) as of this edge: when it changes it must
        be the table last committed, which the model takes from this edge on."""
        dut = self.dut
        seen = {name: _uint(getattr(dut, f"admit_{name}").value)
                for name in ("valid", "allow", "addr", "mask", "budget", "def_allow", "def_budget")}
        if seen == self.admit_seen:
            return
        if self.admit_seen is not None:
            want = admission_signals(self.pending_admission, ADMIT_ENTRIES)
            if seen != want:
                self.errors.append(f"cycle {cycle()}: committed table {seen} != {want}")
            self.model.admission = self.pending_admission
        self.admit_seen = seen

    async def write_admission(self, admission: Admission) -> None:
        """Write a table into the FE_ADMIT_* registers (staged: not in force until committed)."""
        s = admission_signals(admission, ADMIT_ENTRIES)
        ax = self.axil
        await ax.write_dword(regmap.REG_FE_ADMIT_DEFAULT,
                             s["def_allow"] << regmap.FE_ADMIT_DEFAULT_ALLOW_SHIFT
                             | s["def_budget"] << regmap.FE_ADMIT_DEFAULT_BUDGET_SHIFT)
        for i in range(ADMIT_ENTRIES):
            e = admission.entries[i] if i < len(admission.entries) else None
            await ax.write_dword(regmap.REG_FE_ADMIT_ADDR + 4 * i, int(e.network.network_address) if e else 0)
            ctrl = 0 if e is None else (regmap.FE_ADMIT_CTRL_VALID | int(e.allow) << regmap.FE_ADMIT_CTRL_ALLOW_SHIFT
                                        | e.network.prefixlen << regmap.FE_ADMIT_CTRL_LEN_SHIFT
                                        | e.budget << regmap.FE_ADMIT_CTRL_BUDGET_SHIFT)
            await ax.write_dword(regmap.REG_FE_ADMIT_CTRL + 4 * i, ctrl)
        self.pending_admission = admission

    async def commit_admission(self) -> None:
        await self.axil.write_dword(regmap.REG_FE_CTRL, regmap.FE_CTRL_ADMIT_COMMIT)

    # -- sending -------------------------------------------------------------------------------
    async def send(self, frame: bytes, user: int = 0) -> int:
        """Send one frame (classified now); returns its predicted outcome counter."""
        code, info = classify(frame, user, self.p["MAX_FRAME"], self.cfg)
        if code == C["rx_udp_payloads"]:
            waited = 0
            while self.pl_sent - self.pl_taken - self.lost[C["rx_udp_payloads"]] >= self.max_ahead \
                    and waited < 20000:
                await RisingEdge(self.dut.clk)
                waited += 1
            self.pl_sent += 1
            self.pred_pl.append(info)
            for op in payload_ops(info[0]):
                self.coverage[op] += 1
        elif code in SERVED:
            self.pred_ctl.append((code, info))
        self.outcomes[code] += 1
        self.sent += 1
        if self.mac is not None:
            assert not user, "the line-rate MAC model sends no tuser errors"
            await self.mac.rx.send(frame)
        else:
            await self.source.send(AxiStreamFrame(frame, tuser=[0] * (len(frame) - 1) + [1] if user else 0))
        return code

    def datagram_frame(self, payload: bytes, client=None, vlan: int | None | bool = False, **kw) -> bytes:
        """A frame carrying a memcached datagram to our port; vlan False = random (25 % tagged)."""
        mac, ip, port = client or self.rng.choice(CLIENTS)
        if vlan is False:
            vlan = self.rng.getrandbits(16) if self.rng.random() < 0.25 else None
        return udp_frame(payload, sport=port, src_ip=ip, src_mac=mac, dst_mac=kw.pop("dst_mac", self.cfg["mac"]),
                         dst_ip=kw.pop("dst_ip", self.cfg["ip"]), dport=kw.pop("dport", self.cfg["port"]),
                         tci=vlan, **kw)

    async def send_datagram(self, payload: bytes, client=None, vlan: int | None | bool = False, **kw) -> int:
        return await self.send(self.datagram_frame(payload, client, vlan, **kw))

    # -- receiving -------------------------------------------------------------------------------
    def _recv_frames(self) -> None:
        if self.mac is not None:
            while not self.mac.tx.empty():
                self.check_frame(bytes(self.mac.tx.recv_nowait().data))
        else:
            while not self.sink.empty():
                self.check_frame(bytes(self.sink.recv_nowait().tdata))

    def check_frame(self, f: bytes) -> None:
        try:
            self._check_frame(f)
        except AssertionError as exc:
            self.errors.append(str(exc))

    def _check_frame(self, f: bytes) -> None:
        assert len(f) >= 60, f"transmitted frame of {len(f)} bytes"
        etype, e = struct.unpack_from(">H", f, 12)[0], 14
        if etype == 0x8100:
            etype, e = struct.unpack_from(">H", f, 16)[0], 18
        if etype == 0x0806:
            self.tx_seen["arp"] += 1
            self._match_ctl(f, C["arp_replies"], lambda info: expect_arp_reply(info, self.cfg))
            return
        assert etype == 0x0800, f"transmitted frame with EtherType {etype:#06x}"
        verify_tx_checksums(f)
        ip_id = struct.unpack_from(">H", f, e + 4)[0]
        if self.next_ip_id is not None:
            assert ip_id == self.next_ip_id, f"IPv4 identification {ip_id}, expected {self.next_ip_id}"
        self.next_ip_id = (ip_id + 1) & 0xFFFF
        if f[e + 9] == 1:
            self.tx_seen["icmp"] += 1
            self._match_ctl(f, C["icmp_replies"], lambda info: expect_icmp_reply(info, ip_id, self.cfg))
            return
        self.tx_seen["udp"] += 1
        assert self.exp_udp, f"UDP reply with none expected: {f.hex()}"
        reply, meta = self.exp_udp.popleft()
        want = expect_udp_reply(reply, meta, ip_id, self.cfg)
        assert f == want, f"UDP reply\n got  {f.hex()}\n want {want.hex()} (model payload {reply!r})"

    def _match_ctl(self, frame: bytes, code: int, build) -> None:
        """The next expected ARP/ICMP reply; requests skipped over were lost to drop_fifo_full."""
        while self.pred_ctl:
            c, info = self.pred_ctl.popleft()
            want = build(info) if c == code else None
            if want == frame:
                return
            assert self.allow_full, (f"{ETH_COUNTERS[code]} reply\n got  {frame.hex()}\n want "
                                     f"{want.hex() if want else ETH_COUNTERS[c]}")
            self.lost[c] += 1
        raise AssertionError(f"unexpected {ETH_COUNTERS[code]} reply {frame.hex()}")

    def _source_idle(self) -> bool:
        if self.mac is not None:
            return self.mac.rx.idle() and self.source.empty() and self.source.idle()
        return self.source.empty() and self.source.idle()

    async def settle(self, quiet: int = 600, limit: int = 3_000_000) -> None:
        """Run until every frame has gone in and every expected reply has come out, then quiet
        cycles in which nothing moves (nothing more may come)."""
        start = cycle()
        while True:
            await ClockCycles(self.dut.clk, 20)
            self._recv_frames()
            done = self._source_idle() and not self.exp_udp and cycle() - self.last_activity > quiet
            if done and (not self.pred_pl and not self.pred_ctl or self.allow_full):
                break
            if cycle() - start > limit or (done and cycle() - self.last_activity > 20000):
                self.errors.append(f"the design went idle with {len(self.pred_pl)} datagrams, "
                                   f"{len(self.pred_ctl)} ARP/ICMP requests, {len(self.exp_udp)} replies pending")
                break
        self._recv_frames()
        if self.allow_full:     # whatever is still predicted was lost to drop_fifo_full
            self.lost[C["rx_udp_payloads"]] += len(self.pred_pl)
            self.pred_pl.clear()
            for c, _ in self.pred_ctl:
                self.lost[c] += 1
            self.pred_ctl.clear()

    # -- AXI4-Lite -------------------------------------------------------------------------------
    async def read64(self, base: int, index: int) -> int:
        lo = await self.axil.read_dword(base + 8 * index)
        hi = await self.axil.read_dword(base + 8 * index + 4)
        return (hi << 32) | lo

    async def fe_counters(self) -> dict[str, int]:
        return {name: await self.read64(regmap.REG_FE_COUNTER, i) for i, name in enumerate(regmap.FE_COUNTER_NAMES)}

    async def engine_counters(self) -> dict[str, int]:
        return {name: await self.read64(regmap.REG_COUNTER, i) for i, name in enumerate(COUNTER_NAMES)}

    async def mailbox(self, op: int, key: int = 0, value: int = 0, index: int = 0, mask: int = 0,
                      prio: int = 0, flag: int = 0, entry: int = 0) -> dict:
        kw = -(-self.key_w // 32)
        for i, w in enumerate(regcodec.words(key, kw)):
            await self.axil.write_dword(regmap.REG_REQ_KEY + 4 * i, w)
        for i, w in enumerate(regcodec.words(mask, kw)):
            await self.axil.write_dword(regmap.REG_REQ_MASK + 4 * i, w)
        for i, w in enumerate(regcodec.words(value, self.value_w // 32)):
            await self.axil.write_dword(regmap.REG_REQ_VALUE + 4 * i, w)
        for reg, v in ((regmap.REG_REQ_INDEX, index), (regmap.REG_REQ_PRIO, prio), (regmap.REG_REQ_FLAG, flag),
                       (regmap.REG_REQ_ENTRY, entry), (regmap.REG_REQ_OP, op)):
            await self.axil.write_dword(reg, v)
        await self.axil.write_dword(regmap.REG_CTRL, regmap.CTRL_GO)
        for _ in range(1000):
            if await self.axil.read_dword(regmap.REG_STATUS) & regmap.STATUS_DONE:
                break
        else:
            raise AssertionError("mailbox command never done")
        status = await self.axil.read_dword(regmap.REG_RSP_STATUS)
        words = [await self.axil.read_dword(regmap.REG_RSP_VALUE + 4 * i) for i in range(self.value_w // 32)]
        data = await self.read64(regmap.REG_RSP_DATA_LO, 0)
        return {"status": status, "value": regcodec.from_words(words), "data64": data}

    def raw_key(self, key: bytes) -> int:
        kb = self.key_w // 8
        return int.from_bytes(bytes([len(key)]) + key + bytes(kb - 1 - len(key)), "big")

    def raw_value(self, value: bytes) -> bytes:
        vb = self.value_w // 8
        return bytes([len(value)]) + value + bytes(vb - 1 - len(value))

    async def setup_rules(self) -> None:
        """Rules MATCH can hit (written through the mailbox and into the model): keys of 1-3
        bytes; keys starting with 'A'..'O'; with three rules, every key (an untagged value)."""
        kw, vb = self.key_w, self.value_w // 8
        rules = [(0, 0x00 << (kw - 8), 0xFC << (kw - 8), 3, self.raw_value(b"short"[: vb - 1])),
                 (1, 0x40 << (kw - 16), 0xF0 << (kw - 16), 5, self.raw_value(b"R1"[: vb - 1])),
                 (2, 0, 0, 1, bytes([0xFF]) + bytes(range(1, vb)))][: self.geometry.rules]
        for entry, match, mask, prio, value in rules:
            self.model.engine.backend.write_rule(entry, RuleEntry(True, match, mask, prio, value))
            rsp = await self.mailbox(regmap.OP_WRITE_RULE, key=match, mask=mask, value=int.from_bytes(value, "big"),
                                     prio=prio, flag=1, entry=entry)
            assert rsp["status"] == 0, rsp

    # -- final check -----------------------------------------------------------------------------
    async def check(self) -> dict:
        """Every frame accounted for: all 34 front-end counters and the engine counters over
        AXI4-Lite against the references; returns the front-end counters."""
        self._recv_frames()
        fe = await self.fe_counters()
        want = {name: 0 for name in ETH_COUNTERS}
        for code, n in self.outcomes.items():
            want[ETH_COUNTERS[code]] += n
        for code, n in self.lost.items():
            want[ETH_COUNTERS[code]] -= n
            want["drop_fifo_full"] += n
        want["rx_frames"] = self.sent
        want["tx_frames"] = sum(self.tx_seen.values())
        want["tx_udp_replies"] = self.tx_seen["udp"]
        want["tx_drop_oversize"] = 0
        want.update(self.model.datagram_counters())
        diff = {k: (fe[k], v) for k, v in want.items() if fe[k] != v}
        if diff:
            self.errors.append(f"front-end counters (got, want): {diff}")
        outcomes = sum(fe[n] for n in ETH_COUNTERS[1:C["drop_fifo_full"] + 1])
        if not fe["rx_frames"] == outcomes == self.sent:
            self.errors.append(f"rx_frames {fe['rx_frames']}, sum of outcomes {outcomes}, frames sent {self.sent}")
        if fe["rx_udp_payloads"] != fe["drop_denied"] + fe["rx_datagrams"] \
                or fe["tx_udp_replies"] != fe["tx_datagrams"]:
            self.errors.append(f"frame and datagram layers disagree: {fe}")
        if self.tx_seen["arp"] != fe["arp_replies"] or self.tx_seen["icmp"] != fe["icmp_replies"]:
            self.errors.append(f"ARP/ICMP replies seen {dict(self.tx_seen)}, counted {fe}")
        eng = await self.engine_counters()
        if eng != self.model.engine.backend.counters():
            self.errors.append(f"engine counters {eng} != model {self.model.engine.backend.counters()}")
        for e in self.errors[:20]:
            self.log.error("%s", e)
        assert not self.errors, f"{len(self.errors)} errors, first: {self.errors[0]}"
        assert not self.exp_udp, f"{len(self.exp_udp)} replies missing"
        self.log.info("front-end counters: %s", {k: v for k, v in fe.items() if v})
        return fe


def stim_for(tb: TB, pool: int = 30) -> Stim:
    return Stim(tb.rng, tb.key_w, tb.value_w, pool=pool, avoid=(b"~mb",))


def mtu_payload(stim: Stim, text_share: float = 0.3) -> bytes:
    payload = stim.payload(text_share=text_share)
    while len(payload) > 1472 - 40:   # within the MTU, even with IPv4 options
        payload = stim.payload(text_share=text_share)
    return payload


ALL_OPS = {op.name for op in Opcode} | {"text " + t.decode() for t in TEXT_OPS}


@cocotb.test()
async def run_directed(dut):
    """Every opcode and the directed datagrams of mc_stim (rules for MATCH written through the
    mailbox), then every L2-L4 outcome of eth_model's directed frames, ARP and ICMP included;
    idle cycles on receive, back-pressure on transmit."""
    tb = TB(dut, cocotb.RANDOM_SEED + 1)
    await tb.reset()
    await tb.setup_rules()
    tb.set_rx_idle(0.2)
    tb.set_tx_backpressure(0.5, hold=8)
    mk, mv = tb.key_w // 8 - 1, tb.value_w // 8 - 1
    for i, payload in enumerate(directed_payloads(mk, mv)):
        await tb.send_datagram(payload, vlan=0x2000 | i if i % 3 == 0 else None)
    await tb.settle()
    missing = ALL_OPS - set(tb.coverage)
    assert not missing, f"not covered: {sorted(missing)}"
    codes = set()
    for name, frame, user in directed_frames(tb.rng):
        codes.add(await tb.send(frame, user))
        await ClockCycles(dut.clk, tb.rng.choice([0, 0, 5]))
    missing = set(range(1, C["drop_fifo_full"])) - codes
    assert not missing, f"directed frames miss outcomes {[ETH_COUNTERS[c] for c in missing]}"
    await tb.settle()
    await tb.check()
    tb.log.info("coverage: %s", dict(sorted(tb.coverage.items())))


@cocotb.test()
async def run_traffic(dut):
    """Random memcached datagrams (binary and text, every fault), dropped frames, ARP and ICMP
    through a line-rate MAC (cocotbext-eth EthMac: 10G at 64 bits, 100G at 512), with extra idle
    cycles on receive in one phase; mailbox commands through AXI4-Lite meanwhile."""
    tb = TB(dut, cocotb.RANDOM_SEED, line_rate=True)
    await tb.reset()
    assert await tb.axil.read_dword(regmap.REG_ID) == regmap.ID_MAGIC
    assert await tb.axil.read_dword(regmap.REG_FE_DATA_W) == tb.p["DATA_W"]
    assert await tb.axil.read_dword(regmap.REG_FE_NUM_COUNTERS) == regmap.FE_NUM_COUNTERS
    await tb.setup_rules()
    stim = stim_for(tb)
    mb_key = tb.raw_key(b"~mb")                      # a key only the mailbox touches
    tb.model.engine.set(b"~mb", b"m")
    mb_value = int.from_bytes(tb.raw_value(b"m"), "big")
    rsp = await tb.mailbox(regmap.OP_SET, key=mb_key, value=mb_value)
    assert rsp["status"] == 0, rsp

    async def mailbox_loop(n: int) -> None:
        for _ in range(n):
            tb.model.engine.get(b"~mb")
            r = await tb.mailbox(regmap.OP_GET, key=mb_key)
            if r["status"] != 1 or r["value"] != mb_value:
                tb.errors.append(f"mailbox GET during traffic: {r}")
            r = await tb.mailbox(regmap.OP_READ_COUNTER, index=regmap.CNT_CMD_ERRORS)
            if r["data64"] != 0:
                tb.errors.append(f"mailbox READ_COUNTER: {r}")

    # the MAC model paces both directions at line rate (its transmit side asserts that a frame
    # never underruns once started, so no extra back-pressure here: run_directed / run_fuzz have it)
    for idle in (0.0, 0.4, 0.0):
        tb.set_rx_idle(idle)
        mb = cocotb.start_soon(mailbox_loop(3))
        for i in range(int(os.environ.get("KV_TOP_FRAMES", "60"))):
            r = tb.rng.random()
            client = tb.rng.choice(CLIENTS)
            if r < 0.05:
                await tb.send_datagram(wrap(1, Request(Opcode.NOOP).encode()), dport=tb.cfg["port"] ^ 0x10)
            elif r < 0.08:
                await tb.send_datagram(wrap(1, Request(Opcode.NOOP).encode()), dst_ip="10.9.9.9")
            elif r < 0.10:
                bad = bytearray(tb.datagram_frame(wrap(1, Request(Opcode.NOOP).encode()), vlan=None))
                bad[14 + 20 + 6] ^= 0x5A                  # UDP checksum
                await tb.send(bytes(bad))
            elif r < 0.13:
                await tb.send(arp_frame(sha=client[0], spa=client[1], tci=tb.rng.choice([None, 77])))
            elif r < 0.16:
                await tb.send(icmp_frame(tb.rng.randbytes(tb.rng.randint(0, 100)), src_mac=client[0],
                                         src_ip=client[1], seq=i, tci=tb.rng.choice([None, 0x1005])))
            else:
                await tb.send_datagram(mtu_payload(stim), client)
        await mb
        await tb.settle()
    await tb.check()


@cocotb.test()
async def run_overload(dut):
    """Frames back to back, faster than text datagrams are served: the receive FIFO drops some
    (drop_fifo_full); every frame is still counted once and every delivered one answered."""
    tb = TB(dut, cocotb.RANDOM_SEED + 3)
    await tb.reset()
    tb.allow_full = True
    tb.max_ahead = 1 << 30
    stim = stim_for(tb)
    n = int(os.environ.get("KV_TOP_OVERLOAD_FRAMES", "60"))
    for _ in range(n):
        payload = wrap(3, stim.text_body(4)) if tb.rng.random() < 0.6 else mtu_payload(stim)
        await tb.send_datagram(payload)
        if tb.rng.random() < 0.2:
            await tb.send(icmp_frame(b"ping", tci=tb.rng.choice([None, 9])))
    await tb.settle()
    fe = await tb.check()
    assert fe["drop_fifo_full"] > 0, "no overload happened"


@cocotb.test()
async def run_config(dut):
    """FE registers: reset values, a new MAC/IP/port served and the old ones dropped, read-only
    and unmapped addresses answer SLVERR, FE_CTRL clears every counter."""
    tb = TB(dut, cocotb.RANDOM_SEED + 1)
    await tb.reset(program=False)
    assert await tb.axil.read_dword(regmap.REG_FE_MAC_HI) == 0x0200
    assert await tb.axil.read_dword(regmap.REG_FE_MAC_LO) == 0x00000001
    assert await tb.axil.read_dword(regmap.REG_FE_IP) == 0x0A000001
    assert await tb.axil.read_dword(regmap.REG_FE_UDP_PORT) == 11211
    # served on the reset addresses
    await tb.send_datagram(wrap(4, Request(Opcode.VERSION, opaque=8).encode()))
    await tb.send(arp_frame(tpa=RESET_CFG["ip"], tci=None))
    await tb.settle()
    old = dict(tb.cfg)
    await tb.set_cfg({"mac": "02:00:5e:77:00:09", "ip": "10.0.0.99", "port": 0x2BCC})
    assert await tb.axil.read_dword(regmap.REG_FE_UDP_PORT) == 0x2BCC
    assert await tb.axil.read_dword(regmap.REG_FE_MAC_HI) == 0x0200
    assert await tb.axil.read_dword(regmap.REG_FE_MAC_LO) == 0x5E770009
    wr = await tb.axil.write(regmap.REG_FE_DATA_W, b"\0\0\0\0")
    assert wr.resp != 0
    rd = await tb.axil.read(regmap.REG_FE_COUNTER + 8 * regmap.FE_NUM_COUNTERS, 4)
    assert rd.resp != 0
    # the admission registers: reset values, staged write and read back, refusals
    assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_ENTRIES) == ADMIT_ENTRIES
    assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_DEFAULT) == \
        regmap.FE_ADMIT_DEFAULT_ALLOW | 2 << regmap.FE_ADMIT_DEFAULT_BUDGET_SHIFT
    for i in range(ADMIT_ENTRIES):
        assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_ADDR + 4 * i) == 0
        assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_CTRL + 4 * i) == 0
    ctrl = 1 | 24 << 8 | 7 << 16
    await tb.axil.write_dword(regmap.REG_FE_ADMIT_CTRL + 4 * 5, ctrl | 0xFF00C0FC)  # bits outside fields
    assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_CTRL + 4 * 5) == ctrl          # only the fields kept
    await tb.axil.write_dword(regmap.REG_FE_ADMIT_CTRL + 4 * 5, ctrl)
    assert (await tb.axil.write(regmap.REG_FE_ADMIT_CTRL + 4 * 5, (33 << 8).to_bytes(4, "little"))).resp != 0
    assert (await tb.axil.write(regmap.REG_FE_ADMIT_CTRL + 4 * 5 + 1, bytes([63]))).resp != 0  # LEN by byte
    assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_CTRL + 4 * 5) == ctrl      # unchanged
    await tb.axil.write(regmap.REG_FE_ADMIT_CTRL + 4 * 5 + 1, bytes([32]))          # LEN 32 by byte
    assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_CTRL + 4 * 5) == ctrl & ~0x3F00 | 32 << 8
    await tb.axil.write_dword(regmap.REG_FE_ADMIT_ADDR + 4 * 5, 0xC0A80700)
    assert await tb.axil.read_dword(regmap.REG_FE_ADMIT_ADDR + 4 * 5) == 0xC0A80700
    await tb.axil.write_dword(regmap.REG_FE_ADMIT_CTRL + 4 * 5, 0)                   # never committed
    await tb.axil.write_dword(regmap.REG_FE_ADMIT_ADDR + 4 * 5, 0)
    for reg in (regmap.REG_FE_ADMIT_ADDR, regmap.REG_FE_ADMIT_CTRL):               # beyond ADMIT_ENTRIES
        assert (await tb.axil.read(reg + 4 * ADMIT_ENTRIES, 4)).resp != 0
        assert (await tb.axil.write(reg + 4 * ADMIT_ENTRIES, b"\1\0\0\0")).resp != 0
    assert (await tb.axil.write(regmap.REG_FE_ADMIT_ENTRIES, b"\0\0\0\0")).resp != 0
    await tb.send_datagram(wrap(5, Request(Opcode.VERSION, opaque=9).encode()))
    await tb.send_datagram(wrap(6, Request(Opcode.NOOP).encode()), dport=old["port"])     # old port
    await tb.send_datagram(wrap(6, Request(Opcode.NOOP).encode()), dst_ip=old["ip"])      # old IP
    await tb.send_datagram(wrap(6, Request(Opcode.NOOP).encode()), dst_mac=old["mac"])    # old MAC
    await tb.send(arp_frame(tpa=tb.cfg["ip"]))
    await tb.send(arp_frame(tpa=old["ip"]))
    await tb.send(icmp_frame(b"new", dst_mac=tb.cfg["mac"], dst_ip=tb.cfg["ip"]))
    await tb.settle()
    await tb.check()
    await tb.axil.write_dword(regmap.REG_FE_CTRL, regmap.FE_CTRL_CLR_COUNTERS)
    fe = await tb.fe_counters()
    assert all(v == 0 for v in fe.values()), fe


def _allow(network: str, budget: int) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(network), True, budget)


def _deny(network: str) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(network), False, 0)


@cocotb.test()
async def run_admission(dut):
    """Admission tables over AXI4-Lite while multi-get datagrams from six sources flow (idle
    cycles, back-pressure): a staged table changes nothing until committed; each commit, made
    mid-traffic, decides every datagram whose first beat follows it (the model switches in that
    cycle); denied sources dropped and counted, replies cut at their budgets."""
    tb = TB(dut, cocotb.RANDOM_SEED + 4)
    await tb.reset()
    tb.watch_admit = True
    tb.set_rx_idle(0.1)
    tb.set_tx_backpressure(0.3, hold=4)
    stim = stim_for(tb, pool=12)
    tb.max_ahead = 6
    vb = tb.value_w // 8 - 1
    for i in range(0, len(stim.keys), 4):   # values for the pool, under the reset table (budget 2)
        await tb.send_datagram(wrap(1, b"".join(Request(Opcode.SETQ, k, b"\0" * 8, b"v" * vb).encode()
                                             for k in stim.keys[i:i + 4])))
    await tb.settle()

    async def traffic(n: int) -> None:
        for _ in range(n):
            client = tb.rng.choice(ADMIT_CLIENTS)
            binary = tb.rng.random() < 0.5
            await tb.send_datagram(multiget(tb.rng, stim.keys, binary, 600, 1400), client=client)

    tables = [
        Admission((_deny("10.0.0.3/32"), _allow("10.0.0.0/8", 1), _allow("192.168.0.0/16", 0),
                   _deny("10.0.0.0/8")), default_allow=False),
        Admission((_allow("0.0.0.0/0", 3),), default_allow=False),
        Admission((_allow("10.0.0.2/32", 0), _deny("172.16.0.0/12")), default_allow=True, default_budget=1),
    ]
    for table in tables:
        await tb.write_admission(table)    # staged while traffic under the previous table flows
        sender = cocotb.start_soon(traffic(30))
        await ClockCycles(dut.clk, tb.rng.randint(200, 2000))
        await tb.commit_admission()
        await sender
        await traffic(10)
        await tb.settle()
    fe = await tb.check()
    assert tb.model.admission == tables[-1]
    assert fe["drop_denied"] > 0 and fe["budget_exceeded"] > 0, fe
    tb.log.info("admission: %d dropped, %d cut", fe["drop_denied"], fe["budget_exceeded"])


@cocotb.test()
async def run_latency(dut):
    """Single-GET frames, one at a time: constant port-to-port latency (first beat in to first
    beat out)."""
    tb = TB(dut, cocotb.RANDOM_SEED + 2)
    await tb.reset()
    key = b"lat"
    await tb.send_datagram(wrap(1, Request(Opcode.SET, key, b"\0" * 8, b"v").encode()), CLIENTS[0], None)
    await tb.settle()
    lats = []
    for i in range(8):
        tb.rx_first_beats.clear()
        tb.tx_first_beats.clear()
        await tb.send_datagram(wrap(i, Request(Opcode.GET, key, opaque=i).encode()), CLIENTS[0], None)
        await tb.settle(quiet=100)
        lats.append(tb.tx_first_beats[0] - tb.rx_first_beats[0])
    await tb.check()
    tb.log.info("port-to-port latency of a single-GET frame (first beat in -> first beat out): %s cycles", lats)
    assert len(set(lats)) == 1, lats
    assert lats[0] <= 64, lats


@cocotb.test()
async def run_fuzz(dut):
    """KV_TOP_FUZZ (default 10,000) random and mutated frames -- memcached datagrams with every
    fault (some with random bytes written, inserted or cut inside the payload), ARP, ICMP and
    noise, 70 % corrupted at L2-L4 (truncated, bit flips, wrong lengths and
    checksums, IHL/version, ethertype, fragments, protocol, addresses, ports, runts, oversize,
    tuser) -- with idle cycles and back-pressure; every frame accounted for in the counters;
    then valid requests of every opcode are still served correctly."""
    tb = TB(dut, cocotb.RANDOM_SEED + 4)
    await tb.reset()
    await tb.setup_rules()
    tb.allow_full = True
    tb.max_ahead = 4
    tb.set_rx_idle(0.05)
    tb.set_tx_backpressure(0.2, hold=4)
    rng = tb.rng
    stim = stim_for(tb)
    n = int(os.environ.get("KV_TOP_FUZZ", "10000"))

    def corrupt(payload: bytes) -> bytes:
        """Garbage for the memcached parsers, inside a well-formed UDP datagram."""
        p = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            r = rng.randrange(5)
            if r == 0 and p:
                p[rng.randrange(len(p))] = rng.getrandbits(8)
            elif r == 1 and p:
                p[rng.randrange(len(p))] ^= 1 << rng.randrange(8)
            elif r == 2:
                p = p[:rng.randint(0, len(p))]
            elif r == 3:
                at = rng.randint(0, len(p))
                p[at:at] = rng.randbytes(rng.randint(1, 40))
            else:
                p = bytearray(wrap(rng.getrandbits(16), rng.randbytes(rng.randint(0, 300))))
                if rng.random() < 0.5 and len(p) > 8:
                    p[8] = 0x80
        return bytes(p[:1472 - 40]) or b"\x00"

    def base() -> bytes:
        r = rng.random()
        tci = rng.choice([None, None, rng.getrandbits(16)])
        if r < 0.15:
            return tb.datagram_frame(corrupt(mtu_payload(stim)), vlan=tci)
        if r < 0.75:
            return tb.datagram_frame(mtu_payload(stim), vlan=tci, opt_words=rng.choice([0, 0, 0, rng.randint(1, 10)]),
                                     zero_csum=rng.random() < 0.1)
        if r < 0.87:
            return icmp_frame(rng.randbytes(rng.choice([0, rng.randint(1, 64), rng.randint(1, 1400)])),
                              ident=rng.getrandbits(16), tci=tci, opt_words=rng.choice([0, 0, 2]))
        return arp_frame(tci=tci, spa=f"10.3.{rng.randint(0, 255)}.{rng.randint(1, 254)}")

    for i in range(n):
        frame = base()
        user = 0
        if rng.random() < 0.7:
            frame, user = mutate(frame, rng, tb.cfg)
            frame = frame or b"\x00"
        await tb.send(frame, user)
        if rng.random() < 0.005:
            await ClockCycles(dut.clk, rng.randint(1, 200))
    await tb.settle()
    fe = await tb.check()
    storm = dict(fe)
    # still serving: valid datagrams of every opcode, no loss allowed now
    tb.allow_full = False
    tb.set_rx_idle(0.0)
    tb.set_tx_backpressure(0.0)
    tb.coverage.clear()
    for payload in directed_payloads(tb.key_w // 8 - 1, tb.value_w // 8 - 1):
        await tb.send_datagram(payload)
    for _ in range(100):
        await tb.send_datagram(wrap(rng.getrandbits(16), stim.binary_body()))
    await tb.send(arp_frame())
    await tb.send(icmp_frame(b"still alive"))
    await tb.settle()
    fe = await tb.check()
    assert ALL_OPS <= set(tb.coverage)
    for name in ("rx_udp_payloads", "arp_replies", "icmp_replies"):
        assert fe[name] > storm[name], name
    assert fe["drop_fifo_full"] == storm["drop_fifo_full"], "frames lost after the storm"
    tb.log.info("fuzz: %d frames; outcomes %s", tb.sent,
                {k: v for k, v in fe.items() if v and k in ETH_COUNTERS[:C["drop_fifo_full"] + 1]})


# ------------------------------------------------------------------------------------------
# pytest
# ------------------------------------------------------------------------------------------

def _config(data_w, key_w=144, value_w=32, **extra):
    p = {"DATA_W": data_w, "KEY_W": key_w, "VALUE_W": value_w, "WAYS": 2, "ROWS": 16, "STASH": 2,
         "RULES": 2, "PRIO_W": 4, "HASH_SEED": DEFAULT_SEED, "TAG_W": 8,
         "RX_FIFO_BYTES": 8192, "RX_DESC_DEPTH": 16, "TX_BUF_BYTES": 4096}
    p.update(extra)
    return p


MAIN_TESTS = "run_directed|run_traffic|run_overload|run_config|run_admission|run_latency"

# (simulator, parameters, cocotb tests); the fuzz runs under Verilator (its build costs about a
# minute and a half, its run is many times faster than Icarus), on a small engine geometry that
# fills up, at DATA_W 64 by default (KV_TOP_FUZZ_W: a comma-separated list, e.g. "64,512")
FUZZ_WIDTHS = [int(w) for w in os.environ.get("KV_TOP_FUZZ_W", "64").split(",") if w.strip()]
CONFIGS = [
    ("icarus", _config(64), MAIN_TESTS),
    ("icarus", _config(512, 288, 64, RULES=3), MAIN_TESTS),
] + [("verilator", _config(w, RX_FIFO_BYTES=16384, RX_DESC_DEPTH=32), "run_fuzz") for w in FUZZ_WIDTHS]


def _config_id(sim: str, p: dict, tests: str) -> str:
    kind = "fuzz" if tests == "run_fuzz" else "main"
    return f"{sim}-d{p['DATA_W']}-k{p['KEY_W']}-v{p['VALUE_W']}-{kind}"


@pytest.mark.parametrize("sim,params,tests", CONFIGS, ids=[_config_id(*c) for c in CONFIGS])
def test_kv_top(sim: str, params: dict, tests: str) -> None:
    import tools

    saved = os.environ.get("COCOTB_TEST_FILTER")
    os.environ["COCOTB_TEST_FILTER"] = rf"\.({tests})$"
    try:
        tools.run_cocotb(sim, TOPLEVEL, __file__, tools.rtl_sources(*MODULES), params,
                         tools.BUILD_DIR / TOPLEVEL / _config_id(sim, params, tests),
                         seed=int(os.environ.get("KV_TOP_RANDOM_SEED", "20240605")),
                         params_env="KV_TOP_PARAMS",
                         build_args=("-Wno-fatal",) if sim == "verilator" else ())
    finally:
        if saved is None:
            os.environ.pop("COCOTB_TEST_FILTER", None)
        else:
            os.environ["COCOTB_TEST_FILTER"] = saved
