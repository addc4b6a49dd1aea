"""The virtual board: the Verilated kv_top answering memcached datagrams through its Ethernet port.

- bit-exact against the reference model (`handle_datagram` on the model backend, relocation off
  as the RTL data plane has none, with the reply budget the board resets with, M = 2): every reply
  payload and the datagram-layer counters, for random binary, text and malformed datagrams;
- admission and reply budget (frontend.md §10) on the wire: a table programmed through the
  registers (`Frontend.program_admission`), frames from denied sources dropped and counted,
  allowed ones answered as `handle_datagram_from` answers them, multi-get replies within budget;
- the board's frame counters account for every frame;
- host writes through the registers (KVEngine on the board's mailbox) are what the wire reads;
- the same differential tests as the software server against a real `memcached -U`, and a
  bounded `memcaslap -U` load with zero errors, through the UDP bridge (the board's table set to
  trust its one virtual source, as the software server trusts loopback).

One kv_top build (288-bit keys, 256-bit values, 4 x 1024 rows, 16 rules, 64-bit MAC) serves the
module; it is cached like every Verilator build (a first build takes a few minutes).
"""

from __future__ import annotations

import ipaddress
import random
import socket
import struct
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from pynq_kv import regmap as rm
from pynq_kv.appliance import Appliance
from pynq_kv.board import (BOARD_IP, BOARD_MAC, BOARD_UDP_PORT, QUIET_BASE, QUIET_PER_BYTE, BoardBackend,
                           VirtualBoard, board_engine)
from pynq_kv.engine import KVEngine
from pynq_kv.frontend import Frontend
from pynq_kv.geometry import Geometry
from pynq_kv.net import codec
from pynq_kv.net.eth import UdpDatagram, build_udp_frame, parse_frame
from pynq_kv.rules import Rule
from pynq_kv.serve.memcached.bridge import start_board_bridge
from pynq_kv.admission import DEFAULT_BUDGET, Admission, AdmissionEntry
from pynq_kv.serve.memcached.server import (DATAGRAM_COUNTERS, GUARD_COUNTERS, UdpServer,
                                            handle_datagram, handle_datagram_from)
from test_net_memcached import (  # noqa: F401  (memcached is a fixture)
    Peer,
    ServerThread,
    assert_clean_run,
    assert_same_binary,
    assert_same_text,
    bin_datagram,
    fresh,
    memcached,
    memcaslap,
    needs_memcaslap,
    write_config,
)

BOARD_GEOMETRY = Geometry(key_width=288, value_width=256, ways=4, rows=1024, stash=8, rules=16)
SETX = struct.pack(">II", 0, 0)
RESET_ADMISSION = Admission((), default_allow=True, default_budget=DEFAULT_BUDGET)  # kv_top's reset table


@pytest.fixture(scope="module")
def board_and_model() -> Iterator[tuple[VirtualBoard, KVEngine]]:
    engine = board_engine(BOARD_GEOMETRY)
    assert isinstance(engine.backend, BoardBackend)
    model = KVEngine("model", BOARD_GEOMETRY, relocation=False)
    yield engine.backend.board, model
    engine.close()


def _datagram(rng: random.Random, keys: list[bytes]) -> bytes:
    """A request datagram: binary requests (some malformed), or a text command block."""
    rid = struct.pack(">HHHH", rng.randrange(1 << 16), 0, 1, 0)
    if rng.random() < 0.2:
        key = rng.choice(keys)
        commands = [b"get %s %s\r\n" % (key, rng.choice(keys)), b"delete %s\r\n" % key,
                    b"set %s 0 0 %d\r\n%s\r\n" % (key, 3, b"xyz"), b"bogus\r\n",
                    b"set %s 0 0 40\r\n%s\r\n" % (key, b"v" * 40), b"version\r\n"]
        return rid + b"".join(rng.sample(commands, rng.randint(1, 3)))
    Op = codec.Opcode
    parts = []
    for i in range(rng.randint(1, 8)):
        key = rng.choice(keys)
        pick = rng.random()
        if pick < 0.35:
            parts.append(codec.get_request(key, opcode=rng.choice([Op.GET, Op.GETQ, Op.GETK, Op.GETKQ]),
                                           opaque=i).encode())
        elif pick < 0.6:
            value = bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 31, 32])))
            parts.append(codec.Request(Op.SETQ if rng.random() < 0.3 else Op.SET, key=key,
                                       extras=SETX, value=value, opaque=i).encode())
        elif pick < 0.75:
            parts.append(codec.delete_request(key, quiet=rng.random() < 0.3).encode())
        elif pick < 0.85:
            parts.append(codec.Request(Op(0xC0), key=key, opaque=i).encode())  # MATCH
        elif pick < 0.9:
            parts.append(codec.Request(Op.NOOP, opaque=i).encode())
        elif pick < 0.95:
            parts.append(bytes([0x80, 0x42]) + bytes(22))  # unknown opcode
        else:
            cut = codec.get_request(key).encode()
            parts.append(cut[:rng.randrange(1, len(cut))])  # truncated: ends the datagram
            break
    return rid + b"".join(parts)


