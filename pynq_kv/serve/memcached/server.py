"""The memcached front-end in software: binary + text subset over UDP (docs/frontend.md).

`handle_datagram` is the whole protocol as a function of the engine state and one UDP payload;
it is the reference model the RTL front-end is compared with. `start_udp_server` serves it on an
asyncio UDP socket for the appliance, so the data plane works without a board. A datagram is
parsed, planned into runs of one engine operation, run and rendered by `serve.batch.Pipeline`,
the batching both servers share; `_Wire` checks its keys and values (the engine's limits,
`pynq_kv.limits.Limits`).

With a host tier (`appliance.tier`, a Redis behind the engine) the same plan runs through it
instead (`handle_datagram_tiered`, docs/hosttier.md "Every front-end writes through"): gets read
the engine, then Redis for its misses; sets and deletes go to Redis and are answered once Redis
acknowledged them. The datagram's replies are sent when Redis has answered. The checks are
memcached's own limits there (`MEMCACHED_MAX_KEY`, `MEMCACHED_MAX_VALUE`), not the engine's: what
the engine cannot hold stays in Redis. For what both accept the replies are the same bytes as
without a tier.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import Counter
from time import perf_counter
from typing import Any, Callable, Optional, Union, cast

import numpy as np

from ...appliance import Appliance
from ...backend import MatchKind, SetStatus
from ...engine import KVEngine
from ...keys import ints_to_raw, tagged_rows
from ...latency import LatencyRecorder
from ...net.addr import is_loopback
from ...net.codec import (
    GET_EXTRAS,
    NO_ENTRY,
    SET_EXTRAS,
    VERSION_STRING,
    CodecError,
    Opcode,
    Request,
    Response,
    Status,
    error_response,
    match_extras,
    parse_request,
)
from ...net.text import (
    DELETED,
    END,
    NOT_FOUND,
    R_BADCHUNK,
    R_BADFMT,
    R_BUDGET,
    R_FLAGS,
    R_NOMEM,
    R_TOOLARGE,
    STORED,
    TextDelete,
    TextGet,
    TextReply,
    TextSet,
    TextVersion,
    is_error,
    parse_text,
    value_unit,
    version_reply,
)
from ...net.udpframe import FRAME_HEADER_LEN, MAX_DATAGRAM, FrameHeader
from ...admission import Admission, AdmissionError, admission_from_options, admit
from ...limits import Limits
from ...tier import HostTierUnavailable, RedisRefused, Tier
from ..batch import Pipeline

log = logging.getLogger("pynq_kv.serve.memcached")

# Counters both implementations keep (frontend.md §8), in the order of that table.
DATAGRAM_COUNTERS = ("rx_datagrams", "drop_short", "drop_multi_datagram", "served",
                     "requests_binary", "requests_text", "drop_bad_magic", "req_truncated",
                     "responses", "errors", "tx_datagrams")
# The guard's counters (frontend.md §10), kept apart because the RTL core packs the ones above
# in that order.
GUARD_COUNTERS = ("drop_denied", "budget_exceeded")
ERROR_STATUSES = frozenset({Status.VALUE_TOO_LARGE, Status.INVALID_ARGUMENTS,
                            Status.UNKNOWN_COMMAND, Status.OUT_OF_MEMORY, Status.BUSY,
                            Status.TEMPORARY_FAILURE})
UDP_RECV_BUFFER = 4 << 20  # loopback bursts from load generators overflow the default buffer
# With a host tier: datagrams waiting for Redis at most; more are dropped (counted in
# drop_tier_busy), as a full socket buffer would drop them, so a flood cannot queue without bound.
TIER_MAX_PENDING = 4096
# With a host tier a request is checked against memcached's own limits instead of the engine's
# (docs/hosttier.md): keys of at most 250 bytes (memcached's KEY_MAX_LENGTH) and values of at
# most 1 MiB (its default item size, `-I 1m`). A SET's value is also bounded by its request
# datagram (requests never span datagrams); a GET's may come from Redis, written by any client.
MEMCACHED_MAX_KEY = 250
MEMCACHED_MAX_VALUE = 1 << 20

Counters = Counter  # counter name -> count; missing names read 0


Render = Callable[[Any], Optional[bytes]]  # an engine answer -> the reply (None: no reply)


class _Failure:
    """The answer of a request the host tier could not serve as asked: a Redis value longer than
    this front-end carries, or Redis down or refusing (every request of that run gets it)."""

    __slots__ = ("status", "body", "line")

    def __init__(self, status: int, body: bytes, line: bytes) -> None:
        self.status = status  # binary status, with body as the message
        self.body = body
        self.line = line  # the text protocol's reply

    def response(self, opcode: int, opaque: int) -> bytes:
        return Response(opcode, self.status, value=self.body, opaque=opaque).encode()


# A value in Redis longer than a SET through this front-end may store (MEMCACHED_MAX_VALUE).
_TOO_LARGE = _Failure(Status.VALUE_TOO_LARGE, b"Too large.", R_TOOLARGE)


def _tier_failure(exc: Exception) -> _Failure:
    text = str(exc).encode("utf-8", "replace").replace(b"\r", b" ").replace(b"\n", b" ")
    return _Failure(Status.TEMPORARY_FAILURE, text, b"SERVER_ERROR %s\r\n" % text)


class _TextValues:
    """A text get of several keys as one pipeline item: its VALUE units, rendered from one
    engine answer per key (a datagram may carry 30,000 keys; one item each would cost more than
    the lookups)."""

    __slots__ = ("keys", "wire")

    def __init__(self, keys: list[bytes], wire: _Wire) -> None:
        self.keys = keys
        self.wire = wire

    def render(self, answers: list[Any]) -> list[bytes]:
        wire_value = self.wire.wire_value
        if self.wire.tiered:  # a key's failure stands in its VALUE unit's place
            return [raw.line if raw.__class__ is _Failure else value_unit(key, raw)
                    for key, raw in zip(self.keys, answers, strict=True) if raw is not None]
        return [value_unit(key, wire_value(raw))
                for key, raw in zip(self.keys, answers, strict=True) if raw is not None]


# a reply ready without the engine, how to render one answer, or a text get's VALUE units
_Item = Union[bytes, Render, _TextValues]


class _Wire:
    """The limits and encodings this front-end uses (frontend.md §4.3): the engine's."""

    tiered = False

    def __init__(self, engine: KVEngine) -> None:
        limits = Limits(engine)
        self.max_key = limits.max_key  # the longest key a request may carry
        self.max_value = limits.max_value  # the longest value a SET may carry, a GET answer
        self.key_bytes = engine.geometry.key_bytes
        self.value_bytes = engine.geometry.value_bytes
        self.raw_value: Callable[[bytes], Any] = engine.value_format.encode

    def key_fits(self, key: bytes) -> bool:
        return len(key) <= self.max_key

    def keys_fit(self, keys: tuple[bytes, ...]) -> bool:
        """All of (at least one) keys fit."""
        return max(map(len, keys)) <= self.max_key

    def value_fits(self, value: bytes) -> bool:
        return len(value) <= self.max_value

    def wire_value(self, raw: bytes) -> bytes:
        """A raw value as the wire shows it: the tagged bytes, or all of it if not tagged."""
        length = raw[0]
        return raw[1:1 + length] if length < self.value_bytes else raw


