"""Keys and values between front-end byte strings and the engine's raw rows (engine.md §2).

The RESP front-end encodes whole batches itself into the raw (N, BYTES) uint8 rows that
KVEngine.get_batch/set_batch accept, instead of calling KeyFormat.encode per key: it is the same
length-tagged encoding (`[L] ‖ bytes ‖ zero padding`, tests/test_resp_kv.py checks it against
KeyFormat), built with one join per batch. Callers check lengths first.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

_LENGTH = [bytes((n,)) for n in range(256)]


def tagged_rows(items: list[bytes], nbytes: int) -> np.ndarray:
    """(N, nbytes) uint8 rows of length-tagged byte strings, each at most nbytes - 1 long."""
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


def parse_uint(text: bytes, bits: int) -> Optional[int]:
    """A decimal integer of 0 .. 2^bits-1 written the strict Redis way, else None."""
    if not text or not text.isdigit() or (len(text) > 1 and text[0] == 48):
        return None
    value = int(text)
    return value if value >> bits == 0 else None
