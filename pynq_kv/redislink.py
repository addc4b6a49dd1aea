"""Pipelined connections to the host tier's Redis, speaking raw RESP.

A front-end forwards a client's command as the bytes Redis would get from the client, and the
reply goes back to the client byte for byte: nothing is decoded and re-encoded on the way, so
every reply type of every Redis version arrives as Redis wrote it. A `Link` writes requests in
order and hands each reply, in order, to the handler given with its request; requests made in
one event-loop iteration go out in one write (Redis sees them as one pipeline), or in writes of
EARLY_WRITE requests or more when there are many.

`reply_end` frames replies (RESP2 and RESP3: aggregates, maps, attributes, pushes) without
decoding them; `frame_replies` frames a run of them, in C (pynq_kv/_respframe.c) when that
module was built at install, else with reply_end.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Callable, Optional, Sequence

log = logging.getLogger("pynq_kv.redislink")

Handler = Callable[[bytes], None]
RunHandler = Callable[[bytes, int], None]  # the replies of a run of requests, their errors

# Requests queued on a link go out at the end of the loop turn, or at once when this many are
# waiting: Redis then works on the first part of a large turn (a pipelined load's SETs, INCRs,
# MSETs) while this process plans the rest, instead of each waiting on the other.
EARLY_WRITE = 64

_LINE_TYPES = frozenset(b"+-:_,#(")  # a type byte, then one line
_BULK_TYPES = frozenset(b"$=!")  # a length line, then that many bytes and CRLF
_LIST_TYPES = frozenset(b"*~>")  # a count line, then that many replies
_PAIR_TYPES = frozenset(b"%|")  # a count line, then twice that many (an attribute: then its reply)


class ProtocolError(ValueError):
    """Redis sent bytes that are not RESP: the link is closed."""


def encode_command_py(args: Sequence[bytes]) -> bytes:
    """A command as a RESP array of bulk strings (what every client library sends)."""
    return b"*%d\r\n" % len(args) + b"".join([b"$%d\r\n%s\r\n" % (len(a), a) for a in args])


try:
    from ._respframe import encode as _encode_c
    from ._respframe import encode_block as _encode_block_c
except ImportError:  # installed without a C compiler: the Python encoders alone
    _encode_c = _encode_block_c = None


def encode_command(args: Sequence[bytes]) -> bytes:
    """encode_command_py, in C where pynq_kv._respframe was built (for bytes arguments; any
    other bytes-like argument takes the Python encoder)."""
    if _encode_c is not None:
        try:
            return _encode_c(args)
        except TypeError:
            pass
    return encode_command_py(args)


_HEADS = [b"$%d\r\n" % n for n in range(4096)]  # bulk headers of the common lengths
_CRLF = b"\r\n"


def encode_block(block: Sequence[Sequence[bytes]]) -> bytes:
    """The commands of a block (one column per argument, as the RESP parser gives a run of
    commands with one argument count) as RESP, back to back: what encode_command gives for each
    row, joined. In C where pynq_kv._respframe was built (for bytes arguments)."""
    if _encode_block_c is not None:
        try:
            return _encode_block_c(block)
        except TypeError:
            pass
    return encode_block_py(block)


def encode_block_py(block: Sequence[Sequence[bytes]]) -> bytes:
    """encode_block in Python, built a column at a time."""
    rows = len(block[0])
    stride = 1 + 3 * len(block)
    parts: list[bytes] = [b""] * (rows * stride)
    parts[0::stride] = [b"*%d\r\n" % len(block)] * rows
    crlfs = [_CRLF] * rows
    for column, start in zip(block, range(1, stride, 3)):
        sizes = list(map(len, column))
        if sizes.count(sizes[0]) == rows and sizes[0] < 4096:
            parts[start::stride] = [_HEADS[sizes[0]]] * rows
        elif max(sizes) < 4096:
            parts[start::stride] = list(map(_HEADS.__getitem__, sizes))
        else:
            parts[start::stride] = [b"$%d\r\n" % size for size in sizes]
        parts[start + 1::stride] = column
        parts[start + 2::stride] = crlfs
    return b"".join(parts)


def reply_end(buf: bytes, pos: int) -> int:
    """Where the reply starting at buf[pos] ends, or -1 if buf does not hold all of it yet."""
    need = 1
    size = len(buf)
    while need:
        if pos >= size:
            return -1
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return -1
        kind = buf[pos]
        need -= 1
        if kind in _LINE_TYPES:
            pos = eol + 2
            continue
        try:
            count = int(buf[pos + 1:eol])
        except ValueError:
            raise ProtocolError(f"bad length line {bytes(buf[pos:eol])[:40]!r}") from None
        if kind in _BULK_TYPES:
            pos = eol + 2 if count < 0 else eol + 4 + count
        elif kind in _LIST_TYPES:
            pos = eol + 2
            need += max(count, 0)
            find = buf.find
            while need and pos < size and buf[pos] == 36:  # a run of bulk strings: LRANGE, MGET
                eol = find(b"\r\n", pos)
                if eol < 0:
                    return -1
                count = int(buf[pos + 1:eol])
                pos = eol + 2 if count < 0 else eol + 4 + count
                need -= 1
        elif kind in _PAIR_TYPES:
            pos = eol + 2
            need += 2 * max(count, 0) + (kind == 124)  # an attribute precedes a reply
        else:
            raise ProtocolError(f"unknown reply type {bytes([kind])!r}")
    return pos if pos <= size else -1


def frame_replies_py(buf: bytes, pos: int, limit: int) -> tuple[int, int, int]:
    """(end, count, errors): the complete replies from buf[pos], at most limit of them; end is
    where the last ends, errors how many of them are errors ("-"). Stops before a push (">"),
    which answers no request. Lengths are decimal as Redis writes them. A ValueError
    (ProtocolError here) if the bytes are not RESP. `frame_replies` is this, or the same in C."""
    count = errors = 0
    size = len(buf)
    while count < limit and pos < size and buf[pos] != 62:
        end = reply_end(buf, pos)
        if end < 0:
            break
        errors += buf[pos] == 45
        count += 1
        pos = end
    return pos, count, errors


try:
    from ._respframe import frame as frame_replies
except ImportError:  # installed without a C compiler: the Python framer, slower
    frame_replies = frame_replies_py


def bulk_value(reply: bytes) -> Optional[bytes]:
    """The string of a bulk-string reply, None for anything else (nil, an error, ...)."""
    if reply[:1] != b"$":
        return None
    eol = reply.index(b"\r\n")
    size = int(reply[1:eol])
    return None if size < 0 else reply[eol + 2:eol + 2 + size]


def integer_value(reply: bytes) -> Optional[int]:
    """The number of an integer reply, None for anything else."""
    return int(reply[1:-2]) if reply[:1] == b":" else None


class _Run:
    """Replies owed to one handler for a run of requests (Link.send_many)."""

    __slots__ = ("handler", "left", "parts", "errors")

    def __init__(self, handler: RunHandler, count: int) -> None:
        self.handler = handler
        self.left = count
        self.parts: list[bytes] = []
        self.errors = 0


class Link(asyncio.Protocol):
    """One connection to Redis: requests written in order, replies handed out in order.

    Requests may be made before the connection is up (they wait), and while the link is
    `held` (a client moving to its own connection waits for its replies on the shared one).
    Replies that answer no request — RESP3 pushes — go to on_push. In `raw` mode every byte
    Redis sends goes to the raw sink unframed (a subscribed client: messages come unasked).
    """

    def __init__(self, label: str, on_lost: Callable[["Link", Optional[BaseException]], None],
                 handshake: Sequence[Sequence[bytes]] = (),
                 on_push: Optional[Handler] = None) -> None:
        self.label = label
        self.on_lost = on_lost
        self.on_push = on_push
        self.transport: Any = None
        self.handlers: deque[Any] = deque()  # a Handler per request, a _Run per run
        self.out: list[bytes] = []
        self.queued = 0  # requests in out
        self.buf = b""
        self.held = False
        self.closed = False
        self.raw_sink: Optional[Callable[[bytes], None]] = None
        self._raw_next: Optional[Callable[[bytes], None]] = None
        self._flush_scheduled = False
        self._loop = asyncio.get_event_loop()
        for args in handshake:
            self.send(encode_command(args), self._handshake_reply)

    def _handshake_reply(self, reply: bytes) -> None:
        if reply[:1] == b"-":
            log.error("Redis refused %s's handshake: %s", self.label, reply.strip().decode("latin-1"))
            self.close()

    @property
    def pending(self) -> int:
        """Requests sent or queued whose replies have not come."""
        return sum(h.left if type(h) is _Run else 1 for h in self.handlers)

    # -- requests -------------------------------------------------------------------------------
    def send(self, payload: bytes, handler: Handler) -> None:
        """Queue one request; its reply goes to handler. Written at the end of this loop turn."""
        if self.closed:
            handler(b"-ERR host tier connection closed\r\n")
            return
        self.out.append(payload)
        self.handlers.append(handler)
        self._queue(1)

    def send_many(self, payload: bytes, count: int, handler: RunHandler) -> None:
        """Queue count requests written back to back in payload; handler gets their replies
        once all are in, as one byte string, with how many of them are errors."""
        if self.closed:
            error = b"-ERR host tier connection closed\r\n"
            handler(error * count, count)
            return
        self.out.append(payload)
        self.handlers.append(_Run(handler, count))
        self._queue(count)

    def send_raw(self, payload: bytes) -> None:
        """Bytes for a link in raw mode (no reply is matched to them)."""
        if not self.closed:
            self.out.append(payload)
            self._schedule()

    def _queue(self, count: int) -> None:
        self.queued += count
        if self.queued >= EARLY_WRITE:
            self.flush()
        else:
            self._schedule()

    def _schedule(self) -> None:
        if not self._flush_scheduled and self.transport is not None and not self.held:
            self._flush_scheduled = True
            self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write what was queued, in one write."""
        self._flush_scheduled = False
        if self.out and self.transport is not None and not self.held and not self.closed:
            data = self.out[0] if len(self.out) == 1 else b"".join(self.out)
            self.out.clear()
            self.queued = 0
            self.transport.write(data)

    def go_raw(self, sink: Callable[[bytes], None]) -> None:
        """Once every request sent so far is answered, hand all further bytes to sink unframed."""
        if self.handlers:
            self._raw_next = sink
        else:
            self.raw_sink = sink

    def release(self) -> None:
        """Stop holding: what was queued goes out."""
        self.held = False
        self._schedule()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        else:
            self.connection_lost(None)

    # -- asyncio.Protocol -----------------------------------------------------------------------
    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self._schedule()

    def data_received(self, data: bytes) -> None:
        if self.raw_sink is not None:
            self.raw_sink(data)
            return
        buf = self.buf + data if self.buf else data
        pos = 0
        size = len(buf)
        handlers = self.handlers
        try:
            while pos < size:
                if buf[pos] == 62:  # > a push: answers no request
                    end = reply_end(buf, pos)
                    if end < 0:
                        break
                    if self.on_push is not None:
                        self.on_push(buf[pos:end])
                    pos = end
                    continue
                if not handlers:
                    raise ProtocolError("a reply to no request")
                head = handlers[0]
                if type(head) is _Run:
                    end, count, errors = frame_replies(buf, pos, head.left)
                    if not count:
                        if end < size and buf[end] == 62:
                            continue
                        break
                    head.parts.append(buf[pos:end])
                    head.errors += errors
                    head.left -= count
                    pos = end
                    if head.left:
                        continue
                    handlers.popleft()
                    head.handler(head.parts[0] if len(head.parts) == 1 else b"".join(head.parts),
                                 head.errors)
                else:
                    end, count, _ = frame_replies(buf, pos, 1)
                    if not count:
                        break
                    handlers.popleft()
                    head(buf[pos:end])
                    pos = end
                if self._raw_next is not None and not handlers:  # the last framed reply
                    self.raw_sink, self._raw_next = self._raw_next, None
                    if pos < size:
                        self.raw_sink(buf[pos:])
                    pos = size
                    break
        except ValueError as exc:  # ProtocolError, or the C framer's
            log.error("%s: %s; closing the connection", self.label, exc)
            self.buf = b""
            self.transport.abort()
            return
        self.buf = buf[pos:] if pos < size else b""

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if self.closed:
            return
        self.closed = True
        self.out.clear()
        self.queued = 0
        self.on_lost(self, exc)
        error = b"-ERR host tier connection lost\r\n"
        handlers = self.handlers
        while handlers:
            head = handlers.popleft()
            if type(head) is _Run:
                head.handler(b"".join(head.parts) + error * head.left, head.errors + head.left)
            else:
                head(error)


__all__ = ["Link", "ProtocolError", "bulk_value", "encode_command", "integer_value", "reply_end"]
