"""What the engine accepts from a byte-string client (RESP, memcached, the host tier's Redis).

A Redis key is exactly the bytes a RESP client sends, and the engine stores a RESP SET's value
as `Limits.value` reads it: the bytes themselves, or for an integer engine the strict Redis
decimal. The servers (pynq_kv.serve) check their requests with `Limits`, and the host tier's
restore (pynq_kv.hosttier) checks Redis' keys with the same one, so a key restored from Redis
is the key a RESP GET looks up.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .engine import KVEngine
from .keys import int_rows, tagged_rows


def parse_uint(text: bytes, bits: int) -> Optional[int]:
    """A decimal integer of 0 .. 2^bits-1 written the strict Redis way, else None."""
    if not text or not text.isdigit() or (len(text) > 1 and text[0] == 48):
        return None
    value = int(text)
    return value if value >> bits == 0 else None


class Limits:
    """What the engine accepts from a front-end: key and value byte strings, integer values."""

    __slots__ = ("engine", "max_key", "max_value", "ints", "value_bits")

    def __init__(self, engine: KVEngine) -> None:
        self.engine = engine
        self.max_key = engine.key_format.max_bytes
        self.max_value = engine.value_format.max_bytes
        self.ints = engine.value_kind == "int"
        self.value_bits = engine.geometry.value_width

    def key_fits(self, key: bytes) -> bool:
        return len(key) <= self.max_key

    def keys_fit(self, keys: list[bytes]) -> bool:
        """All of (at least one) keys fit."""
        return max(map(len, keys)) <= self.max_key

    def value_fits(self, value: bytes) -> bool:
        """A byte-string value fits the length-tagged encoding."""
        return len(value) <= self.max_value

    def values_fit(self, values: list[bytes]) -> bool:
        """All of (at least one) byte-string values fit."""
        return max(map(len, values)) <= self.max_value

    def value(self, text: bytes) -> Any:
        """The engine value of a front-end's byte string (an integer for an integer engine), or
        None when it does not fit."""
        if self.ints:
            return parse_uint(text, self.value_bits)
        return text if len(text) <= self.max_value else None

    def strings(self, values: np.ndarray) -> list[bytes]:
        """The Redis string of each value `KVEngine.get_batch` returned (the inverse of `value`,
        as a RESP GET answers it): the tagged bytes, or the decimal of an integer value (an
        integer engine's, or a raw value a front-end stored that is not length-tagged)."""
        if values.ndim == 1:  # an integer engine of up to 64 bits: numbers already
            return [str(v).encode() for v in values.tolist()]
        width = values.shape[1]
        out = []
        for row in values:
            raw = row.tobytes()
            size = raw[0]
            out.append(raw[1:1 + size] if not self.ints and size < width
                       else str(int.from_bytes(raw, "big")).encode())
        return out

    def key_rows(self, keys: list[bytes]) -> np.ndarray:
        """Raw engine keys of byte-string keys that fit (the length-tagged encoding)."""
        return tagged_rows(keys, self.engine.geometry.key_bytes)

    def value_rows(self, values: list[Any]) -> np.ndarray:
        """Raw engine values of what `value` returned for each (integers or byte strings)."""
        nbytes = self.engine.geometry.value_bytes
        return int_rows(values, nbytes) if self.ints else tagged_rows(values, nbytes)
