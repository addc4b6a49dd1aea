"""The reply budget and admission of docs/frontend.md §10 in handle_datagram, against figures
worked out by hand from §10 (response sizes are written out below, not taken from the server).
"""

from __future__ import annotations

import ipaddress
import struct
from collections import Counter
from typing import Iterator, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.engine import KVEngine
from pynq_kv.admission import Admission, AdmissionEntry
from pynq_kv.serve.memcached.server import handle_datagram, handle_datagram_from

RID = 0x0102
HDR = struct.pack(">HHHH", RID, 0, 1, 0)
FLAGS0 = b"\x00" * 4
V31 = b"v" * 31  # MAX_VALUE of the default 256-bit values
BUDGET_TEXT = b"SERVER_ERROR reply exceeds UDP budget; use TCP\r\n"  # 48 bytes


def req(opcode: int, key: bytes = b"", extras: bytes = b"", value: bytes = b"",
        opaque: int = 0) -> bytes:
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body),
                       opaque, 0) + body


def rsp(opcode: int, status: int = 0, key: bytes = b"", extras: bytes = b"", value: bytes = b"",
        opaque: int = 0) -> bytes:
    body = extras + key + value
    return struct.pack(">BBHBBHIIQ", 0x81, opcode, len(key), len(extras), 0, status, len(body),
                       opaque, 0) + body


def busy(opcode: int, opaque: int) -> bytes:
    """The binary budget reply: 24-byte header + `Use TCP` = 31 bytes."""
    return rsp(opcode, 0x0085, value=b"Use TCP", opaque=opaque)


def pad(size: int) -> bytes:
    """GETKQ misses (no response) adding exactly size request bytes (size >= 25)."""
    out = b""
    while size:
        if size <= 24 + 35:
            key_len = size - 24
        elif size - 59 >= 25:
            key_len = 35
        else:
            key_len = size - 24 - 25  # leave exactly one shortest request
        assert key_len >= 1, size
        out += req(0x0D, b"~" * key_len)  # no key of the tests starts with "~"
        size -= 24 + key_len
    return out


@pytest.fixture
def engine() -> Iterator[KVEngine]:
    with KVEngine("model", rows=256) as e:  # 288-bit keys (35 bytes), 256-bit values (31 bytes)
        yield e


def test_pad_helper_adds_exact_bytes_and_no_reply(engine: KVEngine) -> None:
    for size in (25, 59, 60, 84, 466, 474):
        assert len(pad(size)) == size
        assert handle_datagram(engine, HDR + pad(size)) == []


def test_binary_cut_at_the_budget(engine: KVEngine) -> None:
    keys = [b"k%d" % i for i in range(4)]
    engine.mset({k: V31 for k in keys})
    body = b"".join(req(0x00, k, opaque=10 + i) for i, k in enumerate(keys))  # 4 x 26 bytes
    # L = 8 + 104 = 112, B = 224; a GET hit is 24 + 4 + 31 = 59 bytes:
    # S = 67, 126, 185, then 244 > 224: the fourth is replaced by the budget reply.
    c: Counter = Counter()
    got = handle_datagram(engine, HDR + body, c, budget=2)
    hit = [rsp(0x00, extras=FLAGS0, value=V31, opaque=10 + i) for i in range(3)]
    assert got == [HDR + b"".join(hit) + busy(0x00, 13)]
    assert len(got[0]) == 8 + 3 * 59 + 31 == 216
    assert (c["responses"], c["errors"], c["budget_exceeded"], c["tx_datagrams"]) == (4, 1, 1, 1)
    # without a budget, and at M = 3 (B = 336 >= 244), all four hits go
    whole = [HDR + b"".join(rsp(0x00, extras=FLAGS0, value=V31, opaque=10 + i) for i in range(4))]
    assert handle_datagram(engine, HDR + body) == whole
    assert handle_datagram(engine, HDR + body, c, budget=3) == whole
    assert c["budget_exceeded"] == 1


def test_budget_equal_to_s_is_packed(engine: KVEngine) -> None:
    engine.mset({b"a": V31, b"b": V31})
    body = req(0x00, b"a", opaque=1) + req(0x00, b"b", opaque=2)  # 2 x 25 bytes
    # S after the second hit: 8 + 2 x 59 = 126. L = 8 + 50 + pad; M = 1 -> B = L.
    exact = handle_datagram(engine, HDR + body + pad(126 - 58), budget=1)  # L = 126
    assert exact == [HDR + rsp(0, extras=FLAGS0, value=V31, opaque=1)
                     + rsp(0, extras=FLAGS0, value=V31, opaque=2)]
    short = handle_datagram(engine, HDR + body + pad(125 - 58), budget=1)  # L = 125
    assert short == [HDR + rsp(0, extras=FLAGS0, value=V31, opaque=1) + busy(0, 2)]


