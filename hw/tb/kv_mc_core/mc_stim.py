"""Stimulus and reference model shared by the memcached front-end testbenches.

`McModel` is the reference: `pynq_kv.serve.memcached.server.handle_datagram_from` (admission and
reply budget of frontend.md §10, then `handle_datagram`) on a model `KVEngine` of the same geometry
(relocation off, as the RTL data plane never relocates: frontend.md §5), with the admission table
the RTL holds (`RESET_ADMISSION` after reset). `admission_signals` is a table as kv_mc_core's
cfg_admit_* inputs carry it.
`Stim` makes UDP payloads for docs/frontend.md §3-§6: binary datagrams of every opcode, with
quiet ops, NOOP-terminated multi-gets and every malformation of §4.1; text datagrams of the
§6 subset with its error cases; datagram-level faults (short, multi-datagram, empty body,
truncation, bad magic).
"""

from __future__ import annotations

import ipaddress
import random
import struct
from collections import Counter

from pynq_kv.engine import KVEngine
from pynq_kv.geometry import Geometry
from pynq_kv.net.codec import HEADER, Opcode, Request
from pynq_kv.admission import DEFAULT_BUDGET, Admission
from pynq_kv.serve.memcached.server import DATAGRAM_COUNTERS, GUARD_COUNTERS, handle_datagram_from
from pynq_kv.net.udpframe import wrap

PRINTABLE = bytes(range(0x21, 0x7F))
CORE_COUNTERS = DATAGRAM_COUNTERS + GUARD_COUNTERS  # kv_mc_core's counters, in its order
RESET_ADMISSION = Admission((), default_allow=True, default_budget=DEFAULT_BUDGET)  # the RTL's reset table
TRUSTED = Admission((), default_allow=True, default_budget=0)  # everyone, no budget


class McModel:
    """The reference front-end: replies and counters for each datagram, in order."""

    def __init__(self, geometry: Geometry, admission: Admission = RESET_ADMISSION) -> None:
        self.engine = KVEngine(backend="model", geometry=geometry, relocation=False)
        self.counters: Counter = Counter()
        self.admission = admission

    def datagram(self, payload: bytes, source: int, admission: Admission | None = None) -> list[bytes]:
        """The replies to payload from IPv4 source (an integer, as the metadata carries it),
        decided by admission (default: the model's current table)."""
        return handle_datagram_from(self.engine, payload, str(ipaddress.IPv4Address(source)),
                                    admission or self.admission, self.counters)

    def datagram_counters(self) -> dict[str, int]:
        return {name: self.counters[name] for name in CORE_COUNTERS}


def admission_signals(admission: Admission, entries: int) -> dict[str, int]:
    """kv_mc_core's cfg_admit_* values for a table (entry i in bits i, 32i.., 8i..; the prefix
    length as a mask of that many ones from bit 31); unused entries are not valid."""
    assert len(admission.entries) <= entries
    out = {"valid": 0, "allow": 0, "addr": 0, "mask": 0, "budget": 0,
           "def_allow": int(admission.default_allow), "def_budget": admission.default_budget}
    for i, e in enumerate(admission.entries):
        out["valid"] |= 1 << i
        out["allow"] |= int(e.allow) << i
        out["addr"] |= int(e.network.network_address) << (32 * i)
        out["mask"] |= int(e.network.netmask) << (32 * i)
        out["budget"] |= e.budget << (8 * i)
    return out


