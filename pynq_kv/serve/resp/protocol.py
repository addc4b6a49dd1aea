"""RESP framing: an incremental request parser with Redis' own rules, and RESP2/RESP3 encoders.

The parser is hand-written rather than built on hiredis.Reader: hiredis parses *replies*, so it
accepts frames a Redis server refuses (nested arrays, "+simple" strings, nil bulks), cannot
produce Redis' protocol-error texts, does not know inline commands, and would buffer a declared
512 MB bulk before we could refuse it. This parser follows Redis 7.0's processInputBuffer,
processMultibulkBuffer, processInlineBuffer and sdssplitargs step by step, including its quirks
(a header line ends at the first CR and the byte after it is skipped unchecked, the two bytes
after a bulk payload are skipped unchecked, C string functions stop at a NUL byte), so the
same bytes give the same commands and the same errors as Redis.

Speed comes from a fast path for plain multibulk commands, in C (pynq_kv/_respfast.c: one
pass over the bytes, runs of one argument count out as argument columns). Where that module
was not built, the same job is done by two Python paths: a run of commands with one name and
fixed argument lengths (a pipeline of GETs or SETs with fixed-size keys, as benchmarks and
bulk loads send) is cut at its fixed offsets by C-level bytes operations; otherwise,
while a buffer holds ordinary multibulk commands, one C-level bytes.split(b"\\r\\n") yields all
their tokens and each command is checked token by token against precomputed header tables.
The fast paths only ever accept commands the exact path would accept identically; at the first
thing they cannot vouch for (inline command, odd header, partial command; for the Python
paths also a bulk payload containing CRLF) they hand over to the exact path.
"""

from __future__ import annotations

import struct
from typing import Any, Optional

from . import errors as E

try:  # the fast path in C (pynq_kv/_respfast.c); _fast_py below where it was not built
    from ..._respfast import fast as fast_c
except ImportError:  # pragma: no cover - a machine without a C compiler
    fast_c = None

INLINE_MAX = 64 * 1024  # Redis' PROTO_INLINE_MAX_SIZE
INT_MAX = (1 << 31) - 1
LLONG_MAX = (1 << 63) - 1
UNAUTH_MAX_ARGS = 10  # Redis' limits before AUTH (networking.c)
UNAUTH_MAX_BULK = 16384
FAST_MAX_ARGS = 1024  # fast-path header tables cover *1..*1024 and $0..$FAST_MAX_BULK
FAST_MAX_BULK = 4096
# A run of commands with one argument count comes out as a block (_fast_tokens) up to this
# count: GET and SET, and with a host tier HSET, ZADD or an MSET of 10 keys, which go to Redis
# as one piece.
BLOCK_MAX_ARGS = 32
SMALL_WINDOW = 64 * 1024  # bytes split at a time by RequestParser._small_bulks
# _small_bulks only for commands with at least this many arguments left: its split costs the
# window's bytes whatever the command's size, which a GET's few arguments never pay back.
SMALL_MIN_ARGS = 64
# What one parsed argument of a partial command really costs beyond its bytes (CPython 3.11,
# 64-bit, measured with tracemalloc: 41 + length for arguments of 2+ bytes; tests/test_resp_memory
# checks it): its pointer in the argument list (8 bytes, plus the list's over-allocation of up
# to 1/8 as it grows: 9), and for 2+ bytes its own bytes object (a 33-byte header, rounded up to
# pymalloc's 8-byte size classes). Empty and 1-byte arguments are shared objects: only the
# pointer.
ARG_SLOT = 9
ARG_OBJECT = 40

_SPACE = frozenset(b" \t\n\v\f\r")  # C isspace() in the C locale
_HEX = frozenset(b"0123456789abcdefABCDEF")
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}


def string2ll(text: bytes) -> Optional[int]:
    """Redis' string2ll: strict decimal (no '+', no spaces, no leading zeros), 64-bit range."""
    n = len(text)
    if n == 0 or n >= 21:
        return None
    if n == 1 and text[0] == 48:
        return 0
    digits = text[1:] if text[0] == 45 else text
    if not digits or not 49 <= digits[0] <= 57 or not digits.isdigit():
        return None
    value = int(digits)
    if text[0] == 45:
        return -value if value <= LLONG_MAX + 1 else None
    return value if value <= LLONG_MAX else None