def test_board_replies_are_the_reference_models(board_and_model) -> None:
    board, model = board_and_model
    rng = random.Random(20261122)
    keys = [b"k%d" % i for i in range(12)] + [b"x" * 35, b"y" * 36]  # 36 bytes: too long
    before = board.counters()
    ours: Counter = Counter()
    for n in range(300):
        payload = _datagram(rng, keys)
        expected = handle_datagram(model, payload, ours, budget=DEFAULT_BUDGET)
        got = board.exchange(payload, 40000 + n % 100)
        assert got == expected, (n, payload)
    after = board.counters()
    delta = {name: after[name] - before[name] for name in after}
    for name in DATAGRAM_COUNTERS + GUARD_COUNTERS:
        assert delta[name] == ours[name], name
    assert delta["rx_frames"] == delta["rx_udp_payloads"] == 300
    assert delta["tx_udp_replies"] == delta["tx_datagrams"] == ours["tx_datagrams"]
    assert board.unexpected_frames == 0


def test_host_writes_are_what_the_wire_reads(board_and_model) -> None:
    board, _ = board_and_model
    engine = KVEngine(_borrowed_backend(board), relocation=False)
    engine.set(b"from-host", b"hello")
    rule_id = engine.add_rule(Rule.ternary(int.from_bytes(b"\x05rule-", "big") << (8 * 30),
                                           (1 << 288) - (1 << (8 * 30)), 9, b"by-rule"))
    hdr = struct.pack(">HHHH", 77, 0, 1, 0)
    reply = board.exchange(hdr + codec.get_request(b"from-host").encode(), 5000)
    (response,) = codec.parse_responses(reply[0][8:])
    assert response.status == 0 and response.value == b"hello"
    reply = board.exchange(hdr + codec.Request(codec.Opcode(0xC0), key=b"rule-").encode(), 5000)
    (response,) = codec.parse_responses(reply[0][8:])
    assert response.status == 0 and response.value == b"by-rule"
    assert response.extras[0] == 2 and int.from_bytes(response.extras[4:], "big") in engine.rule_entries(rule_id)
    board.exchange(hdr + codec.Request(codec.Opcode.SET, key=b"from-wire", extras=SETX,
                                       value=b"world").encode(), 5000)
    assert engine.get(b"from-wire") == b"world"
    engine.delete(b"from-wire")
    engine.delete(b"from-host")
    engine.remove_rule(rule_id)


def _exchange_from(board: VirtualBoard, payload: bytes, src_ip: str, src_port: int = 7000) -> list[bytes]:
    """VirtualBoard.exchange from another source address: the replies the board sends to it."""
    src_mac = "02:00:00:00:00:09"
    board.device.eth_send(build_udp_frame(payload, src_mac=src_mac, dst_mac=BOARD_MAC, src_ip=src_ip,
                                          dst_ip=BOARD_IP, src_port=src_port, dst_port=BOARD_UDP_PORT))
    board.device.eth_run(QUIET_BASE + QUIET_PER_BYTE * len(payload), 200_000)
    replies = []
    while (out := board.device.eth_recv()) is not None:
        reply = parse_frame(out)
        assert isinstance(reply, UdpDatagram) and (reply.dst_ip, reply.dst_mac, reply.dst_port) == \
            (src_ip, src_mac, src_port), reply
        replies.append(reply.payload)
    return replies


def _entry(network: str, allow: bool, budget: int) -> AdmissionEntry:
    return AdmissionEntry(ipaddress.IPv4Network(network), allow, budget)