def _as_is(data: Any) -> Any:
    return data


class _TierWire(_Wire):
    """With a host tier: memcached's own limits (what the engine cannot hold stays in Redis),
    and values travel as the bytes Redis holds: a SET's value is its data, and answers are
    already wire values (_run_tiered converts the engine's)."""

    tiered = True

    def __init__(self, engine: KVEngine) -> None:
        super().__init__(engine)
        self.max_key = MEMCACHED_MAX_KEY
        self.max_value = MEMCACHED_MAX_VALUE
        self.raw_value = _as_is

    def wire_value(self, raw: bytes) -> bytes:
        return raw


def _rows(items: list[bytes], width: int) -> np.ndarray:
    return np.frombuffer(b"".join(items), dtype=np.uint8).reshape(len(items), width)


def _raw_values(values: np.ndarray, width: int) -> np.ndarray:
    """Raw value rows; integer engines of up to 64 bits hand back integers instead."""
    return values if values.dtype == np.uint8 else ints_to_raw(values, width)


def _runner(engine: KVEngine, wire: _Wire) -> Callable[[str, list[bytes], list[bytes]], list[Any]]:
    """Runs one run of keys (checked to fit) and raw values as one engine batch (engine.md §7):
    its answers."""
    def run(kind: str, keys: list[bytes], values: list[bytes]) -> list[Any]:
        rows = tagged_rows(keys, wire.key_bytes)
        if kind == "get":
            hit, found = engine.get_batch(rows)
            raw = _raw_values(found, wire.value_bytes)
            return [v.tobytes() if h else None for h, v in zip(hit, raw, strict=True)]
        if kind == "lookup":
            match = engine.lookup_batch(rows)
            raw = _raw_values(match.values, wire.value_bytes)
            return [(int(k), v.tobytes(), int(e))
                    for k, v, e in zip(match.kind, raw, match.entry, strict=True)]
        if kind == "set":
            return [int(s) for s in engine.set_batch(rows, _rows(values, wire.value_bytes))]
        return [bool(d) for d in engine.delete_batch(rows)]

    return run