def splitargs(line: bytes) -> Optional[list[bytes]]:
    """Redis' sdssplitargs: inline arguments with "..." (C escapes, \\xHH) and '...' quoting.

    None means unbalanced quotes (or a closing quote not followed by a space). The line holds
    no NUL byte (the caller stops at one, as strchr does in Redis).
    """
    # Without quotes, \v or \f (blanks only before a token: inside one they are its bytes)
    # sdssplitargs splits at runs of space, \t, \r and \n, as bytes.split() does, in C.
    if b'"' not in line and b"'" not in line and b"\x0b" not in line and b"\x0c" not in line:
        return line.split()
    return splitargs_stepwise(line)


def splitargs_stepwise(line: bytes) -> Optional[list[bytes]]:
    """splitargs a byte at a time, as sdssplitargs does: what splitargs runs for a line with
    quotes, \v or \f."""
    args: list[bytes] = []
    n = len(line)
    p = 0
    while True:
        while p < n and line[p] in _SPACE:
            p += 1
        if p >= n:
            return args
        current = bytearray()
        in_dq = in_sq = False
        while True:
            c = line[p] if p < n else 0
            if in_dq:
                if (c == 92 and p + 3 < n and line[p + 1] == 120 and line[p + 2] in _HEX
                        and line[p + 3] in _HEX):
                    current.append(int(line[p + 2:p + 4], 16))
                    p += 3
                elif c == 92 and p + 1 < n:
                    p += 1
                    current.append(_ESCAPES.get(line[p], line[p]))
                elif c == 34:
                    if p + 1 < n and line[p + 1] not in _SPACE:
                        return None
                    p += 1
                    break
                elif p >= n:
                    return None
                else:
                    current.append(c)
            elif in_sq:
                if c == 92 and p + 1 < n and line[p + 1] == 39:
                    p += 1
                    current.append(39)
                elif c == 39:
                    if p + 1 < n and line[p + 1] not in _SPACE:
                        return None
                    p += 1
                    break
                elif p >= n:
                    return None
                else:
                    current.append(c)
            else:
                if p >= n or c in (32, 10, 13, 9):
                    break
                if c == 34:
                    in_dq = True
                elif c == 39:
                    in_sq = True
                else:
                    current.append(c)
            p += 1
        args.append(bytes(current))


def _find_line_end(buf: bytes, byte: bytes, pos: int) -> int:
    """buf.find(byte, pos), except -1 when a NUL comes first (Redis uses strchr)."""
    end = buf.find(byte, pos)
    if buf.find(b"\0", pos, end if end >= 0 else len(buf)) >= 0:
        return -1
    return end