def test_admission_and_reply_budget_on_the_wire(board_and_model) -> None:
    board, model = board_and_model
    fe = Frontend(board.device)
    assert fe.admit_entries == 8
    assert fe.admission() == Admission((), True, 2)
    table = Admission((_entry("10.9.9.9/32", False, 0), _entry("10.9.0.0/16", True, 1),
                       _entry("10.8.0.0/15", True, 0), _entry("0.0.0.0/0", True, 3)),
                      default_allow=False)
    fe.program_admission(table)
    try:
        assert fe.admission() == table
        hdr = struct.pack(">HHHH", 9, 0, 1, 0)
        keys = [b"adm-%02d" % i for i in range(24)]
        ours: Counter = Counter()
        before = board.counters()
        for i in range(0, len(keys), 8):  # values of 31 bytes, from a trusted source, within the MTU
            setup = hdr + b"".join(codec.Request(codec.Opcode.SETQ, key=k, extras=SETX, value=b"%-31s" % k).encode()
                                   for k in keys[i:i + 8])
            assert _exchange_from(board, setup, "10.8.1.1") == \
                handle_datagram_from(model, setup, "10.8.1.1", table, ours) == []
        multi = hdr + b"".join(codec.get_request(k, opcode=codec.Opcode.GETKQ, opaque=i).encode()
                               for i, k in enumerate(keys)) + codec.Request(codec.Opcode.NOOP).encode()
        text = hdr + b"get " + b" ".join(keys) + b"\r\n"
        sources = ["10.9.9.9", "10.9.0.1", "10.9.255.255", "10.8.0.0", "10.9.9.8", "10.10.0.0", "192.0.2.1"]
        for src in sources:
            for payload in (multi, text):
                expected = handle_datagram_from(model, payload, src, table, ours)
                got = _exchange_from(board, payload, src)
                assert got == expected, (src, payload[:40])
                allowed, budget = table.decide(src)
                if not allowed:
                    assert got == []
                elif budget:  # within M x L, but for the one budget reply past it (frontend.md §10)
                    assert sum(map(len, got)) <= budget * len(payload) + 8 + 48, (src, budget)
        after = board.counters()
        delta = {name: after[name] - before[name] for name in after}
        for name in DATAGRAM_COUNTERS + GUARD_COUNTERS:
            assert delta[name] == ours[name], name
        assert delta["drop_denied"] == 2 and delta["budget_exceeded"] >= 4, delta
        assert delta["rx_udp_payloads"] == delta["drop_denied"] + delta["rx_datagrams"] == 2 * len(sources) + 3
        assert delta["tx_udp_replies"] == delta["tx_datagrams"]
    finally:
        fe.program_admission(RESET_ADMISSION)  # the module's other tests expect the reset table
    assert fe.admission() == Admission((), True, 2)


def _borrowed_backend(board: VirtualBoard):  # type: ignore[no-untyped-def]
    """A mailbox backend on the board's registers that does not close the board."""
    from pynq_kv.mailbox import MailboxBackend

    return MailboxBackend(board.device, name="rtl")


# -- through the UDP bridge: the same checks as the software server ---------------------------


@pytest.fixture(scope="module")
def board_peer() -> Iterator[Peer]:
    running = ServerThread(lambda: board_engine(BOARD_GEOMETRY), starter=start_board_bridge)
    peer = Peer("pynq-kv board", running.server.port)
    yield peer
    peer.close()
    stats = running.stats()
    running.close()
    assert stats["bridge"]["internal_errors"] == 0
    board = stats["board"]
    outcomes = sum(v for k, v in board.items() if k.startswith("drop_")) - sum(
        board[k] for k in ("drop_short", "drop_multi_datagram", "drop_bad_magic"))
    assert board["rx_frames"] == board["rx_udp_payloads"] + board["arp_replies"] + \
        board["icmp_replies"] + outcomes


def test_get_set_delete_noop_like_memcached(memcached: Peer, board_peer: Peer) -> None:
    key = fresh(b"board")
    Op = codec.Opcode
    out = assert_same_binary(memcached, board_peer, bin_datagram(
        codec.get_request(key), codec.set_request(key, b"v1"), codec.get_request(key, opcode=Op.GETK),
        codec.delete_request(key), codec.delete_request(key), codec.Request(Op.NOOP, opaque=5)))
    assert [r.status for r in out] == [1, 0, 0, 0, 1, 0, 0]


def test_quiet_multi_get_like_memcached(memcached: Peer, board_peer: Peer) -> None:
    keys = [fresh(b"mg") for _ in range(6)]
    Op = codec.Opcode
    assert_same_binary(memcached, board_peer, bin_datagram(
        *(codec.set_request(k, b"val-%d" % i, quiet=True) for i, k in enumerate(keys[::2]))))
    out = assert_same_binary(memcached, board_peer, bin_datagram(
        *(codec.get_request(k, opcode=Op.GETKQ, opaque=i) for i, k in enumerate(keys))))
    assert [r.key for r in out[:-1]] == keys[::2]


