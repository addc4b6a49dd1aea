"""Reading the exact table slot by slot, for paged listings and exports.

KVEngine.items() walks every valid slot at once; a listing wants a window of slots starting at a
cursor, so this module reads slots with the engine's READ_SLOT (a control read: no counters
move, nothing changes) and decodes them with the engine's own decoders.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from pynq_kv.bulk import Item
from pynq_kv.engine import KVEngine

WINDOW = 1024  # slots read per READ_SLOT batch
# Slots one page may scan. A page runs without yielding to the loop (the engine it reads must
# not be swapped by a reload halfway), so a sparse prefix must not make it long.
MAX_SCAN = 16 * WINDOW


def _matches(key: Item, prefix: bytes) -> bool:
    return not prefix or isinstance(key, bytes) and key.startswith(prefix)


def scan(engine: KVEngine, cursor: int, limit: int,
         prefix: bytes = b"") -> tuple[list[tuple[int, Item, Item]], int | None]:
    """Up to `limit` (slot, key, value) from slot `cursor` on, and the cursor after them.

    The next cursor is a slot number, so it stays meaningful while entries come and go: an entry
    present for the whole walk is listed once, unless relocation moves it across the cursor.
    A prefix matches byte-string keys only. None as next cursor: the table has been scanned.
    """
    capacity = engine.geometry.capacity
    found: list[tuple[int, Item, Item]] = []
    start = cursor
    stop = min(capacity, cursor + MAX_SCAN)
    while start < stop:
        numbers = np.arange(start, min(start + WINDOW, stop), dtype=np.int64)
        batch = engine.read_slots(numbers)
        for i in np.flatnonzero(batch.valid):
            key = engine.decode_key(batch.keys[i].tobytes())
            if _matches(key, prefix):
                found.append((int(numbers[i]), key, engine.decode_value(batch.values[i].tobytes())))
                if len(found) == limit:
                    following = int(numbers[i]) + 1
                    return found, following if following < capacity else None
        start = int(numbers[-1]) + 1
    return found, start if start < capacity else None


class Snapshot:
    """Every valid slot as raw arrays, copied at once: an export is the table at one moment."""

    def __init__(self, engine: KVEngine, prefix: bytes = b"") -> None:
        self._engine = engine
        self._prefix = prefix
        self.numbers, slots = engine.valid_slots()
        self._keys, self._values = slots.keys, slots.values

    def __len__(self) -> int:
        return len(self.numbers)

    def items(self, start: int = 0, stop: int | None = None) -> Iterator[tuple[Item, Item]]:
        """Decoded (key, value) of rows start..stop that match the prefix."""
        decode_key, decode_value = self._engine.decode_key, self._engine.decode_value
        for raw_key, raw_value in zip(self._keys[start:stop], self._values[start:stop]):
            key = decode_key(raw_key.tobytes())
            if _matches(key, self._prefix):
                yield key, decode_value(raw_value.tobytes())