class RequestParser:
    """Turns a client's byte stream into commands, incrementally.

    feed() appends the commands completed by the new bytes to a list: each is a list of
    arguments, or a *block* of several commands with the same argument count as a tuple of
    argument columns (see _fast; `commands_of` expands either). A protocol error is kept in
    .error, after the commands that preceded it; the parser accepts nothing afterwards.
    """

    __slots__ = ("buf", "max_bulk_len", "unauth", "error", "_argc_left", "_args", "_args_bytes",
                 "_bulklen", "_chunks", "_chunks_len", "_need", "_fast_mbulk", "_fast_bulk",
                 "_fast_bulk_max", "_last_shape")

    def __init__(self, max_bulk_len: int = 512 * 1024 * 1024,
                 tables: Optional[tuple[dict[bytes, int], dict[bytes, int]]] = None) -> None:
        self.buf = b""
        self.max_bulk_len = max_bulk_len
        self.unauth = False  # Redis' stricter limits apply until the client authenticates
        self.error: Optional[bytes] = None
        self._argc_left = 0  # arguments still to read of the multibulk command in progress
        self._args: list[bytes] = []
        self._args_bytes = 0
        self._bulklen = -1  # declared length of the bulk being read, -1 between bulks
        self._chunks: list[bytes] = []  # input held back while a long bulk is incomplete
        self._chunks_len = 0
        self._need = 0  # bytes buf must hold before parsing can progress (long bulks)
        self._fast_mbulk, self._fast_bulk = tables or fast_tables(max_bulk_len)
        self._fast_bulk_max = min(FAST_MAX_BULK, max_bulk_len)  # the largest $L _fast takes
        self._last_shape: Optional[tuple[Any, int, bytes, int, bytes]] = None

    def buffered(self) -> int:
        """Bytes this client holds in the server: unparsed input plus a partial command."""
        return (len(self.buf) + self._chunks_len + self._args_bytes
                + ARG_SLOT * len(self._args))

    def pending(self) -> bool:
        """True while a command is partly received."""
        return bool(self.buf or self._chunks or self._argc_left)

    def feed(self, data: bytes, out: list[list[bytes]], limit: int = 0) -> int:
        """Parse data (plus what was held back) into out; returns the commands added.

        limit > 0 parses at most that many commands and keeps the rest for resume(); it is
        used before AUTH, where Redis applies its limits one command at a time.
        """
        if self.error is not None:
            return 0
        if self._need:
            self._chunks_len += len(data)
            self._chunks.append(data)
            if len(self.buf) + self._chunks_len < self._need:
                return 0
            data = b"".join(self._chunks)
            self._chunks = []
            self._chunks_len = 0
            self._need = 0
        if self.buf:
            self.buf += data
        else:
            self.buf = data
        return self._parse(out, limit)

    def take(self, data: bytes, out: list[list[bytes]]) -> bool:
        """feed(data, out) for a client parsed without a limit; True when that left nothing
        behind (no unparsed byte, no partial command, no error), which the server is told in
        the same call: then the client holds no memory and no command is half received.

        When nothing was held before, a read starting with a multibulk command goes straight
        to the fast path, without feed's and _parse's setup: what a pipelining client sends."""
        if (self.buf or self._argc_left or self._need or self.unauth or self.error is not None
                or data[:1] != b"*"):
            self.feed(data, out)
        else:
            pos = self._fast(data, out)[0]
            if pos == len(data):  # all taken: nothing was held and nothing is (no error either)
                return True
            self.buf = data  # the exact path takes over where the fast path stopped
            self._parse(out, 0, pos)
        return not (self.buf or self._argc_left or self._chunks) and self.error is None

    def hold(self, data: bytes) -> None:
        """Keep data unparsed (a client before AUTH, while its previous command waits)."""
        if self.error is None:
            if self._need:
                self._chunks.append(data)
                self._chunks_len += len(data)
            else:
                self.buf += data

    def resume(self, out: list[list[bytes]], limit: int = 0) -> int:
        """Parse what is still buffered (after a limited feed)."""
        if self.error is not None or self._need and len(self.buf) + self._chunks_len < self._need:
            return 0
        if self._chunks:
            self.buf += b"".join(self._chunks)
            self._chunks = []
            self._chunks_len = 0
            self._need = 0
        if not self.buf:
            return 0
        return self._parse(out, limit)

    def discard(self) -> list[bytes]:
        """Drop all input (the client is gone); returns the partial command's arguments, which
        the caller may free a piece at a time: freeing 200,000 of them at once takes ~2.5 ms."""
        args = self._args
        self.buf = b""
        self._args = []
        self._args_bytes = 0
        self._argc_left = 0
        self._bulklen = -1
        self._chunks = []
        self._chunks_len = 0
        self._need = 0
        return args

    def _fail(self, message: bytes) -> None:
        self.error = message
        self.buf = b""
        self._args = []
        self._chunks = []
        self._chunks_len = 0
        self._args_bytes = 0

    def _parse(self, out: list[list[bytes]], limit: int, start: int = -1) -> int:
        """Parse buf into out; start >= 0: the fast path has already taken buf[:start] (take)."""
        buf = self.buf
        n = len(buf)
        pos = 0
        count = 0
        fast = not limit and not self.unauth
        if start >= 0:
            pos = start
            fast = False
        elif fast and not self._argc_left and buf[:1] == b"*":
            pos, count = self._fast(buf, out)
            fast = False
        while pos < n:
            if limit and count >= limit:
                break
            if not self._argc_left:
                if buf[pos] != 42:  # inline command
                    newline = _find_line_end(buf, b"\n", pos)
                    if newline < 0:
                        if n - pos > INLINE_MAX:
                            self._fail(E.PROTO_TOO_BIG_INLINE)
                            return count
                        break
                    end = newline - 1 if newline != pos and buf[newline - 1] == 13 else newline
                    args = splitargs(buf[pos:end])
                    if args is None:
                        self._fail(E.PROTO_UNBALANCED)
                        return count
                    line = buf[pos:newline + 1]
                    pos = newline + 1
                    if not args:
                        continue
                    if limit or not buf.startswith(line, pos):
                        out.append(args)
                        count += 1
                        continue
                    # The same line again (a pipeline of PINGs, say): one block of them, as
                    # the multibulk fast path gives a run of one command.
                    runs = 1
                    while buf.startswith(line, pos):
                        pos += len(line)
                        runs += 1
                    out.append(tuple([arg] * runs for arg in args))
                    count += runs
                    continue
                cr = _find_line_end(buf, b"\r", pos)
                if cr < 0:
                    if n - pos > INLINE_MAX:
                        self._fail(E.PROTO_TOO_BIG_MBULK)
                        return count
                    break
                if cr > n - 2:
                    break
                ll = string2ll(buf[pos + 1:cr])
                if ll is None or ll > INT_MAX:
                    self._fail(E.PROTO_INVALID_MBULK)
                    return count
                if ll > UNAUTH_MAX_ARGS and self.unauth:
                    self._fail(E.PROTO_UNAUTH_MBULK)
                    return count
                pos = cr + 2
                if ll <= 0:
                    continue
                self._argc_left = ll
                self._args = []
                self._args_bytes = 0
            # the arguments of a multibulk command
            burst = True  # one _small_bulks run per command and call, where it can start
            while self._argc_left:
                if self._bulklen < 0 and burst and self._argc_left >= SMALL_MIN_ARGS:
                    burst = False
                    pos = self._small_bulks(buf, pos)
                    continue
                if self._bulklen < 0:
                    cr = _find_line_end(buf, b"\r", pos)
                    if cr < 0:
                        if n - pos > INLINE_MAX:
                            self._fail(E.PROTO_TOO_BIG_BULK)
                            return count
                        break
                    if cr > n - 2:
                        break
                    if buf[pos] != 36:
                        self._fail(E.proto_expected_dollar(buf[pos:pos + 1]))
                        return count
                    ll = string2ll(buf[pos + 1:cr])
                    if ll is None or ll < 0 or ll > self.max_bulk_len:
                        self._fail(E.PROTO_INVALID_BULK)
                        return count
                    if ll > UNAUTH_MAX_BULK and self.unauth:
                        self._fail(E.PROTO_UNAUTH_BULK)
                        return count
                    pos = cr + 2
                    self._bulklen = ll
                end = pos + self._bulklen
                if end + 2 > n:
                    if self._bulklen >= 1024:  # hold further input until the bulk is complete
                        self._need = end + 2 - pos
                    break
                self._args.append(buf[pos:end])
                self._args_bytes += (self._bulklen + ARG_OBJECT) if self._bulklen > 1 else 0
                pos = end + 2
                self._bulklen = -1
                self._argc_left -= 1
            if self._argc_left:
                break
            out.append(self._args)
            self._args = []
            self._args_bytes = 0
            count += 1
            if fast and buf[pos:pos + 1] == b"*":
                # The command carried over from the previous input is complete: what follows
                # starts on a command boundary, so the fast path takes it again (once per call:
                # each try costs a copy of the rest). Without this, every read that ends inside
                # a command sent the whole next read down the exact path.
                fast = False
                rest, more = self._fast(buf[pos:], out)
                pos += rest
                count += more
        self.buf = buf[pos:] if pos else buf
        return count

    def _small_bulks(self, buf: bytes, pos: int) -> int:
        """Take the whole arguments at pos whose header is in the fast tables ($0..$4096,
        canonical) and whose payload is followed by CRLF; returns where the first other one
        starts (the exact path goes on from there).

        A command of many small arguments (one EXISTS or MGET of 900,000 keys) would otherwise
        cost the exact path's per-argument Python steps; here a C-level split of each
        SMALL_WINDOW bytes yields them. A pair (header, payload) is taken only if the header is
        a table key and the payload token has the declared length — then the exact path would
        read the same argument from the same bytes (a payload holding CRLF splits short and
        stops the run). The window bounds the header tokens alive at once, which would
        otherwise leave a chunk's worth of holes in the allocator's pools.
        """
        n = len(buf)
        while self._argc_left:
            # no more than this command can use at ~64 bytes per argument: a split costs its
            # window whatever it yields
            window = min(SMALL_WINDOW, 64 * self._argc_left)
            toks = buf[pos:pos + window].split(b"\r\n")
            k = min(self._argc_left, (len(toks) - 1) // 2)  # pairs followed by CRLF
            lengths = list(map(self._fast_bulk.get, toks[0:2 * k:2]))
            payloads = toks[1:2 * k:2]
            sizes = list(map(len, payloads))
            whole = lengths == sizes
            if not whole:  # the longest prefix that agrees, by bisection (C-level compares)
                good, bad = 0, k
                while bad - good > 1:
                    mid = (good + bad) // 2
                    if lengths[:mid] == sizes[:mid]:
                        good = mid
                    else:
                        bad = mid
                k = good
                del payloads[k:], sizes[k:]
            if not k:
                return pos
            self._args.extend(payloads)
            # as the exact path counts: empty and 1-byte arguments are shared objects
            self._args_bytes += (sum(sizes) + ARG_OBJECT * (k - sizes.count(0))
                                 - (ARG_OBJECT + 1) * sizes.count(1))
            self._argc_left -= k
            pos += sum(map(len, toks[:2 * k])) + 4 * k
            if not whole or pos + window > n:
                return pos
        return pos

    def _fast(self, buf: bytes, out: list[Any]) -> tuple[int, int]:
        """(bytes consumed, commands added) for the leading run of plain multibulk commands:
        whole commands whose headers are all in the fast tables, each header and payload
        followed by CRLF. Runs of commands with one argument count come out as blocks (tuples
        of argument columns, at most BLOCK_MAX_ARGS of them), other commands as lists.

        In C when pynq_kv._respfast was built (a block for every run of at least 4), else
        _fast_py; where the two stop and how they group may differ, the commands never do."""
        if fast_c is not None:
            return fast_c(buf, 0, out, self._fast_bulk_max, BLOCK_MAX_ARGS)
        return self._fast_py(buf, out)

    def _fast_py(self, buf: bytes, out: list[Any]) -> tuple[int, int]:
        """_fast in Python. First the *shape* path: when the buffer starts with a run of
        commands that have one name and the same argument lengths (a pipeline of GETs or SETs with fixed-size keys and
        values, as benchmarks and bulk loads send), a struct format cuts all their arguments
        out at once, in C, and one comparison checks the rest (see _shape, _cut). Anything else
        goes token by token (_fast_tokens).
        """
        shape = self._last_shape  # a client mostly repeats one shape: try its last one first
        if (shape is None or not buf.startswith(shape[4])
                or shape[0] is None and len(buf) >= 4 * shape[1]):
            shape = self._last_shape = self._shape(buf)
            if shape is None:
                return self._fast_tokens(buf, out)
        if shape[0] is not None:
            n = len(buf)
            m = n // shape[1]
            if m >= 4:
                end = m * shape[1]
                block = _cut(shape, buf if end == n else buf[:end], m)
                if block is not None:
                    out.append(block)
                    if end == n:
                        return end, m
                    rest, more = self._fast_tokens(buf[end:], out)
                    return end + rest, m + more
                self._last_shape = None  # not this shape after all: work it out afresh next time
        return self._fast_tokens(buf, out)

    def _shape(self, buf: bytes) -> Optional[tuple[Any, int, bytes, int, bytes]]:
        """(cuts, size, name, argc, prefix) of the first command when it has 1 to 3
        arguments, each declared within the fast tables: `cuts` are what _cut needs to take a
        run of this shape (same name, same lengths, every CRLF present) apart; `prefix` is
        the command's constant start, up to the payload of its first argument after the name
        (the whole command when it has no other argument). Shapes are kept (at most SHAPES_MAX
        of them). A shape not kept because the buffer holds fewer than 4 commands' bytes comes
        back with cuts None: _fast then knows, from its prefix and size alone, that an
        unpipelined client's next command needs no second look."""
        line = buf.find(b"\r\n", 0, 8)
        argc = self._fast_mbulk.get(buf[:line]) if line > 0 else None
        if argc is None or argc > 3:
            return None
        bulk = self._fast_bulk
        pos = line + 2
        lengths = []
        for _ in range(argc):
            line = buf.find(b"\r\n", pos, pos + 8)
            n = bulk.get(buf[pos:line]) if line > 0 else None
            if n is None:
                return None
            lengths.append(n)
            pos = line + 4 + n
        first = buf.find(b"\r\n", buf.find(b"\r\n") + 2) + 2  # start of the name's payload
        name = buf[first:first + lengths[0]]
        key = (name, *lengths)
        shape = _SHAPES.get(key)
        if shape is None:
            # Only for a shape the buffer holds at least 4 times in a row (by its start), and
            # never more than SHAPES_MAX shapes per process, so a client cycling through
            # shapes cannot fill the table.
            size = pos  # the first command ends where the loop stopped
            prefix = b"*%d\r\n$%d\r\n" % (argc, lengths[0]) + name + b"\r\n"
            if argc > 1:
                prefix += b"$%d\r\n" % lengths[1]
            if len(buf) < 4 * size:
                return None, size, name, argc, prefix
            if len(_SHAPES) >= SHAPES_MAX or not buf.startswith(prefix, 3 * size):
                return None
            # (the two arguments' offsets, the bytes between two commands, the bytes between
            # the two arguments) or, for one argument, (None, the bytes between two commands,
            # its length)
            if argc == 3:
                gap: Any = b"\r\n$%d\r\n" % lengths[2]
                fmt = "=%dx%ds%dx%ds2x" % (len(prefix), lengths[1], len(gap), lengths[2])
                cuts = (struct.Struct(fmt).iter_unpack, CRLF + prefix, gap)
            else:
                cuts = (None, CRLF + prefix, lengths[-1])
            shape = _SHAPES[key] = (cuts, size, name, argc, prefix)
        return shape

    def _fast_tokens(self, buf: bytes, out: list[Any]) -> tuple[int, int]:
        """(bytes consumed, commands added) for the leading run of plain multibulk commands.

        A run of commands that all have the same argument count comes out as one *block*: a
        tuple of argument columns (names, keys, ...), which the dispatcher can hand to the
        engine whole. Other commands come out one by one as lists.
        """
        toks = buf.split(b"\r\n")
        last = len(toks) - 1  # toks[last] is not followed by CRLF: never a whole token
        mbulk = self._fast_mbulk
        bulk = self._fast_bulk
        i = 0
        count = 0
        argc = mbulk.get(toks[0])
        if argc is not None and argc <= BLOCK_MAX_ARGS:
            stride = 1 + 2 * argc
            k = last // stride
            if k >= 4:
                span = k * stride
                if toks[0:span:stride].count(toks[0]) == k:
                    columns = []
                    for a in range(1, stride, 2):
                        values = toks[a + 1:span:stride]
                        if list(map(bulk.get, toks[a:span:stride])) != list(map(len, values)):
                            break
                        columns.append(values)
                    else:
                        out.append(tuple(columns))
                        i, count = span, k
        while i < last:
            argc = mbulk.get(toks[i])
            if argc is None:
                break
            end = i + 1 + 2 * argc
            if end > last:
                break
            args = toks[i + 2:end:2]
            if argc == 2:
                if bulk.get(toks[i + 1]) != len(args[0]) or bulk.get(toks[i + 3]) != len(args[1]):
                    break
            elif argc == 3:
                if (bulk.get(toks[i + 1]) != len(args[0]) or bulk.get(toks[i + 3]) != len(args[1])
                        or bulk.get(toks[i + 5]) != len(args[2])):
                    break
            elif list(map(bulk.get, toks[i + 1:end:2])) != list(map(len, args)):
                break
            out.append(args)
            count += 1
            i = end
        if not i:
            return 0, 0
        if i == last and not toks[last]:
            return len(buf), count
        return sum(map(len, toks[:i])) + 2 * i, count


SHAPES_MAX = 1024  # command shapes kept for the shape path, per process (never evicted)
_SHAPES: dict[tuple, tuple[Any, int, bytes, int, bytes]] = {}  # (name, lengths) -> its shape


def _cut(shape: tuple[Any, int, bytes, int, bytes], run: bytes, m: int) -> Optional[tuple]:
    """The block of the m commands of this shape that make up run (m times its size), as
    argument columns (see RequestParser._fast), or None if run is not exactly that.

    No Python step per command. With one argument after the name, one split does it (below);
    with two, a struct format of the shape cuts every payload out of run at its fixed offset,
    and the run rebuilt from those payloads and the shape's constant bytes (one join) must be
    run itself. Either way the commands are what the exact path reads."""
    cuts, _, name, argc, prefix = shape
    if argc == 1:  # no payload: m non-overlapping copies of the command tile run
        return ([name] * m,) if run.count(prefix) == m else None
    unpack, between, gap = cuts  # (for one argument, gap is its length)
    if argc == 2:
        # Split where one command ends and the next begins: m pieces, each one argument once
        # the prefix and the final CRLF are off, all of the declared length, fill run exactly
        # as m commands would (their lengths add up only so), a payload holding the separator
        # splits into more and shorter pieces.
        args = run.split(between)
        if len(args) != m or not args[0].startswith(prefix) or not args[-1].endswith(CRLF):
            return None
        args[0] = args[0][len(prefix):]
        args[-1] = args[-1][:-2]
        return ([name] * m, args) if list(map(len, args)).count(gap) == m else None
    columns = tuple(zip(*unpack(run)))
    parts = [between, None, gap, None] * m
    parts[0] = prefix
    parts[1::4] = columns[0]
    parts[3::4] = columns[1]
    parts.append(CRLF)
    if b"".join(parts) != run:
        return None
    return [name] * m, *columns


def commands_of(item: Any) -> list[list[bytes]]:
    """The commands of one parser output item (a command, or a block of columns)."""
    if type(item) is tuple:
        return [list(args) for args in zip(*item)]
    return [item]


def fast_tables(max_bulk_len: int) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """Header lines the fast path accepts, with their values (shared by all connections)."""
    mbulk = {b"*%d" % i: i for i in range(1, FAST_MAX_ARGS + 1)}
    bulk = {b"$%d" % i: i for i in range(0, min(FAST_MAX_BULK, max_bulk_len) + 1)}
    return mbulk, bulk


# -- replies -------------------------------------------------------------------------------------
class Raw(bytes):
    """Reply bytes already in RESP form (written as they are)."""


class Simple(str):
    """A status reply: +text in both protocols."""


class Verbatim(str):
    """Text shown as-is by clients: a bulk string in RESP2, "=...txt:" in RESP3."""


class RespSet(list):
    """A list sent as a RESP3 set ("~"); an array in RESP2."""


class ErrorReply(bytes):
    """An error reply; the bytes are the message without "-" and CRLF."""


OK = Raw(b"+OK\r\n")
PONG = Raw(b"+PONG\r\n")
CRLF = b"\r\n"
BULK_HEADERS = [b"$%d\r\n" % i for i in range(1024)]


def bulk(data: bytes) -> bytes:
    n = len(data)
    return (BULK_HEADERS[n] if n < 1024 else b"$%d\r\n" % n) + data + CRLF


def encode(value: Any, resp3: bool) -> bytes:
    """A Python value as RESP: bytes/str are bulk strings, dict a map, list/tuple an array."""
    out: list[bytes] = []
    _encode(value, resp3, out)
    return b"".join(out)


def _encode(value: Any, resp3: bool, out: list[bytes]) -> None:
    kind = type(value)
    if kind is Raw:
        out.append(value)
    elif kind is bytes:
        out.append(bulk(value))
    elif value is None:
        out.append(b"_\r\n" if resp3 else b"$-1\r\n")
    elif kind is bool:
        out.append((b"#t\r\n" if value else b"#f\r\n") if resp3 else (b":1\r\n" if value else b":0\r\n"))
    elif kind is int:
        out.append(b":%d\r\n" % value)
    elif kind is Simple:
        out.append(b"+" + value.encode() + CRLF)
    elif kind is ErrorReply:
        out.append(E.error_reply(value))
    elif kind is Verbatim:
        data = value.encode()
        out.append(b"=%d\r\ntxt:" % (len(data) + 4) + data + CRLF if resp3 else bulk(data))
    elif kind is str:
        out.append(bulk(value.encode()))
    elif kind is float:
        text = repr(value).encode() if value == value and abs(value) != float("inf") else (
            b"nan" if value != value else (b"inf" if value > 0 else b"-inf"))
        out.append(b"," + text + CRLF if resp3 else bulk(text))
    elif kind is dict:
        out.append((b"%%%d\r\n" if resp3 else b"*%d\r\n") % (len(value) * (1 if resp3 else 2)))
        for key, item in value.items():
            _encode(key, resp3, out)
            _encode(item, resp3, out)
    elif kind in (list, tuple):
        out.append(b"*%d\r\n" % len(value))
        for item in value:
            _encode(item, resp3, out)
    elif kind in (set, frozenset, RespSet):
        out.append((b"~%d\r\n" if resp3 else b"*%d\r\n") % len(value))
        for item in value:
            _encode(item, resp3, out)
    elif isinstance(value, bytes):
        out.append(bulk(bytes(value)))
    elif isinstance(value, int):
        out.append(b":%d\r\n" % int(value))
    else:
        raise TypeError(f"cannot encode {kind.__name__} as RESP")
