"""memcached binary protocol: requests and responses as dataclasses, built and parsed strictly.

The same code serves the client (build requests, parse responses), the software server (parse
requests, build responses) and tests that compare pynq-kv with memcached byte for byte. The
semantics the server gives these messages are in docs/frontend.md §4-§5.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Optional

HEADER = struct.Struct(">BBHBBHIIQ")
HEADER_LEN = HEADER.size  # 24
MAGIC_REQUEST = 0x80
MAGIC_RESPONSE = 0x81
SET_EXTRAS = struct.Struct(">II")  # flags, expiration
GET_EXTRAS = struct.Struct(">I")  # flags
MATCH_EXTRAS = struct.Struct(">B3xI")  # kind, rule entry
NO_ENTRY = 0xFFFFFFFF  # MATCH entry field of an exact hit
VERSION_STRING = b"pynq-kv-1"  # frontend.md §5: fixed, the RTL returns the same bytes


class Opcode(IntEnum):
    """The opcodes pynq-kv serves (frontend.md §4.2); MATCH is pynq-kv's vendor opcode."""

    GET = 0x00
    SET = 0x01
    DELETE = 0x04
    GETQ = 0x09
    NOOP = 0x0A
    VERSION = 0x0B
    GETK = 0x0C
    GETKQ = 0x0D
    SETQ = 0x11
    DELETEQ = 0x14
    MATCH = 0xC0


class Status(IntEnum):
    """Response status codes of the binary protocol (those pynq-kv or memcached send)."""

    NO_ERROR = 0x0000
    KEY_NOT_FOUND = 0x0001
    KEY_EXISTS = 0x0002
    VALUE_TOO_LARGE = 0x0003
    INVALID_ARGUMENTS = 0x0004
    ITEM_NOT_STORED = 0x0005
    UNKNOWN_COMMAND = 0x0081
    OUT_OF_MEMORY = 0x0082
    BUSY = 0x0085  # memcached's EBUSY; pynq-kv: the reply exceeds the UDP budget (frontend.md §10)
    TEMPORARY_FAILURE = 0x0086  # memcached's ETMPFAIL; pynq-kv: the host tier's Redis failed


# Fixed error bodies, the same strings memcached 1.6 sends (frontend.md §5).
STATUS_MESSAGES = {
    Status.KEY_NOT_FOUND: b"Not found",
    Status.KEY_EXISTS: b"Data exists for key.",
    Status.VALUE_TOO_LARGE: b"Too large.",
    Status.INVALID_ARGUMENTS: b"Invalid arguments",
    Status.ITEM_NOT_STORED: b"Not stored.",
    Status.UNKNOWN_COMMAND: b"Unknown command",
    Status.OUT_OF_MEMORY: b"Out of memory",
    Status.BUSY: b"Use TCP",  # pynq-kv's own (frontend.md §10)
    Status.TEMPORARY_FAILURE: b"Temporary failure",  # with a host tier: its text (docs/hosttier.md)
}

QUIET_OPCODES = frozenset({Opcode.GETQ, Opcode.GETKQ, Opcode.SETQ, Opcode.DELETEQ})