class Stim:
    """Random memcached UDP payloads over a small key pool (so hits, misses and FULL happen)."""

    BIN_MIX = {"get": 14, "getq": 5, "getk": 6, "getkq": 5, "set": 14, "setq": 5, "delete": 6,
               "deleteq": 3, "noop": 3, "version": 2, "match": 8, "bad": 10}
    TEXT_MIX = {"get": 10, "set": 10, "delete": 5, "version": 1, "bad": 4}

    def __init__(self, rng: random.Random, key_width: int, value_width: int, pool: int = 40,
                 avoid: tuple[bytes, ...] = ()) -> None:
        self.rng = rng
        self.max_key = key_width // 8 - 1
        self.max_value = value_width // 8 - 1
        keys: set[bytes] = set()
        while len(keys) < pool:
            n = rng.randint(1, self.max_key)
            key = bytes(rng.choice(PRINTABLE) for _ in range(n))
            if key not in avoid:
                keys.add(key)
        self.keys = sorted(keys)

    # -- pieces ---------------------------------------------------------------------------
    def key(self) -> bytes:
        return self.rng.choice(self.keys)

    def long_key(self) -> bytes:
        return bytes(self.rng.choice(PRINTABLE) for _ in range(self.max_key + self.rng.randint(1, 6)))

    def value(self) -> bytes:
        return self.rng.randbytes(self.rng.randint(0, self.max_value))

    def opaque(self) -> int:
        return self.rng.getrandbits(32)

    # -- binary (frontend.md §4) ----------------------------------------------------------
    def binary_request(self, kind: str | None = None) -> bytes:
        rng = self.rng
        if kind is None:
            kind = rng.choices(list(self.BIN_MIX), weights=list(self.BIN_MIX.values()))[0]
        op = {"get": Opcode.GET, "getq": Opcode.GETQ, "getk": Opcode.GETK, "getkq": Opcode.GETKQ,
              "delete": Opcode.DELETE, "deleteq": Opcode.DELETEQ, "match": Opcode.MATCH}
        if kind in op:
            return Request(op[kind], self.key(), opaque=self.opaque()).encode()
        if kind in ("set", "setq"):
            return Request(Opcode.SET if kind == "set" else Opcode.SETQ, self.key(),
                           struct.pack(">II", 0, 0), self.value(), opaque=self.opaque()).encode()
        if kind == "noop":
            return Request(Opcode.NOOP, opaque=self.opaque()).encode()
        if kind == "version":
            return Request(Opcode.VERSION, opaque=self.opaque()).encode()
        return self.bad_binary_request()

    def bad_binary_request(self) -> bytes:
        """A well-framed request that §4.1 steps 4-10 refuse (or that is oversized)."""
        rng = self.rng
        o = self.opaque()
        case = rng.randrange(13)
        if case == 0:  # key too long (GET family / DELETE / MATCH)
            return Request(rng.choice([0x00, 0x09, 0x0C, 0x0D, 0x04, 0xC0]), self.long_key(), opaque=o).encode()
        if case == 1:  # unknown opcode, any shape
            code = rng.choice([0x02, 0x03, 0x05, 0x07, 0x08, 0x10, 0x12, 0x20, 0x81, 0xC1, 0xFF])
            return Request(code, rng.choice([b"", self.key()]), rng.choice([b"", b"\0" * 4]),
                           rng.choice([b"", self.value()]), opaque=o).encode()
        if case == 2:  # CAS on SET / DELETE
            if rng.random() < 0.5:
                return Request(Opcode.SET, self.key(), b"\0" * 8, self.value(), opaque=o,
                               cas=rng.getrandbits(64) | 1).encode()
            return Request(Opcode.DELETE, self.key(), opaque=o, cas=rng.getrandbits(64) | 1).encode()
        if case == 3:  # flags / expiration
            fe = rng.choice([(1, 0), (0, 1), (0xFFFFFFFF, 0), (0, 0x80000000)])
            return Request(rng.choice([Opcode.SET, Opcode.SETQ]), self.key(), struct.pack(">II", *fe),
                           self.value(), opaque=o).encode()
        if case == 4:  # value too large (sometimes far too large: skipped by the walker)
            big = self.max_value + rng.choice([1, 2, 5, 40, 120])
            return Request(rng.choice([Opcode.SET, Opcode.SETQ]), self.key(), b"\0" * 8,
                           rng.randbytes(big), opaque=o).encode()
        if case == 5:  # extras on a GET, key on a NOOP / VERSION, value on a GET / DELETE
            c = rng.randrange(4)
            if c == 0:
                return Request(Opcode.GET, self.key(), b"\0" * 4, opaque=o).encode()
            if c == 1:
                return Request(rng.choice([Opcode.NOOP, Opcode.VERSION]), self.key(), opaque=o).encode()
            if c == 2:
                return Request(rng.choice([Opcode.GET, Opcode.DELETE, Opcode.MATCH]), self.key(),
                               value=b"v", opaque=o).encode()
            return Request(Opcode.NOOP, extras=b"\0" * 8, opaque=o).encode()
        if case == 6:  # empty key
            return Request(rng.choice([0x00, 0x01, 0x04, 0x0C, 0xC0]), b"",
                           b"\0" * 8 if rng.random() < 0.5 else b"", opaque=o).encode()
        if case == 7:  # SET with wrong extras length
            return Request(Opcode.SET, self.key(), b"\0" * rng.choice([0, 4, 12]), self.value(), opaque=o).encode()
        if case == 8:  # extras + key > body: header says so, the body is what the header claims
            body = rng.randint(0, 6)
            key_len = body + rng.randint(1, 4)
            hdr = HEADER.pack(0x80, rng.choice([0x00, 0x01, 0x0A, 0x55]), key_len, 0, 0, 0, body, o, 0)
            return hdr + rng.randbytes(body)
        if case == 9:  # a huge GET key (a K_BIG request)
            return Request(Opcode.GET, bytes(rng.choice(PRINTABLE) for _ in range(rng.randint(60, 200))),
                           opaque=o).encode()
        if case == 10:  # a huge SET with flags (0x0004, not 0x0003)
            return Request(Opcode.SET, self.key(), struct.pack(">II", 7, 0), rng.randbytes(150), opaque=o).encode()
        if case == 11:  # data type / vbucket are ignored
            return Request(Opcode.GET, self.key(), opaque=o, data_type=rng.randrange(256),
                           vbucket=rng.randrange(65536)).encode()
        return Request(Opcode.VERSION, opaque=o, cas=rng.getrandbits(64)).encode()  # CAS ignored here

    def binary_body(self, n: int | None = None) -> bytes:
        rng = self.rng
        if n is None:
            n = rng.choice([1, 1, 1, 2, 3, 5, 8])
        if rng.random() < 0.15:  # a multi-get: quiet GETs then NOOP
            reqs = [self.binary_request(rng.choice(["getq", "getkq"])) for _ in range(n)]
            reqs.append(self.binary_request("noop"))
        else:
            reqs = [self.binary_request() for _ in range(n)]
        body = b"".join(reqs)
        fault = rng.random()
        if fault < 0.06:  # truncated in the last request
            body = body[:rng.randrange(len(body) - len(reqs[-1]), len(body))]
        elif fault < 0.10:  # a bad magic somewhere after the first request
            at = len(reqs[0])
            body = body[:at] + bytes([rng.choice([0x00, 0x81, 0x7F, 0x67])]) + body[at + 1:]
        return body

    # -- text (frontend.md §6) -------------------------------------------------------------
    def text_key(self) -> bytes:
        return self.long_key() if self.rng.random() < 0.05 else self.key()

    def text_command(self) -> bytes:
        rng = self.rng
        kind = rng.choices(list(self.TEXT_MIX), weights=list(self.TEXT_MIX.values()))[0]
        sp = (lambda: b" " * rng.choice([1, 1, 1, 2])) if rng.random() < 0.3 else (lambda: b" ")
        eol = rng.choice([b"\r\n", b"\r\n", b"\r\n", b"\n"])
        if kind == "get":
            keys = [self.text_key() for _ in range(rng.choice([1, 1, 2, 3, 5]))]
            cmd = rng.choice([b"get", b"get", b"get", b"gets", b"GET"])
            return cmd + b"".join(sp() + k for k in keys) + (b" " if rng.random() < 0.1 else b"") + eol
        if kind == "set":
            data = self.value()
            nbytes = len(data)
            flags, exptime = b"0", b"0"
            case = rng.randrange(14)
            if case == 0:
                data = rng.randbytes(self.max_value + rng.randint(1, 5))
                nbytes = len(data)
            elif case == 1:
                flags = rng.choice([b"1", b"65535", b"0000000007"])
            elif case == 2:
                exptime = rng.choice([b"-1", b"30", b"-0", b"000"])
            elif case == 3:
                flags = rng.choice([b"x", b"-1", b"12345678901", b""])
            elif case == 4:
                nbytes = nbytes + rng.choice([-1, 1]) if nbytes else 1  # block does not end in \r\n
            elif case == 5:
                exptime = rng.choice([b"-", b"1-", b"--1"])
            key = self.text_key()
            tokens = [b"set", key, flags, exptime, str(nbytes).encode()]
            if case == 3 and not flags:
                tokens.pop(2)  # wrong token count
            if rng.random() < 0.25:
                tokens.append(rng.choice([b"noreply", b"noreply", b"junk"]))
            line = sp().join(tokens) + eol
            block = data + (b"\r\n" if rng.random() < 0.93 else rng.choice([b"\n\r", b"xy"]))
            return line + block
        if kind == "delete":
            extra = rng.choice([[], [], [b"0"], [b"noreply"], [b"0", b"noreply"], [b"1"],
                                [b"noreply", b"0"], [b"0", b"noreply", b"x"]])
            return b" ".join([b"delete", self.text_key()] + extra) + eol
        if kind == "version":
            return rng.choice([b"version", b"version", b"version x"]) + eol
        return rng.choice([b"", b"foo", b"stats", b"get", b"set a 0 0", b"delete",
                           b"\x80\x00", b"incr a 1", b" ", b"get\ta"]) + eol

    def text_body(self, n: int | None = None) -> bytes:
        rng = self.rng
        if n is None:
            n = rng.choice([1, 1, 1, 2, 3])
        body = b"".join(self.text_command() for _ in range(n))
        if body[:1] == b"\x80":
            body = b"x" + body
        if rng.random() < 0.08 and len(body) > 1:  # cut inside the last command
            body = body[:rng.randrange(max(1, len(body) - 12), len(body))]
        return body

    # -- datagrams (frontend.md §3) ---------------------------------------------------------
    def payload(self, text_share: float = 0.25) -> bytes:
        rng = self.rng
        rid = rng.getrandbits(16)
        r = rng.random()
        if r < 0.02:
            return rng.randbytes(rng.randint(1, 7))  # shorter than the frame header
        if r < 0.04:
            return wrap(rid, self.binary_body(), sequence=rng.getrandbits(16),
                        total=rng.choice([0, 2, 3, 0xFFFF]))  # multi-datagram request
        if r < 0.05:
            return wrap(rid, b"")  # empty body
        seq = rng.getrandbits(16) if rng.random() < 0.1 else 0  # sequence is not checked
        body = self.text_body() if rng.random() < text_share else self.binary_body()
        return wrap(rid, body, sequence=seq)