def _renderer(out: list[bytes]) -> Callable[[str, list[_Item], Optional[list[Any]]], None]:
    """Appends the replies of a run's items, in order, to out."""
    def render(kind: str, items: list[_Item], answers: Optional[list[Any]]) -> None:
        j = 0
        for item in items:
            if isinstance(item, bytes):
                out.append(item)
                continue
            assert answers is not None
            if isinstance(item, _TextValues):
                out.extend(item.render(answers[j:j + len(item.keys)]))
                j += len(item.keys)
                continue
            reply = item(answers[j])
            j += 1
            if reply is not None:
                out.append(reply)

    return render


# -- binary (frontend.md §4-§5) ---------------------------------------------------------
# opcode -> (extras length, key required (else must be empty), value allowed)
_SHAPES = {
    Opcode.GET: (0, True, False), Opcode.GETQ: (0, True, False),
    Opcode.GETK: (0, True, False), Opcode.GETKQ: (0, True, False),
    Opcode.SET: (8, True, True), Opcode.SETQ: (8, True, True),
    Opcode.DELETE: (0, True, False), Opcode.DELETEQ: (0, True, False),
    Opcode.NOOP: (0, False, False), Opcode.VERSION: (0, False, False),
    Opcode.MATCH: (0, True, False),
}
_GETS = {Opcode.GET, Opcode.GETQ, Opcode.GETK, Opcode.GETKQ}
_SETS = {Opcode.SET, Opcode.SETQ}
_DELETES = {Opcode.DELETE, Opcode.DELETEQ}
_QUIET = {Opcode.GETQ, Opcode.GETKQ, Opcode.SETQ, Opcode.DELETEQ}
_WITH_KEY = {Opcode.GETK, Opcode.GETKQ}
_FLAGS_ZERO = GET_EXTRAS.pack(0)


def _refusal(request: Request, wire: _Wire) -> Optional[int]:
    """The error status of §4.1 steps 5-10 for a well-framed request, or None to run it."""
    shape = _SHAPES.get(request.opcode)
    if shape is None:
        return Status.UNKNOWN_COMMAND
    extras, needs_key, value_ok = shape
    if (len(request.extras) != extras or bool(request.key) != needs_key
            or (request.value and not value_ok)):
        return Status.INVALID_ARGUMENTS
    if not wire.key_fits(request.key):
        return Status.INVALID_ARGUMENTS
    if request.cas and (request.opcode in _SETS or request.opcode in _DELETES):
        return Status.INVALID_ARGUMENTS
    if request.opcode in _SETS:
        if SET_EXTRAS.unpack(request.extras) != (0, 0):
            return Status.INVALID_ARGUMENTS
        if not wire.value_fits(request.value):
            return Status.VALUE_TOO_LARGE
    return None