class CodecError(ValueError):
    """A message that cannot be parsed or built.

    reason names what went wrong ("short_header", "bad_magic", "short_body",
    "inconsistent_lengths", "bad_field"). When the 24-byte header itself was readable, opcode and
    opaque are set so a server can still answer, and next_offset is where the next message
    starts if the framing survived (None when it did not).
    """

    def __init__(self, reason: str, message: str, *, opcode: Optional[int] = None,
                 opaque: Optional[int] = None, next_offset: Optional[int] = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.opcode = opcode
        self.opaque = opaque
        self.next_offset = next_offset


def _check_field(name: str, value: int, bits: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << bits:
        raise CodecError("bad_field", f"{name} must be an unsigned {bits}-bit integer, got {value!r}")


def _check_lengths(key: bytes, extras: bytes, value: bytes) -> None:
    if len(key) > 0xFFFF:
        raise CodecError("bad_field", f"key of {len(key)} bytes does not fit the 16-bit key length")
    if len(extras) > 0xFF:
        raise CodecError("bad_field", f"extras of {len(extras)} bytes do not fit the 8-bit length")
    if len(key) + len(extras) + len(value) > 0xFFFFFFFF:
        raise CodecError("bad_field", "body does not fit the 32-bit total body length")


@dataclass(frozen=True)
class Request:
    """One binary request; opcode is any 8-bit code (unknown ones are the server's business)."""

    opcode: int
    key: bytes = b""
    extras: bytes = b""
    value: bytes = b""
    opaque: int = 0
    cas: int = 0
    data_type: int = 0
    vbucket: int = 0

    def __post_init__(self) -> None:
        _check_field("opcode", self.opcode, 8)
        _check_field("opaque", self.opaque, 32)
        _check_field("cas", self.cas, 64)
        _check_field("data_type", self.data_type, 8)
        _check_field("vbucket", self.vbucket, 16)
        for name in ("key", "extras", "value"):
            if not isinstance(getattr(self, name), bytes):
                raise CodecError("bad_field", f"{name} must be bytes")
        _check_lengths(self.key, self.extras, self.value)

    @property
    def quiet(self) -> bool:
        return self.opcode in QUIET_OPCODES

    def encode(self) -> bytes:
        body = len(self.extras) + len(self.key) + len(self.value)
        return HEADER.pack(MAGIC_REQUEST, self.opcode, len(self.key), len(self.extras),
                           self.data_type, self.vbucket, body, self.opaque,
                           self.cas) + self.extras + self.key + self.value


@dataclass(frozen=True)
class Response:
    """One binary response; status is the 16-bit field in bytes 6-7 of the header."""

    opcode: int
    status: int = Status.NO_ERROR
    key: bytes = b""
    extras: bytes = b""
    value: bytes = b""
    opaque: int = 0
    cas: int = 0
    data_type: int = 0

    def __post_init__(self) -> None:
        _check_field("opcode", self.opcode, 8)
        _check_field("status", self.status, 16)
        _check_field("opaque", self.opaque, 32)
        _check_field("cas", self.cas, 64)
        _check_field("data_type", self.data_type, 8)
        for name in ("key", "extras", "value"):
            if not isinstance(getattr(self, name), bytes):
                raise CodecError("bad_field", f"{name} must be bytes")
        _check_lengths(self.key, self.extras, self.value)

    def encode(self) -> bytes:
        body = len(self.extras) + len(self.key) + len(self.value)
        return HEADER.pack(MAGIC_RESPONSE, self.opcode, len(self.key), len(self.extras),
                           self.data_type, self.status, body, self.opaque,
                           self.cas) + self.extras + self.key + self.value


def error_response(opcode: int, status: int, opaque: int) -> Response:
    """A response carrying the fixed message of an error status."""
    return Response(opcode, status, value=STATUS_MESSAGES[Status(status)], opaque=opaque)


def _parse(buf: bytes, offset: int, magic: int) -> tuple[tuple[int, ...], int]:
    """The header fields of the message at offset, and where its body starts; checks framing."""
    if len(buf) - offset < HEADER_LEN:
        raise CodecError("short_header", f"{len(buf) - offset} bytes left, a header needs "
                         f"{HEADER_LEN}")
    fields = HEADER.unpack_from(buf, offset)
    got_magic, opcode, key_len, extras_len, _, _, body_len, opaque, _ = fields
    if got_magic != magic:
        raise CodecError("bad_magic", f"magic 0x{got_magic:02x}, expected 0x{magic:02x}")
    start = offset + HEADER_LEN
    if len(buf) - start < body_len:
        raise CodecError("short_body", f"body of {body_len} bytes announced, {len(buf) - start} "
                         "present", opcode=opcode, opaque=opaque)
    if key_len + extras_len > body_len:
        raise CodecError("inconsistent_lengths", f"extras ({extras_len}) + key ({key_len}) exceed "
                         f"the body ({body_len})", opcode=opcode, opaque=opaque,
                         next_offset=start + body_len)
    return fields, start


def parse_request(buf: bytes, offset: int = 0) -> tuple[Request, int]:
    """The request at offset and the offset just after it; CodecError if it is malformed."""
    fields, start = _parse(buf, offset, MAGIC_REQUEST)
    _, opcode, key_len, extras_len, data_type, vbucket, body_len, opaque, cas = fields
    key_at = start + extras_len
    value_at = key_at + key_len
    end = start + body_len
    return Request(opcode, bytes(buf[key_at:value_at]), bytes(buf[start:key_at]),
                   bytes(buf[value_at:end]), opaque, cas, data_type, vbucket), end


def parse_response(buf: bytes, offset: int = 0) -> tuple[Response, int]:
    """The response at offset and the offset just after it; CodecError if it is malformed."""
    fields, start = _parse(buf, offset, MAGIC_RESPONSE)
    _, opcode, key_len, extras_len, data_type, status, body_len, opaque, cas = fields
    key_at = start + extras_len
    value_at = key_at + key_len
    end = start + body_len
    return Response(opcode, status, bytes(buf[key_at:value_at]), bytes(buf[start:key_at]),
                    bytes(buf[value_at:end]), opaque, cas, data_type), end


def parse_responses(buf: bytes) -> list[Response]:
    """Every response of a buffer that holds whole responses only."""
    out = []
    offset = 0
    while offset < len(buf):
        response, offset = parse_response(buf, offset)
        out.append(response)
    return out


def parse_requests(buf: bytes) -> list[Request]:
    """Every request of a buffer that holds whole requests only."""
    out = []
    offset = 0
    while offset < len(buf):
        request, offset = parse_request(buf, offset)
        out.append(request)
    return out


# -- request builders (the shapes frontend.md §4.2 accepts) -------------------------------
def get_request(key: bytes, opaque: int = 0, opcode: int = Opcode.GET) -> Request:
    return Request(opcode, key, opaque=opaque)


def set_request(key: bytes, value: bytes, *, flags: int = 0, exptime: int = 0, opaque: int = 0,
                cas: int = 0, quiet: bool = False) -> Request:
    _check_field("flags", flags, 32)
    _check_field("exptime", exptime, 32)
    return Request(Opcode.SETQ if quiet else Opcode.SET, key, SET_EXTRAS.pack(flags, exptime),
                   value, opaque, cas)


def delete_request(key: bytes, *, opaque: int = 0, quiet: bool = False) -> Request:
    return Request(Opcode.DELETEQ if quiet else Opcode.DELETE, key, opaque=opaque)


def match_request(key: bytes, opaque: int = 0) -> Request:
    return Request(Opcode.MATCH, key, opaque=opaque)


def match_extras(kind: int, entry: int) -> bytes:
    return MATCH_EXTRAS.pack(kind, entry)


def parse_match_extras(extras: bytes) -> tuple[int, int]:
    """(kind, entry) of a MATCH hit's extras."""
    if len(extras) != MATCH_EXTRAS.size:
        raise CodecError("bad_field", f"MATCH extras are {MATCH_EXTRAS.size} bytes, got {len(extras)}")
    return MATCH_EXTRAS.unpack(extras)