def directed_payloads(mk: int, mv: int) -> list[bytes]:
    """Directed UDP payloads of frontend.md §3-§6, most alone in a datagram (mk = MAX_KEY,
    mv = MAX_VALUE): every opcode with hits, misses and quiet forms, the refusals, a multi-get,
    one datagram holding every opcode, truncations, bad magic, the datagram-level drops, and
    the text subset with its errors. Keys 'alpha' and 'Bravo'."""
    k1, k2 = b"alpha"[:mk], b"Bravo"[:mk]
    rid = 0x1234
    bins = [
        Request(Opcode.GET, k1, opaque=1).encode(),                         # miss
        Request(Opcode.SET, k1, b"\0" * 8, b"v1"[:mv], opaque=2).encode(),  # stored
        Request(Opcode.GET, k1, opaque=3).encode(),                         # hit
        Request(Opcode.GETK, k1, opaque=4).encode(),
        Request(Opcode.GETQ, k2, opaque=5).encode(),                        # quiet miss: nothing
        Request(Opcode.GETKQ, k2, opaque=6).encode(),
        Request(Opcode.GETK, k2, opaque=7).encode(),                        # miss with the key
        Request(Opcode.MATCH, k1, opaque=8).encode(),                       # exact
        Request(Opcode.MATCH, k2, opaque=9).encode(),                       # rule
        Request(Opcode.MATCH, b"zzzzzzz"[:mk], opaque=10).encode(),
        Request(Opcode.SETQ, k2, b"\0" * 8, b"", opaque=11).encode(),       # quiet: nothing
        Request(Opcode.GET, k2, opaque=12).encode(),                        # empty value
        Request(Opcode.DELETEQ, k2, opaque=13).encode(),                    # quiet: nothing
        Request(Opcode.DELETEQ, k2, opaque=14).encode(),                    # not found: answered
        Request(Opcode.DELETE, k1, opaque=15).encode(),
        Request(Opcode.NOOP, opaque=16).encode(),
        Request(Opcode.VERSION, opaque=17).encode(),
        Request(0x02, k1, b"\0" * 8, b"x", opaque=18).encode(),             # unknown (ADD)
        Request(Opcode.GET, b"k" * (mk + 1), opaque=19).encode(),           # key too long
        Request(Opcode.SET, k1, b"\0" * 8, b"x" * (mv + 1), opaque=20).encode(),  # too large
        Request(Opcode.SET, k1, b"\0" * 8, b"x" * 300, opaque=21).encode(),  # far too large
    ]
    out = [wrap(rid, req) for req in bins]
    # a multi-get: quiet gets and a NOOP, in one datagram
    out.append(wrap(rid, Request(Opcode.SET, k1, b"\0" * 8, b"1"[:mv]).encode()))
    out.append(wrap(7, b"".join(Request(Opcode.GETKQ, k, opaque=i).encode()
                             for i, k in enumerate([k1, k2, k1, b"nope"[:mk]])) + Request(Opcode.NOOP).encode()))
    # truncations: header cut, body cut; bad magic after a request
    full = Request(Opcode.GET, k1, opaque=30).encode()
    out.append(wrap(rid, full + full[:10]))
    out.append(wrap(rid, full + full[:-1]))
    out.append(wrap(rid, full + b"\x81" + full[1:] + full))
    out.append(wrap(rid, b""))
    out.append(b"\x00\x01\x00")
    out.append(wrap(rid, full, total=2))
    texts = [
        b"get alpha\r\n", b"set alpha 0 0 2\r\nhi\r\n", b"get alpha Bravo alpha\r\n",
        b"get " + b"k" * (mk + 1) + b" alpha\r\n", b"set Bravo 0 0 1 noreply\r\nx\r\n",
        b"delete Bravo\r\ndelete Bravo\r\ndelete alpha noreply\r\n", b"version\r\n",
        b"set alpha 1 0 1\r\nx\r\n", b"set alpha 0 0 " + str(mv + 1).encode() + b"\r\n" + b"y" * (mv + 1) + b"\r\n",
        b"set alpha 0 0 1\r\nxyz\r\n", b"set alpha 0 x 1\r\n", b"bogus\r\n\r\n", b"get alpha",
        b"set alpha 0 0 5\r\nab", b"delete alpha 1\r\n", b"delete alpha 0 noreply\r\n",
        b"  get   alpha  \n", b"get al\rpha\r\r\n", b"version 1\r\n",
    ]
    out += [wrap(rid, body) for body in texts]
    # every opcode in one datagram, twice (the second time the key exists)
    every = b"".join(Request(op, b"" if op in (Opcode.NOOP, Opcode.VERSION) else k1, b"\0" * 8 if op in (Opcode.SET, Opcode.SETQ) else b"",
                             b"w"[:mv] if op in (Opcode.SET, Opcode.SETQ) else b"", opaque=0x100 + i).encode()
                     for i, op in enumerate([Opcode.GET, Opcode.GETQ, Opcode.GETK, Opcode.GETKQ, Opcode.MATCH,
                                             Opcode.SETQ, Opcode.GET, Opcode.GETQ, Opcode.GETK, Opcode.GETKQ,
                                             Opcode.MATCH, Opcode.SET, Opcode.DELETEQ, Opcode.DELETE,
                                             Opcode.SET, Opcode.DELETE, Opcode.NOOP, Opcode.VERSION]))
    out += [wrap(0x4242, every), wrap(0x4243, every)]
    return out