def _plan_binary_request(pipe: Pipeline[_Item], request: Request, wire: _Wire) -> None:
    opcode, opaque, key = request.opcode, request.opaque, request.key
    status = _refusal(request, wire)
    if status is not None:
        pipe.ready(error_response(opcode, status, opaque).encode())
        return
    quiet = opcode in _QUIET
    if opcode == Opcode.NOOP:
        pipe.ready(Response(opcode, opaque=opaque).encode())
    elif opcode == Opcode.VERSION:
        pipe.ready(Response(opcode, value=VERSION_STRING, opaque=opaque).encode())
    elif opcode in _GETS:
        echo = key if opcode in _WITH_KEY else b""

        def render_get(result: Any) -> Optional[bytes]:
            if result is not None:
                if result.__class__ is _Failure:
                    return result.response(opcode, opaque)
                return Response(opcode, key=echo, extras=_FLAGS_ZERO,
                                value=wire.wire_value(result), opaque=opaque).encode()
            if quiet:
                return None
            if echo:
                return Response(opcode, Status.KEY_NOT_FOUND, key=echo, opaque=opaque).encode()
            return error_response(opcode, Status.KEY_NOT_FOUND, opaque).encode()

        pipe.add("get", render_get, key)
    elif opcode in _SETS:
        def render_set(result: Any) -> Optional[bytes]:
            if result.__class__ is _Failure:
                return result.response(opcode, opaque)
            if result == SetStatus.FULL:
                return error_response(opcode, Status.OUT_OF_MEMORY, opaque).encode()
            return None if quiet else Response(opcode, opaque=opaque).encode()

        pipe.add("set", render_set, key, wire.raw_value(request.value))
    elif opcode in _DELETES:
        def render_delete(result: Any) -> Optional[bytes]:
            if result.__class__ is _Failure:
                return result.response(opcode, opaque)
            if not result:
                return error_response(opcode, Status.KEY_NOT_FOUND, opaque).encode()
            return None if quiet else Response(opcode, opaque=opaque).encode()

        pipe.add("del", render_delete, key)
    else:  # MATCH
        def render_match(result: Any) -> Optional[bytes]:
            if result.__class__ is _Failure:
                return result.response(opcode, opaque)
            kind, raw, entry = result
            if kind == MatchKind.MISS:
                return error_response(opcode, Status.KEY_NOT_FOUND, opaque).encode()
            extras = match_extras(kind, entry if kind == MatchKind.RULE else NO_ENTRY)
            return Response(opcode, extras=extras, value=wire.wire_value(raw),
                            opaque=opaque).encode()

        pipe.add("lookup", render_match, key)


def _plan_binary(pipe: Pipeline[_Item], body: bytes, wire: _Wire, counters: Counters) -> None:
    offset = 0
    while offset < len(body):
        try:
            request, offset = parse_request(body, offset)
        except CodecError as exc:
            if exc.reason == "short_header":
                counters["req_truncated"] += 1
                break
            if exc.reason == "bad_magic":
                counters["drop_bad_magic"] += 1
                break
            # short_body or inconsistent_lengths: answered, as memcached answers them
            counters["requests_binary"] += 1
            assert exc.opcode is not None and exc.opaque is not None
            pipe.ready(error_response(exc.opcode, Status.INVALID_ARGUMENTS, exc.opaque).encode())
            if exc.next_offset is None:
                counters["req_truncated"] += 1
                break
            offset = exc.next_offset
            continue
        counters["requests_binary"] += 1
        _plan_binary_request(pipe, request, wire)


