"""Front-end text to engine values: the strict Redis way of reading an unsigned integer.

Keys and values become raw engine rows through pynq_kv.keys (tagged_rows, int_rows), the one
home of the length-tagged encoding (engine.md §2).
"""

from __future__ import annotations

from typing import Optional


def parse_uint(text: bytes, bits: int) -> Optional[int]:
    """A decimal integer of 0 .. 2^bits-1 written the strict Redis way, else None."""
    if not text or not text.isdigit() or (len(text) > 1 and text[0] == 48):
        return None
    value = int(text)
    return value if value >> bits == 0 else None