def multiget(rng: random.Random, keys: list[bytes], binary: bool, max_line: int, max_bytes: int) -> bytes:
    """A datagram whose replies outgrow it (for the reply budget, frontend.md §10): many GETs of
    a key pool and VERSIONs, a few SETs among them; binary closed by a NOOP, text `get` lines of
    at most max_line bytes; the payload at most max_bytes."""
    room = max_bytes - 8
    if binary:
        ops = [Opcode.GETK, Opcode.GETKQ, Opcode.GET, Opcode.GETQ, Opcode.MATCH, Opcode.VERSION]
        noop = Request(Opcode.NOOP, opaque=0xAB).encode()
        reqs: list[bytes] = []
        used = len(noop)
        for i in range(rng.randint(2, 60)):
            if rng.random() < 0.05:
                req = Request(Opcode.SET, rng.choice(keys), b"\0" * 8, b"w", opaque=i).encode()
            else:
                op = rng.choice(ops)
                key = b"" if op == Opcode.VERSION else rng.choice(keys)
                req = Request(op, key, opaque=rng.getrandbits(32)).encode()
            if used + len(req) > room:
                break
            reqs.append(req)
            used += len(req)
        return wrap(rng.getrandbits(16), b"".join(reqs) + noop)
    body = b""
    for _ in range(rng.choice([1, 1, 2, 3])):
        line = b"get"
        while True:
            key = rng.choice(keys)
            if len(line) + 1 + len(key) + 2 > max_line or len(body) + len(line) + len(key) + 3 > room:
                break
            line += b" " + key
            if rng.random() < 0.04:
                break
        extra = b""
        if rng.random() < 0.2:
            extra += b"set %s 0 0 1\r\nz\r\n" % rng.choice(keys)
        if rng.random() < 0.3:
            extra += b"version\r\n" * rng.randint(1, 20)  # 9 bytes in, 19 out, no engine
        if len(line) > 3 and len(body) + len(line) + 2 <= room:
            body += line + b"\r\n"
        if len(body) + len(extra) <= room:
            body += extra
    return wrap(rng.getrandbits(16), body or b"version\r\n")