# -- text (frontend.md §6) --------------------------------------------------------------
def _plan_text(pipe: Pipeline[_Item], body: bytes, wire: _Wire, counters: Counters) -> None:
    commands, truncated = parse_text(body)
    counters["requests_text"] += len(commands)
    if truncated:
        counters["req_truncated"] += 1
    for command in commands:
        if isinstance(command, TextReply):
            pipe.ready(command.reply)
        elif isinstance(command, TextVersion):
            pipe.ready(version_reply(VERSION_STRING))
        elif isinstance(command, TextGet):
            if not wire.keys_fit(command.keys):
                pipe.ready(R_BADFMT)
                continue
            pipe.extend("get", _TextValues(command.keys, wire), command.keys)
            pipe.ready(END)
        elif isinstance(command, TextSet):
            if not wire.key_fits(command.key):
                pipe.ready(R_BADFMT)
            elif command.flags or command.exptime:
                pipe.ready(R_FLAGS)
            elif not wire.value_fits(command.data):
                pipe.ready(R_TOOLARGE)
            elif not command.chunk_ok:
                pipe.ready(R_BADCHUNK)
            else:
                def render_stored(result: Any, noreply: bool = command.noreply) -> Optional[bytes]:
                    if result.__class__ is _Failure:
                        return result.line
                    if result == SetStatus.FULL:
                        return R_NOMEM
                    return None if noreply else STORED

                pipe.add("set", render_stored, command.key,
                         wire.raw_value(command.data))
        else:
            assert isinstance(command, TextDelete)
            if not wire.key_fits(command.key):
                pipe.ready(R_BADFMT)
                continue

            def render_deleted(result: Any, noreply: bool = command.noreply) -> Optional[bytes]:
                if result.__class__ is _Failure:
                    return result.line
                if noreply:
                    return None
                return DELETED if result else NOT_FOUND

            pipe.add("del", render_deleted, command.key)


def _count_errors(replies: list[bytes], binary: bool) -> int:
    if binary:
        return sum(int.from_bytes(r[6:8], "big") in ERROR_STATUSES for r in replies)
    return sum(is_error(r) for r in replies)


def _open(payload: bytes, counters: Counters) -> Optional[tuple[FrameHeader, bytes]]:
    """The frame header and body of a datagram to serve, counted (frontend.md §3); None: no
    reply (dropped, or an empty body)."""
    counters["rx_datagrams"] += 1
    if len(payload) < FRAME_HEADER_LEN:
        counters["drop_short"] += 1
        return None
    header = FrameHeader.unpack(payload)
    if header.total != 1:
        counters["drop_multi_datagram"] += 1
        return None
    counters["served"] += 1
    body = bytes(payload[FRAME_HEADER_LEN:])
    return (header, body) if body else None


def _close(header: FrameHeader, replies: list[bytes], binary: bool, payload: bytes,
           counters: Counters, budget: int) -> list[bytes]:
    """The reply datagrams of a datagram's replies: the budget applied, counted, packed."""
    if budget:
        kept = _within_budget(replies, budget * len(payload))
        if len(kept) < len(replies):
            counters["budget_exceeded"] += 1
            replies = kept + [_budget_reply(replies[len(kept)], binary)]
    counters["responses"] += len(replies)
    counters["errors"] += _count_errors(replies, binary)
    datagrams = _pack(header.request_id, replies)
    counters["tx_datagrams"] += len(datagrams)
    return datagrams


def handle_datagram(engine: KVEngine, payload: bytes, counters: Optional[Counters] = None,
                    budget: int = 0) -> list[bytes]:
    """The reply UDP payloads (frame header included) for one request payload, in order.

    Runs the datagram's engine operations on engine and adds to counters (frontend.md §8).
    budget is the multiplier M of frontend.md §10: the replies total at most M times the
    payload's bytes, past which one budget reply stands for the rest; 0 = no budget.
    """
    counters = Counter() if counters is None else counters
    opened = _open(payload, counters)
    if opened is None:
        return []
    header, body = opened
    wire = _Wire(engine)
    binary = body[0] == 0x80
    replies: list[bytes] = []
    # Replies answered without the engine join the current run: they do not touch the table,
    # so batching across them keeps the sequential meaning.
    pipe: Pipeline[_Item] = Pipeline(_runner(engine, wire), _renderer(replies))
    (_plan_binary if binary else _plan_text)(pipe, body, wire, counters)
    pipe.flush()
    return _close(header, replies, binary, payload, counters, budget)


