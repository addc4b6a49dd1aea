"""What the engine accepts from a front-end, checked in one place for every front-end and the
host tier: key and value lengths, and integer values read the strict Redis way.

Keys and values become raw engine rows through pynq_kv.keys (tagged_rows, int_rows), the one
home of the length-tagged encoding (engine.md §2).
"""

from __future__ import annotations

from typing import Any, Optional

from .engine import KVEngine


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