def test_first_response_is_always_packed(engine: KVEngine) -> None:
    engine.set(b"a", V31)
    c: Counter = Counter()
    # L = 8 + 25 = 33, B = 33 < S = 67: the first response goes anyway, no budget reply
    assert handle_datagram(engine, HDR + req(0x00, b"a", opaque=7), c, budget=1) == [
        HDR + rsp(0, extras=FLAGS0, value=V31, opaque=7)]
    assert c["budget_exceeded"] == 0 and c["errors"] == 0
    # a second GET: L = 58, B = 58; S = 67 (first, packed) then 126 > 58
    got = handle_datagram(engine, HDR + req(0x00, b"a", opaque=7) + req(0x0C, b"a", opaque=8),
                          c, budget=1)
    assert got == [HDR + rsp(0, extras=FLAGS0, value=V31, opaque=7) + busy(0x0C, 8)]
    assert c["budget_exceeded"] == 1


def test_a_response_that_opens_a_datagram_pays_its_header(engine: KVEngine) -> None:
    keys = [b"K" * 31 + b"%04d" % i for i in range(16)]  # 35-byte keys
    engine.mset({k: V31 for k in keys})
    body = b"".join(req(0x0C, k, opaque=i) for i, k in enumerate(keys))  # 16 x 59 = 944 bytes
    unit = 24 + 4 + 35 + 31  # a GETK hit: 94 bytes; 14 fill a datagram (1316 <= 1392 < 1410)
    hits = [rsp(0x0C, key=k, extras=FLAGS0, value=V31, opaque=i) for i, k in enumerate(keys)]
    assert all(len(h) == unit for h in hits)
    # After 14: 8 + 1316 = 1324 bytes. The 15th opens a datagram: S = 1324 + 8 + 94 = 1426.
    # L = 8 + 944 + 472 = 1424 < 1426 (it would pass without the header): cut at the 15th, and
    # the 31-byte budget reply still fits the first datagram.
    c: Counter = Counter()
    got = handle_datagram(engine, HDR + body + pad(472), c, budget=1)
    assert got == [HDR + b"".join(hits[:14]) + busy(0x0C, 14)]
    assert (c["responses"], c["tx_datagrams"], c["budget_exceeded"]) == (15, 1, 1)
    # L = 1426: the 15th is packed in a second datagram; the 16th (S = 1520) is cut there.
    got = handle_datagram(engine, HDR + body + pad(474), c, budget=1)
    assert got == [HDR + b"".join(hits[:14]), HDR + hits[14] + busy(0x0C, 15)]


def test_budget_reply_opens_a_datagram_when_the_current_is_full(engine: KVEngine) -> None:
    keys = [b"K" * 31 + b"%04d" % i for i in range(16)]
    engine.mset({k: V31 for k in keys})
    # 14 GETK hits (1316 bytes) + a NOOP (24) = 1340; +GETK hits of 94 no longer fit (1434).
    # Budget: 14 hits + NOOP packed: S = 8 + 1340 = 1348; next hit S = 1348 + 8 + 94 = 1450.
    # The budget reply (31) would make the datagram 1371 bytes: it still fits. Fill it with
    # more NOOPs first: 14 hits + 3 NOOPs = 1388; a budget reply (31) then needs a new datagram.
    body = (b"".join(req(0x0C, k, opaque=i) for i, k in enumerate(keys[:14]))
            + b"".join(req(0x0A, opaque=100 + j) for j in range(3))
            + req(0x0C, keys[14], opaque=14))
    hits = [rsp(0x0C, key=k, extras=FLAGS0, value=V31, opaque=i) for i, k in enumerate(keys)]
    noops = [rsp(0x0A, opaque=100 + j) for j in range(3)]
    length = 8 + len(body)  # 8 + 14 x 59 + 3 x 24 + 59 = 965; S of the last hit: 1396 + 8 + 94
    assert length == 965
    got = handle_datagram(engine, HDR + body + pad(1400 - length), budget=1)  # B = 1400 < 1498
    assert got == [HDR + b"".join(hits[:14]) + b"".join(noops), HDR + busy(0x0C, 14)]