async def handle_datagram_tiered(tier: Tier, payload: bytes, counters: Optional[Counters] = None,
                                 budget: int = 0) -> list[bytes]:
    """handle_datagram with a host tier: the same plan, each run through the tier in order
    (awaiting Redis), so the datagram means the same as its requests one after another."""
    counters = Counter() if counters is None else counters
    opened = _open(payload, counters)
    if opened is None:
        return []
    header, body = opened
    engine = tier.appliance.engine
    wire = _TierWire(engine)
    binary = body[0] == 0x80
    runs: list[tuple[str, list[_Item], Optional[tuple[list[bytes], list[bytes]]]]] = []
    # Planned first, every run recorded (the pipeline empties its lists), then run in order.
    pipe: Pipeline[_Item] = Pipeline(lambda kind, keys, values: (list(keys), list(values)),
                                     lambda kind, items, batch: runs.append((kind, list(items), batch)))
    (_plan_binary if binary else _plan_text)(pipe, body, wire, counters)
    pipe.flush()
    replies: list[bytes] = []
    render = _renderer(replies)
    for kind, items, batch in runs:
        answers = None if batch is None else await _run_tiered(tier, wire, kind, *batch)
        render(kind, items, answers)
    return _close(header, replies, binary, payload, counters, budget)


async def _run_tiered(tier: Tier, wire: _Wire, kind: str, keys: list[bytes],
                      values: list[bytes]) -> list[Any]:
    """One run through the host tier: its answers as the renderers take them, with wire
    values (a _Failure for each request of a run Redis could not serve). Keys and values the
    engine cannot hold go to Redis alone (the tier decides, `Tier.limits`)."""
    try:
        if kind == "get":
            return [_TOO_LARGE if text is not None and len(text) > wire.max_value else text
                    for text in await tier.get_many(keys)]
        if kind == "set":
            await tier.set_many(list(zip(keys, values)))
            return [None] * len(keys)  # stored (never FULL: the engine is a cache)
        if kind == "del":
            return await tier.delete_each(keys)
        return await _match_tiered(tier, wire, keys)
    except (HostTierUnavailable, RedisRefused) as exc:
        return [_tier_failure(exc)] * len(keys)


async def _match_tiered(tier: Tier, wire: _Wire, keys: list[bytes]) -> list[Any]:
    """MATCH with a host tier: the engine's exact entries and rules for the keys it can hold (a
    longer key matches no rule: the rules are engine keys), and a key only Redis holds is an
    exact hit."""
    tier.apply_invalidations()
    engine = tier.appliance.engine
    limits = tier.limits()
    engine_wire = _Wire(engine)
    answers: list[Any] = [(int(MatchKind.MISS), b"", 0)] * len(keys)
    held = [i for i, key in enumerate(keys) if limits.key_fits(key)]
    if held:
        found = _runner(engine, engine_wire)("lookup", [keys[i] for i in held], [])
        for i, (kind, raw, entry) in zip(held, found, strict=True):
            answers[i] = (kind, engine_wire.wire_value(raw), entry)
    others = [i for i, answer in enumerate(answers) if answer[0] != MatchKind.EXACT]
    if others:
        for i, text in zip(others, await tier.fetch_many([keys[i] for i in others])):
            if text is not None:
                answers[i] = (_TOO_LARGE if len(text) > wire.max_value
                              else (int(MatchKind.EXACT), text, 0))
    return answers


def handle_datagram_from(engine: KVEngine, payload: bytes, source: str, admission: Admission,
                         counters: Optional[Counters] = None) -> list[bytes]:
    """handle_datagram behind the admission table: the whole software data plane (§10).

    source is the sender's address as the socket reports it; a denied datagram is counted in
    drop_denied only (it never reaches §3) and gets no reply.
    """
    counters = Counter() if counters is None else counters
    budget = _admitted(admission, source, counters)
    return [] if budget is None else handle_datagram(engine, payload, counters, budget)


