"""The per-way H3 hash functions of docs/engine.md §3.

H3 is GF(2)-linear: in hardware each output bit is an XOR tree over key bits, one pipeline
stage per few levels. In software it is a XOR of per-byte lookup tables: in C
(pynq_kv/_h3.c) where that optional extension was built, else in numpy (hash_keys_numpy), where
a small batch of keys hashes with one gather of the table rows of all its (position, byte) pairs
and one XOR reduction, a large one with a gather per byte position.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

try:
    from ._h3 import hash_into as _hash_into_c
except ImportError:  # not built (no C compiler at install): the numpy code below
    _hash_into_c = None

MASK64 = (1 << 64) - 1
GOLDEN64 = 0x9E3779B97F4A7C15


def xorshift64(x: int) -> int:
    """Marsaglia's xorshift64 (13, 7, 17): shifts and XORs only, easy to mirror in Verilog."""
    x ^= (x << 13) & MASK64
    x ^= x >> 7
    x ^= (x << 17) & MASK64
    return x


def way_state(seed: int, way: int) -> int:
    """Initial generator state of one way (§3 step 2)."""
    state = seed ^ (((way + 1) * GOLDEN64) & MASK64)
    return state or GOLDEN64


@lru_cache(maxsize=64)
def h3_matrix(seed: int, way: int, key_width: int) -> tuple[int, ...]:
    """Q_w[i] for key bits i = 0 … key_width-1 (§3 step 3)."""
    state = way_state(seed, way)
    rows = []
    for _ in range(key_width):
        state = xorshift64(state)
        rows.append(state >> 32)
    return tuple(rows)


def hash_int(key: int, seed: int, way: int, key_width: int) -> int:
    """H_w(k) for one raw key given as an integer: the literal §3 definition."""
    matrix = h3_matrix(seed, way, key_width)
    h = 0
    bit = 0
    while key:
        if key & 1:
            h ^= matrix[bit]
        key >>= 1
        bit += 1
    return h


@lru_cache(maxsize=16)
def byte_tables(seed: int, ways: int, key_width: int) -> np.ndarray:
    """Table T[p, b, w] = H_w of a key whose only non-zero byte is b at big-endian position p."""
    key_bytes = key_width // 8
    tables = np.zeros((key_bytes, 256, ways), dtype=np.uint32)
    values = np.arange(256, dtype=np.uint32)
    for way in range(ways):
        matrix = np.array(h3_matrix(seed, way, key_width), dtype=np.uint32)
        for pos in range(key_bytes):
            low_bit = (key_bytes - 1 - pos) * 8  # key bit of this byte's least significant bit
            acc = np.zeros(256, dtype=np.uint32)
            for j in range(8):
                acc ^= np.where((values >> j) & 1, matrix[low_bit + j], 0).astype(np.uint32)
            tables[pos, :, way] = acc
    tables.setflags(write=False)
    return tables


@lru_cache(maxsize=16)
def _lane_tables(seed: int, ways: int, key_width: int) -> np.ndarray:
    """byte_tables with ways paired into uint64 lanes: (lanes, KEY_BYTES, 256) uint64.

    Two 1-D uint64 gathers per byte position are several times faster in numpy than one
    (N, ways) uint32 row gather.
    """
    tables = byte_tables(seed, ways, key_width)
    if ways % 2:
        tables = np.concatenate([tables, np.zeros(tables.shape[:2] + (1,), np.uint32)], axis=2)
    lanes = np.ascontiguousarray(tables).view(np.uint64)  # little-endian: way 2j in the low half
    out = np.ascontiguousarray(np.moveaxis(lanes, 2, 0))
    out.setflags(write=False)
    return out


@lru_cache(maxsize=16)
def row_tables(seed: int, ways: int, key_width: int) -> np.ndarray:
    """_lane_tables as one (KEY_BYTES × 256, lanes) table: row 256p + b holds every lane of
    byte b at position p, so one gather fetches every way of every byte of a batch."""
    lanes = _lane_tables(seed, ways, key_width)
    out = np.ascontiguousarray(lanes.reshape(lanes.shape[0], -1).T)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=16)
def _row_offsets(key_bytes: int) -> np.ndarray:
    """256p for every byte position p, as a column: byte b at p is table row 256p + b."""
    out = (np.arange(key_bytes, dtype=np.intp) * 256)[:, None]
    out.setflags(write=False)
    return out


# Up to SMALL_BATCH keys, one gather of all (position, byte) table rows and one XOR reduction
# per GATHER_BYTES of gathered rows cost a few numpy calls (larger temporaries leave the cache
# and the allocator's heap, and run several times slower). Larger batches gather position by
# position, which keeps the accumulator in cache, and skip byte positions that are zero in
# every key: a zero byte adds nothing (H3 is linear), and length-tagged keys end in zeros.
SMALL_BATCH = 1024
GATHER_BYTES = 1 << 17


def hash_keys(keys: np.ndarray, seed: int, ways: int, key_width: int) -> np.ndarray:
    """H_w(k) of every key of a (N, KEY_BYTES) uint8 array, as a (N, ways) uint32 array."""
    if _hash_into_c is None:
        return hash_keys_numpy(keys, seed, ways, key_width)
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    table = row_tables(seed, ways, key_width)
    packed = np.empty((len(keys), table.shape[1]), dtype=np.uint64)
    _hash_into_c(keys, table, packed)
    return packed.view(np.uint32)[:, :ways]


def hash_keys_numpy(keys: np.ndarray, seed: int, ways: int, key_width: int) -> np.ndarray:
    """hash_keys in numpy alone (the C extension's stand-in, and its reference in the tests)."""
    keys = np.asarray(keys, dtype=np.uint8)
    n = len(keys)
    if n <= SMALL_BATCH:
        table = row_tables(seed, ways, key_width)
        rows = keys.T + _row_offsets(keys.shape[1])  # (KEY_BYTES, N) table rows
        step = max(1, GATHER_BYTES // (keys.shape[1] * table.shape[1] * table.itemsize))
        if n <= step:
            packed = np.bitwise_xor.reduce(table.take(rows, axis=0), axis=0)
        else:
            packed = np.empty((n, table.shape[1]), dtype=np.uint64)
            for start in range(0, n, step):
                np.bitwise_xor.reduce(table.take(rows[:, start:start + step], axis=0), axis=0,
                                      out=packed[start:start + step])
        return packed.view(np.uint32)[:, :ways]
    lanes = _lane_tables(seed, ways, key_width)
    columns = np.ascontiguousarray(keys.T)
    acc = np.zeros((lanes.shape[0], n), dtype=np.uint64)
    for pos in np.flatnonzero(columns.any(axis=1)).tolist():
        for lane in range(lanes.shape[0]):
            acc[lane] ^= lanes[lane, pos].take(columns[pos])
    both = np.ascontiguousarray(acc.T).view(np.uint32).reshape(n, -1)
    return both[:, :ways]


def candidate_rows(keys: np.ndarray, seed: int, ways: int, key_width: int, rows: int) -> np.ndarray:
    """row_w(k) = H_w(k) mod ROWS for every key and way, as (N, ways) int64 (§3 step 5)."""
    return (hash_keys(keys, seed, ways, key_width) & np.uint32(rows - 1)).astype(np.int64)
