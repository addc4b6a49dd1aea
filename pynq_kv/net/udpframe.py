"""The 8-byte memcached UDP frame header (docs/frontend.md §3)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

FRAME_HEADER = struct.Struct(">HHHH")
FRAME_HEADER_LEN = FRAME_HEADER.size  # 8
MAX_DATAGRAM = 1400  # largest reply datagram, header included (memcached's UDP_MAX_PAYLOAD_SIZE)


@dataclass(frozen=True)
class FrameHeader:
    """request id, sequence number, total datagrams, reserved: each an unsigned 16-bit field."""

    request_id: int
    sequence: int = 0
    total: int = 1
    reserved: int = 0

    def __post_init__(self) -> None:
        for name in ("request_id", "sequence", "total", "reserved"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0xFFFF:
                raise ValueError(f"{name} must be an unsigned 16-bit integer, got {value!r}")

    def pack(self) -> bytes:
        return FRAME_HEADER.pack(self.request_id, self.sequence, self.total, self.reserved)

    @classmethod
    def unpack(cls, payload: bytes) -> "FrameHeader":
        """The header at the start of a UDP payload; ValueError if it is shorter than 8 bytes."""
        if len(payload) < FRAME_HEADER_LEN:
            raise ValueError(f"a memcached UDP payload needs {FRAME_HEADER_LEN} header bytes, "
                             f"got {len(payload)}")
        return cls(*FRAME_HEADER.unpack_from(payload))


def wrap(request_id: int, body: bytes, sequence: int = 0, total: int = 1) -> bytes:
    """A UDP payload: the frame header followed by body."""
    return FrameHeader(request_id, sequence, total).pack() + body
