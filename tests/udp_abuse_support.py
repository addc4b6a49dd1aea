"""Abuse scenarios of the memcached/UDP port (issue 16), run over real loopback sockets.

tests/test_udp_abuse.py runs these against an in-process server with any admission table; the
abuse suite's udp_amplification and udp_denied_source scenarios (tests/abuse_scenarios.py, run
by benchmarks/abuse.py) send the same datagrams (text_multi_get, binary_multi_get, exchange,
pending) to a real `pynq-kv serve` and hold them to amplification_bound. Each scenario starts the software UDP server (`start_udp_server`, a model engine) on
127.0.0.1 in a thread of its own with an explicit admission table (frontend.md §10), attacks it
from client sockets, and reports what a victim or the server saw:

- `run_amplification`: reflection. Multi-get datagrams of about `request_bytes` (text
  `get a a a ...`, binary GETKQ a ... NOOP) of a key that exists; the bytes that came back to
  the sender over the bytes sent, against the bound of §10.
- `run_denied_source`: a source the table denies sends writes and reads; nothing reaches it,
  nothing it wrote exists, every datagram is counted in `drop_denied`, and an allowed client
  beside it is answered. Needs 127.0.0.2 on loopback (Linux routes all of 127.0.0.0/8 there).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import struct
import threading
import time
from typing import Any, Callable, Optional, TypeVar

from pynq_kv.appliance import Appliance
from pynq_kv.engine import KVEngine
from pynq_kv.admission import Admission, AdmissionEntry
from pynq_kv.serve.memcached.server import UdpServer, start_udp_server

T = TypeVar("T")
KEY = b"a"
VALUE = b"v" * 31  # MAX_VALUE of the default 256-bit values: the most reply per key
LARGEST_RESPONSE = 234  # frontend.md §3: a GETK hit with a 143-byte key and a 63-byte value
LARGEST_BUDGET_REPLY = 48  # the text budget reply (the binary one is 31 bytes)
QUIET = 0.3  # seconds without a datagram that end a reply
FIRST = 20.0  # seconds the first reply datagram may take
CLIENT_RCVBUF = 8 << 20


class _Served:
    """start_udp_server on its own event loop thread, over a fresh model engine."""

    def __init__(self, admission: Admission) -> None:
        self.appliance = Appliance(lambda: KVEngine("model", rows=256))
        self.loop = asyncio.new_event_loop()
        self.server: UdpServer = self.loop.run_until_complete(
            start_udp_server(self.appliance, "127.0.0.1", 0, admission=admission))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on the loop's thread (the engine belongs to it)."""
        async def run() -> T:
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()
        self.appliance.close()


def udp_client(source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RCVBUF)
    sock.bind((source, 0))
    return sock


def exchange(sock: socket.socket, port: int, payload: bytes,
             sent: Optional[Callable[[], int]] = None) -> list[bytes]:
    """Send one datagram; the datagrams that come back until the line is quiet.

    The first reply may take a while on a loaded machine (a 64 KB multi-get is 32,000 engine
    reads). With sent (the server's count of reply datagrams since the send), a quiet line
    only ends the wait once that many have come back, or after FIRST seconds in all.
    """
    deadline = time.monotonic() + FIRST
    sock.sendto(payload, ("127.0.0.1", port))
    sock.settimeout(FIRST)
    replies: list[bytes] = []
    while True:
        try:
            data, _ = sock.recvfrom(65536)
        except socket.timeout:
            if sent is None or len(replies) >= sent() or time.monotonic() > deadline:
                return replies
            continue
        sock.settimeout(QUIET)
        if data[:2] == payload[:2]:
            replies.append(data)


def pending(sock: socket.socket) -> int:
    """Datagrams already waiting on sock (read without blocking)."""
    sock.setblocking(False)
    count = 0
    try:
        while True:
            sock.recvfrom(65536)
            count += 1
    except BlockingIOError:
        return count
    finally:
        sock.setblocking(True)