def test_text_subset_like_memcached(memcached: Peer, board_peer: Peer) -> None:
    a, b = fresh(b"ta"), fresh(b"tb")
    out = assert_same_text(memcached, board_peer, b"".join([
        b"set %s 0 0 3\r\nabc\r\n" % a, b"get %s %s\r\n" % (a, b), b"delete %s\r\n" % a,
        b"delete %s\r\n" % a, b"set %s 0 0 2 noreply\r\nzz\r\n" % b, b"get %s\r\n" % b]))
    assert out.count(b"VALUE") == 2


@needs_memcaslap
def test_memcaslap_against_the_virtual_board(tmp_path: Path) -> None:
    running = ServerThread(lambda: board_engine(BOARD_GEOMETRY), starter=start_board_bridge)
    try:
        stats, other = memcaslap(running.server.port, write_config(tmp_path / "cfg", 31), 2000)
        assert_clean_run(stats, other, 2000)
        served = running.stats()
        assert served["bridge"]["internal_errors"] == 0
        board = served["board"]
        assert board["errors"] == 0 and board["req_truncated"] == 0
        assert board["requests_text"] == board["served"] == board["rx_datagrams"] >= 2000
        assert running.appliance.engine.stats()["misses"] == 0
    finally:
        running.close()


def _bridge_with(admission: Admission):  # type: ignore[no-untyped-def]
    async def start(appliance: Appliance, host: str, port: int) -> UdpServer:
        return await start_board_bridge(appliance, host, port, admission=admission)
    return start


def _ask(port: int, payload: bytes, source: str) -> list[bytes]:
    """Send one datagram from source (a 127.0.0.x address) and gather its replies."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((source, 0))
        sock.settimeout(0.5)
        sock.sendto(payload, ("127.0.0.1", port))
        replies = []
        try:
            for _ in range(64):  # bounded: a multi-get answer is a few datagrams
                replies.append(sock.recv(65536))
        except socket.timeout:
            pass
        return replies


def test_the_bridge_puts_serves_table_on_the_board_per_client() -> None:
    """Through the bridge each datagram reaches the RTL from its client's own address, and the
    board's table is serve's: 127.0.0.2 denied (dropped and counted by the board), 127.0.0.3
    budgeted (a text multi-get cut by the RTL's budget reply), 127.0.0.1 trusted (answered
    whole) — frontend.md §10 in hardware, per client, with nothing decided on the host."""
    table = Admission((_entry("127.0.0.2/32", False, 0), _entry("127.0.0.1/32", True, 0)),
                      default_allow=True, default_budget=2)
    running = ServerThread(lambda: board_engine(BOARD_GEOMETRY), starter=_bridge_with(table))
    try:
        port = running.server.port
        hdr = struct.pack(">HHHH", 7, 0, 1, 0)
        keys = [b"pc%d" % i for i in range(12)]
        for k in keys:
            assert _ask(port, hdr + b"set %s 0 0 3\r\nabc\r\n" % k, "127.0.0.1") == [hdr + b"STORED\r\n"]
        multi_get = hdr + b"get " + b" ".join(keys) + b"\r\n"
        whole = b"".join(r[8:] for r in _ask(port, multi_get, "127.0.0.1"))
        assert whole.count(b"VALUE") == 12 and whole.endswith(b"END\r\n")
        before = running.stats()["board"]
        assert _ask(port, multi_get, "127.0.0.2") == []
        cut = _ask(port, multi_get, "127.0.0.3")
        assert sum(map(len, cut)) <= 2 * len(multi_get) + 8 + 64, cut  # §10's bound, small R
        assert b"".join(cut).endswith(b"SERVER_ERROR reply exceeds UDP budget; use TCP\r\n")
        after = running.stats()["board"]
        assert after["drop_denied"] - before["drop_denied"] == 1
        assert after["budget_exceeded"] - before["budget_exceeded"] == 1
        assert Frontend(running.appliance.engine.backend.board.device).admission() == table
    finally:
        running.close()


def test_the_board_counts_what_the_software_server_counts() -> None:
    assert set(DATAGRAM_COUNTERS + GUARD_COUNTERS) <= set(rm.FE_COUNTER_NAMES)