def _admitted(admission: Admission, source: str, counters: Counters) -> Optional[int]:
    """The reply budget of a datagram from source, or None (counted) if it is denied."""
    allowed, budget = admit(admission, source)
    if not allowed:
        counters["drop_denied"] += 1
        return None
    return budget


_ROOM = MAX_DATAGRAM - FRAME_HEADER_LEN  # response bytes one reply datagram holds


def _place(used: int, size: int) -> tuple[int, int]:
    """Where _pack puts a response of size bytes when the open reply datagram holds used bytes
    (_ROOM: none is open): the datagrams it opens (0: it joins the open one; more than 1: a
    train of its own, which leaves none open) and the bytes the open datagram then holds."""
    if used + size <= _ROOM:
        return 0, used + size
    if size <= _ROOM:
        return 1, size
    return -(-size // _ROOM), _ROOM


def _within_budget(replies: list[bytes], limit: int) -> list[bytes]:
    """The leading responses packed within limit reply bytes (frontend.md §10).

    S, the reply bytes once a response is packed, follows _pack (_place): the datagrams so far,
    the response, and a frame header for each datagram it opens. The first response always goes
    if it fits one datagram; a longer one (a value from a host tier's Redis) is held to the
    budget like any other, so the bound on amplification stays.
    """
    total = 0  # bytes of the reply datagrams so far, headers included
    used = _ROOM  # bytes of responses in the open datagram; "full" before the first one
    for index, reply in enumerate(replies):
        opens, after = _place(used, len(reply))
        size = total + len(reply) + opens * FRAME_HEADER_LEN
        if size > limit and (index or opens > 1):
            return replies[:index]
        total, used = size, after
    return replies


def _budget_reply(cut: bytes, binary: bool) -> bytes:
    """What stands for the first withheld response and all after it (frontend.md §10)."""
    if not binary:
        return R_BUDGET
    opcode, opaque = cut[1], int.from_bytes(cut[12:16], "big")
    return error_response(opcode, Status.BUSY, opaque).encode()


def _pack(request_id: int, replies: list[bytes]) -> list[bytes]:
    """Whole responses back to back in datagrams of at most MAX_DATAGRAM bytes (§3).

    Each datagram carries the header (request id, 0, 1, 0) and can go out as soon as it is
    closed. A response longer than a datagram (only with a host tier: a value from Redis) is
    sent as memcached sends one: a train of its own, numbered datagrams (request id, i, n, 0).
    """
    single = FrameHeader(request_id).pack()
    datagrams: list[bytes] = []
    current: list[bytes] = []
    used = _ROOM
    for reply in replies:
        opens, used = _place(used, len(reply))
        if opens and current:
            datagrams.append(single + b"".join(current))
            current = []
        if opens > 1:
            datagrams.extend(FrameHeader(request_id, i, opens).pack()
                             + reply[i * _ROOM:(i + 1) * _ROOM] for i in range(opens))
        else:
            current.append(reply)
    if current:
        datagrams.append(single + b"".join(current))
    return datagrams


# -- the asyncio server ------------------------------------------------------------------
class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, server: "UdpServer") -> None:
        self.server = server
        self.transport: Optional[asyncio.DatagramTransport] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        """Answer one datagram; its latency is from here to the last reply's sendto returning."""
        start = perf_counter()
        server = self.server
        tier = server.tier()
        if tier is not None:  # the replies wait for Redis: answered by a task
            if len(server.pending) >= TIER_MAX_PENDING:
                server.counters["drop_tier_busy"] += 1
                return
            server.spawn(self._answer_tiered(tier, data, addr, start))
            return
        try:
            replies = server.handle(data, addr)
        except Exception:  # a backend failure must not stop the front-end serving others
            server.counters["internal_errors"] += 1
            log.exception("memcached/UDP: datagram from %s failed", addr)
            return
        assert self.transport is not None
        for reply in replies:
            self.transport.sendto(reply, addr)
        server.latency.observe(perf_counter() - start)

    async def _answer_tiered(self, tier: Tier, data: bytes, addr: Any, start: float) -> None:
        server = self.server
        try:
            replies = await server.handle_tiered(tier, data, addr)
        except Exception:  # as datagram_received: one datagram's failure stops nothing else
            server.counters["internal_errors"] += 1
            log.exception("memcached/UDP: datagram from %s failed", addr)
            return
        if self.transport is None or self.transport.is_closing():
            return
        for reply in replies:
            self.transport.sendto(reply, addr)
        server.latency.observe(perf_counter() - start)

    def error_received(self, exc: Exception) -> None:
        # ICMP port unreachable from a client that went away; nothing to answer.
        log.debug("memcached/UDP: %s", exc)


