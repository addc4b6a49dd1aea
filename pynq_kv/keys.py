"""Byte-string, integer and raw encodings of keys and values (docs/engine.md §2).

Keys and values reach the engine as fixed-width big-endian byte arrays. Byte strings carry a
leading length byte so no two of them share an encoding.
"""

from __future__ import annotations

from typing import Iterable, Union

import numpy as np

from .errors import KeyFormatError, KeyTooLong, ValueFormatError, ValueTooLarge
from .geometry import KEY_WIDTHS

KeyLike = Union[bytes, bytearray, memoryview, str, int]
ValueLike = Union[bytes, bytearray, memoryview, str, int]
# What an engine's values are read back as: length-tagged byte strings, or integers (§2). An
# engine, its snapshots, the CLI's --value-kind and serve's value_kind all take these names.
VALUE_KINDS = ("bytes", "int")


class _TaggedFormat:
    """Shared length-tagged / integer codec for one width."""

    kind = "field"
    too_long: type[Exception] = KeyTooLong
    bad_format: type[Exception] = KeyFormatError

    def __init__(self, width: int) -> None:
        self.width = width
        self.nbytes = width // 8
        self.max_bytes = self.nbytes - 1

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.width})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.width == self.width  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self.width))

    def encode(self, item: KeyLike) -> bytes:
        """The raw big-endian encoding of one byte string, str or integer."""
        if isinstance(item, str):
            item = item.encode("utf-8")
        if isinstance(item, (bytes, bytearray, memoryview)):
            data = bytes(item)
            if len(data) > self.max_bytes:
                raise self.too_long(
                    f"{self.kind} of {len(data)} bytes does not fit a {self.width}-bit "
                    f"{self.kind} (at most {self.max_bytes} bytes)")
            return bytes((len(data),)) + data + bytes(self.max_bytes - len(data))
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            value = int(item)
            if not 0 <= value < 1 << self.width:
                raise self.bad_format(
                    f"integer {self.kind} {value} is outside 0 .. 2^{self.width}-1")
            return value.to_bytes(self.nbytes, "big")
        raise self.bad_format(
            f"a {self.kind} must be bytes, str or int, not {type(item).__name__}")

    def encode_many(self, items: Iterable[KeyLike]) -> np.ndarray:
        """Encode a sequence into an (N, nbytes) uint8 array; the first bad item raises."""
        encoded = b"".join(self.encode(item) for item in items)
        return np.frombuffer(encoded, dtype=np.uint8).reshape(-1, self.nbytes).copy()

    def is_tagged(self, raw: bytes) -> bool:
        """True when raw is a well-formed length-tagged byte string."""
        length = raw[0]
        return length <= self.max_bytes and not any(raw[1 + length:])

    def decode(self, raw: bytes) -> Union[bytes, int]:
        """Byte string when raw is length-tagged, else the raw integer."""
        if len(raw) == self.nbytes and self.is_tagged(raw):
            return raw[1:1 + raw[0]]
        return int.from_bytes(raw, "big")


class KeyFormat(_TaggedFormat):
    """Keys of one of the engine widths: bytes/str/int in, fixed-width raw keys out, and back."""

    kind = "key"
    too_long = KeyTooLong
    bad_format = KeyFormatError

    def __init__(self, width: int = 288) -> None:
        if width not in KEY_WIDTHS:
            raise KeyFormatError(f"key width must be one of {KEY_WIDTHS}, got {width}")
        super().__init__(width)


class ValueFormat(_TaggedFormat):
    """Values of VALUE_W bits: length-tagged byte strings or integers."""

    kind = "value"
    too_long = ValueTooLarge
    bad_format = ValueFormatError

    def __init__(self, width: int = 256) -> None:
        if width % 32 or not 32 <= width <= 512:
            raise ValueFormatError(f"value width must be a multiple of 32 from 32 to 512, got {width}")
        super().__init__(width)


_LENGTH = [bytes((n,)) for n in range(256)]


def tagged_rows(items: list[bytes], nbytes: int) -> np.ndarray:
    """(N, nbytes) uint8 rows of length-tagged byte strings, each at most nbytes - 1 long.

    The batch form of _TaggedFormat.encode for byte strings whose lengths the caller has
    checked (the servers' hot path): one join per batch instead of one encode per item."""
    n = len(items)
    if n > 8:
        size = len(items[0])
        if list(map(len, items)).count(size) == n:  # one length (benchmarks, fixed-size ids)
            rows = np.zeros((n, nbytes), dtype=np.uint8)
            rows[:, 0] = size
            if size:
                rows[:, 1:1 + size] = np.frombuffer(b"".join(items), dtype=np.uint8).reshape(n, size)
            return rows
    pad = nbytes - 1
    length = _LENGTH
    data = b"".join([length[len(x)] + x.ljust(pad, b"\0") for x in items])
    return np.frombuffer(data, dtype=np.uint8).reshape(len(items), nbytes).copy()


def int_rows(values: list[int], nbytes: int) -> np.ndarray:
    """(N, nbytes) uint8 big-endian rows of unsigned integers known to fit."""
    data = b"".join([v.to_bytes(nbytes, "big") for v in values])
    return np.frombuffer(data, dtype=np.uint8).reshape(len(values), nbytes).copy()


def ints_to_raw(values: np.ndarray, nbytes: int) -> np.ndarray:
    """Unsigned integers (N,) of up to 64 bits to big-endian (N, nbytes) uint8 rows."""
    as_u64 = np.asarray(values).astype(">u8", copy=False)
    raw = as_u64.view(np.uint8).reshape(-1, 8)
    if nbytes >= 8:
        out = np.zeros((raw.shape[0], nbytes), dtype=np.uint8)
        out[:, nbytes - 8:] = raw
        return out
    return np.ascontiguousarray(raw[:, 8 - nbytes:])


def raw_to_ints(raw: np.ndarray) -> np.ndarray:
    """Big-endian (N, nbytes ≤ 8) uint8 rows to uint64 integers."""
    n, nbytes = raw.shape
    padded = np.zeros((n, 8), dtype=np.uint8)
    padded[:, 8 - nbytes:] = raw
    return padded.view(">u8").reshape(n).astype(np.uint64)