def test_text_multi_get_cut(engine: KVEngine) -> None:
    keys = [b"k%02d" % i for i in range(10)]
    engine.mset({k: V31 for k in keys})
    line = b"get " + b" ".join(keys) + b"\r\n"  # 45 bytes: L = 53, B = 106 at M = 2
    unit = [b"VALUE %s 0 31\r\n%s\r\n" % (k, V31) for k in keys]  # 49 bytes each
    assert len(line) == 45 and all(len(u) == 49 for u in unit)
    c: Counter = Counter()
    # S = 57, 106 (<= 106), 155: the third unit and END are replaced by the budget reply
    got = handle_datagram(engine, HDR + line, c, budget=2)
    assert got == [HDR + unit[0] + unit[1] + BUDGET_TEXT]
    assert len(got[0]) <= max(2 * 53, 8 + 49) + 8 + 48  # the bound of §10
    assert (c["responses"], c["errors"], c["budget_exceeded"], c["requests_text"]) == (3, 1, 1, 1)
    assert handle_datagram(engine, HDR + line) == [HDR + b"".join(unit) + b"END\r\n"]


def test_requests_after_the_cut_still_run(engine: KVEngine) -> None:
    engine.mset({b"a": V31, b"b": V31, b"y": b"old", b"z": b"old"})
    text = b"get a b\r\nset x 0 0 3\r\nnew\r\ndelete y\r\n"
    got = handle_datagram(engine, HDR + text, budget=1)  # L = 50: only the first unit fits
    assert got == [HDR + b"VALUE a 0 31\r\n" + V31 + b"\r\n" + BUDGET_TEXT]
    assert engine.get(b"x") == b"new" and engine.get(b"y") is None
    binary = (req(0x00, b"a", opaque=1) + req(0x00, b"b", opaque=2)
              + req(0x01, b"w", struct.pack(">II", 0, 0), b"bin", opaque=3)
              + req(0x04, b"z", opaque=4))
    got = handle_datagram(engine, HDR + binary, budget=1)
    assert got == [HDR + rsp(0, extras=FLAGS0, value=V31, opaque=1) + busy(0, 2)]
    assert engine.get(b"w") == b"bin" and engine.get(b"z") is None


def test_quiet_and_trusted_datagrams_are_untouched(engine: KVEngine) -> None:
    keys = [b"k%02d" % i for i in range(40)]
    engine.mset({k: V31 for k in keys})
    line = b"get " + b" ".join(keys) + b"\r\n"
    c: Counter = Counter()
    assert handle_datagram(engine, HDR + line, c, budget=0) == handle_datagram(engine, HDR + line)
    assert c["budget_exceeded"] == 0
    # a SETQ-only datagram has nothing to say, budget or not
    assert handle_datagram(engine, HDR + req(0x11, b"q", struct.pack(">II", 0, 0), b"1"),
                           c, budget=1) == []


def test_amplification_of_a_64k_multi_get_is_bounded(engine: KVEngine) -> None:
    """The issue's attack: one ~64,000-byte `get a a a ...` of a key that exists."""
    engine.set(b"a", V31)
    line = b"get" + b" a" * 31_995 + b"\r\n"
    payload = HDR + line
    assert 63_990 <= len(payload) <= 65_507
    unbounded = handle_datagram(engine, payload)
    assert sum(map(len, unbounded)) > 20 * len(payload)  # the control: the test can fail
    c: Counter = Counter()
    bounded = handle_datagram(engine, payload, c, budget=2)
    total = sum(map(len, bounded))
    largest = 14 + 31 + 2  # `VALUE a 0 31\r\n` + data + CRLF
    assert total <= max(2 * len(payload), 8 + largest) + 8 + len(BUDGET_TEXT)
    assert total > 2 * len(payload) - 1400  # the budget is used, not refused outright
    assert bounded[-1].endswith(BUDGET_TEXT) and c["budget_exceeded"] == 1
    units = b"".join(d[8:] for d in bounded).count(b"VALUE a 0 31\r\n")
    assert c["responses"] == units + 1 and c["errors"] == 1