def text_multi_get(request_id: int, size: int) -> bytes:
    count = max(1, (size - 8 - 5) // 2)  # "get" + " a" x count + "\r\n"
    return struct.pack(">HHHH", request_id, 0, 1, 0) + b"get" + b" a" * count + b"\r\n"


def binary_multi_get(request_id: int, size: int) -> bytes:
    getkq = struct.pack(">BBHBBHIIQ", 0x80, 0x0D, len(KEY), 0, 0, 0, len(KEY), 0, 0) + KEY
    noop = struct.pack(">BBHBBHIIQ", 0x80, 0x0A, 0, 0, 0, 0, 0, 0, 0)
    count = max(1, (size - 8 - len(noop)) // len(getkq))
    return struct.pack(">HHHH", request_id, 0, 1, 0) + getkq * count + noop


def amplification_bound(request_length: int, budget: int) -> Optional[float]:
    """The most reply bytes per request byte frontend.md §10 allows; None without a budget."""
    if budget == 0:
        return None
    most = max(budget * request_length, 8 + LARGEST_RESPONSE) + 8 + LARGEST_BUDGET_REPLY
    return most / request_length


def run_amplification(request_bytes: int = 64_000, budget: int = 2, *,
                      rounds: int = 1) -> dict[str, Any]:
    """Reflection through multi-gets of about request_bytes at budget M (0: none, the control).

    Every source is allowed with M = budget (no trusted entry, so loopback is budgeted too).
    """
    if not 8 + 24 + 26 <= request_bytes <= 65_507:
        raise ValueError(f"request_bytes must be 58..65507, got {request_bytes}")
    served = _Served(Admission((), default_allow=True, default_budget=budget))
    results: list[dict[str, Any]] = []
    try:
        served.call(served.appliance.engine.set, KEY, VALUE)
        with udp_client() as sock:
            for n in range(rounds):
                for kind, build in (("text", text_multi_get), ("binary", binary_multi_get)):
                    payload = build(0x100 + 2 * n + (kind == "binary"), request_bytes)
                    before = served.call(served.server.stats)["tx_datagrams"]

                    def sent(before: int = before) -> int:
                        return served.call(served.server.stats)["tx_datagrams"] - before

                    replies = exchange(sock, served.server.port, payload, sent)
                    got = sum(map(len, replies))
                    results.append({"kind": kind, "request_bytes": len(payload),
                                    "reply_bytes": got, "reply_datagrams": len(replies),
                                    "amplification": got / len(payload),
                                    "bound": amplification_bound(len(payload), budget)})
        stats = served.call(served.server.stats)
    finally:
        served.close()
    bounds = [r["bound"] for r in results]
    return {
        "scenario": "udp_amplification",
        "budget": budget,
        "inputs": len(results),
        "amplification_max": max(float(r["amplification"]) for r in results),
        "amplification_bound": None if budget == 0 else max(float(b) for b in bounds),
        "budget_exceeded": stats["budget_exceeded"],
        "crashes": stats["internal_errors"],
        "details": results,
    }


def run_denied_source(datagrams: int = 100, *, denied: str = "127.0.0.2",
                      allowed: str = "127.0.0.1") -> dict[str, Any]:
    """A denied source writes and reads; an allowed one beside it reads what exists."""
    host = ipaddress.IPv4Network(f"{denied}/32")
    table = Admission((AdmissionEntry(host, False, 0),
                       AdmissionEntry(ipaddress.IPv4Network(f"{allowed}/32"), True, 2)),
                      default_allow=False, default_budget=2)
    served = _Served(table)
    try:
        served.call(served.appliance.engine.set, KEY, VALUE)
        with udp_client(denied) as attacker, udp_client(allowed) as control:
            start = time.monotonic()
            for n in range(datagrams):
                header = struct.pack(">HHHH", n & 0xFFFF, 0, 1, 0)
                body = (b"set d%d 0 0 1\r\nx\r\ndelete a\r\nget a\r\n" % n if n % 2 == 0 else
                        struct.pack(">BBHBBHIIQ", 0x80, 0x04, 1, 0, 0, 0, 1, 0, 0) + KEY)
                attacker.sendto(header + body, ("127.0.0.1", served.server.port))
            # One thread answers datagrams in arrival order and sends a reply before it reads
            # the next datagram: once the control's answer is here, any reply to the attacker
            # is already in the attacker's socket.
            get = struct.pack(">BBHBBHIIQ", 0x80, 0x00, 1, 0, 0, 0, 1, 9, 0) + KEY
            answer = exchange(control, served.server.port, struct.pack(">HHHH", 7, 0, 1, 0) + get)
            elapsed = time.monotonic() - start
            denied_replies = pending(attacker)
        engine = served.appliance.engine
        written = sum(served.call(engine.get, b"d%d" % n) is not None
                      for n in range(0, datagrams, 2))
        key_survived = served.call(engine.get, KEY) == VALUE
        stats = served.call(served.server.stats)
    finally:
        served.close()
    return {
        "scenario": "udp_denied_source",
        "inputs": datagrams,
        "drop_denied": stats["drop_denied"],
        "denied_replies": denied_replies,
        "denied_writes_applied": written,
        "keys_lost": 0 if key_survived else 1,
        "allowed_answered": answer == [struct.pack(">HHHH", 7, 0, 1, 0) + struct.pack(
            ">BBHBBHIIQ", 0x81, 0x00, 0, 4, 0, 0, 4 + len(VALUE), 9, 0) + b"\0" * 4 + VALUE],
        "rx_datagrams": stats["rx_datagrams"],
        "crashes": stats["internal_errors"],
        "seconds": elapsed,
    }