class UdpServer:
    """A running memcached/UDP front-end; engine calls happen on the event loop's thread."""

    def __init__(self, appliance: Appliance, admission: Admission) -> None:
        self.appliance = appliance
        self.admission = admission  # who is answered, with which reply budget (frontend.md §10)
        self.counters: Counters = Counter()
        self.latency = LatencyRecorder()  # one observation per datagram answered
        self._transport: Optional[asyncio.DatagramTransport] = None
        self.pending: set[asyncio.Task] = set()  # datagrams waiting for the host tier

    @property
    def port(self) -> int:
        assert self._transport is not None
        return int(self._transport.get_extra_info("sockname")[1])

    def handle(self, data: bytes, addr: Any) -> list[bytes]:
        """The reply datagrams for one request datagram from addr (the software data plane)."""
        return handle_datagram_from(self.appliance.engine, data, addr[0], self.admission,
                                    self.counters)

    def tier(self) -> Optional[Tier]:
        """The host tier requests go through (appliance.tier), None to answer from the engine
        alone."""
        return self.appliance.tier

    async def handle_tiered(self, tier: Tier, data: bytes, addr: Any) -> list[bytes]:
        """handle with a host tier: the reply datagrams once Redis has answered."""
        budget = _admitted(self.admission, addr[0], self.counters)
        if budget is None:
            return []
        return await handle_datagram_tiered(tier, data, self.counters, budget)

    def spawn(self, work: Any) -> None:
        """Run work as a task this server holds (and cancels at close)."""
        task = asyncio.get_running_loop().create_task(work)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    def stats(self) -> dict[str, int]:
        """The counters of frontend.md §8 and §10 this layer keeps, plus internal_errors (and
        with a host tier drop_tier_busy)."""
        out = {name: self.counters[name] for name in GUARD_COUNTERS + DATAGRAM_COUNTERS}
        out["internal_errors"] = self.counters["internal_errors"]
        if self.appliance.tier is not None:
            out["drop_tier_busy"] = self.counters["drop_tier_busy"]
        return out

    async def close(self) -> None:
        self.appliance.unregister_frontend("udp")
        for task in list(self.pending):
            task.cancel()
        if self.pending:
            await asyncio.wait(list(self.pending))
        if self._transport is not None:
            self._transport.close()
            self._transport = None


async def start_udp_server(appliance: Appliance, host: str = "127.0.0.1", port: int = 11211, *,
                           admission: Optional[Admission] = None,
                           server_class: type[UdpServer] = UdpServer) -> UdpServer:
    """Serve memcached binary + text over UDP on host:port (port 0 picks a free one).

    admission says who is answered and with which reply budget (frontend.md §10); without one,
    a loopback host gets serve's defaults (127.0.0.0/8 trusted, others allowed at 2x) and any
    other host is refused: a port reachable from elsewhere needs an explicit allow-list.
    server_class decides who answers: UdpServer runs the protocol in software; the virtual
    board's bridge (bridge.py) hands each datagram to the Verilated kv_top instead.
    """
    if admission is None:
        admission = admission_from_options(loopback_bind=is_loopback(host))
        if admission is None:
            raise AdmissionError(f"refusing to serve memcached/UDP on {host} (not loopback) "
                                 "without an admission table that allows some sources")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RECV_BUFFER)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    server = server_class(appliance, admission)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(lambda: _Protocol(server), sock=sock)
    server._transport = transport  # type: ignore[assignment]
    appliance.register_frontend("udp", server.stats, server.latency)
    return server