def test_admission_drops_before_the_datagram_layer(engine: KVEngine) -> None:
    engine.set(b"a", b"1")
    table = Admission((AdmissionEntry(ipaddress.IPv4Network("10.0.0.0/8"), False, 0),
                       AdmissionEntry(ipaddress.IPv4Network("192.168.0.0/16"), True, 2),
                       AdmissionEntry(ipaddress.IPv4Network("172.16.0.0/12"), True, 1)),
                      default_allow=False, default_budget=2)
    c: Counter = Counter()
    get_a = HDR + b"get a\r\n"
    set_b = HDR + b"set b 0 0 1\r\n2\r\n"
    assert handle_datagram_from(engine, set_b, "10.1.2.3", table, c) == []
    assert handle_datagram_from(engine, get_a, "8.8.8.8", table, c) == []  # default deny
    assert handle_datagram_from(engine, get_a, "2001:db8::1", table, c) == []  # IPv6: denied
    assert engine.get(b"b") is None  # the denied SET never ran
    assert (c["drop_denied"], c["rx_datagrams"], c["served"]) == (3, 0, 0)
    assert handle_datagram_from(engine, get_a, "192.168.7.7", table, c) == [
        HDR + b"VALUE a 0 1\r\n1\r\nEND\r\n"]
    assert handle_datagram_from(engine, get_a, "::ffff:192.168.7.7", table, c) != []
    assert (c["drop_denied"], c["rx_datagrams"], c["served"]) == (3, 2, 2)
    # the entry's M is the one applied: L = 15; at M = 1 the END (S = 29 > 15) is cut
    assert handle_datagram_from(engine, get_a, "172.16.0.9", table, c) == [
        HDR + b"VALUE a 0 1\r\n1\r\n" + BUDGET_TEXT]
    assert c["budget_exceeded"] == 1


_KEYS = [b"a", b"bb", b"K" * 35, b"x" * 36]  # the last is too long: an error response
_TEXT = st.lists(st.sampled_from(
    [b"get a bb a a\r\n", b"get " + _KEYS[2] + b"\r\n", b"set a 0 0 3\r\nnew\r\n",
     b"set bb 0 0 31\r\n" + V31 + b"\r\n", b"delete a\r\n", b"bogus\r\n", b"version\r\n",
     b"get " + _KEYS[3] + b"\r\n", b"set zz 0 0 1 noreply\r\nq\r\n"]), min_size=1, max_size=12)
_BINARY = st.lists(st.tuples(st.sampled_from([0x00, 0x09, 0x0C, 0x0D, 0x01, 0x11, 0x04, 0x14,
                                              0x0A, 0xC0, 0x42]),
                             st.sampled_from(_KEYS)), min_size=1, max_size=40)


def _binary_body(ops: list[tuple[int, bytes]]) -> bytes:
    out = b""
    for i, (opcode, key) in enumerate(ops):
        if opcode in (0x01, 0x11):
            out += req(opcode, key, struct.pack(">II", 0, 0), V31[:i % 32], opaque=i)
        elif opcode == 0x0A:
            out += req(opcode, opaque=i)
        else:
            out += req(opcode, key, opaque=i)
    return out


def _state(engine: KVEngine) -> list[Optional[bytes]]:
    return [engine.get(k) for k in _KEYS[:3] + [b"zz"]]


@settings(max_examples=150, deadline=None)
@given(body=st.one_of(_TEXT.map(b"".join), _BINARY.map(_binary_body)),
       budget=st.integers(1, 4))
def test_budgeted_replies_are_a_prefix_within_the_bound(body: bytes, budget: int) -> None:
    """Any datagram: the budgeted replies are the unbudgeted ones cut at a response boundary
    plus one budget reply, within max(M x L, 8 + R) + 8 + E bytes, and the table ends the same."""
    with KVEngine("model", rows=64) as plain, KVEngine("model", rows=64) as guarded:
        for e in (plain, guarded):
            e.mset({b"a": b"1", b"bb": V31, _KEYS[2]: V31})
        payload = HDR + body
        c: Counter = Counter()
        full = handle_datagram(plain, payload)
        cut = handle_datagram(guarded, payload, c, budget=budget)
        assert _state(plain) == _state(guarded)  # every request ran
        whole, got = b"".join(d[8:] for d in full), b"".join(d[8:] for d in cut)
        binary = body[0] == 0x80
        reply = BUDGET_TEXT if not binary else None
        if c["budget_exceeded"]:
            if binary:
                reply = got[-31:]
                assert reply[6:8] == b"\x00\x85" and reply[24:] == b"Use TCP"
            assert reply is not None and got.endswith(reply)
            kept = got[:-len(reply)]
            assert whole.startswith(kept) and len(kept) < len(whole)
            assert c["responses"] >= 2 and c["errors"] >= 1
        else:
            assert cut == full
        total = sum(map(len, cut))
        largest = 24 + 4 + 35 + 31  # a GETK hit of the longest key is the largest response
        assert total <= max(budget * len(payload), 8 + largest) + 8 + 48
        assert all(len(d) <= 1400 for d in cut)
