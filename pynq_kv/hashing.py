"""The per-way H3 hash functions of docs/engine.md §3.

H3 is GF(2)-linear: in hardware each output bit is an XOR tree over key bits, one pipeline
stage per few levels. In numpy it is a XOR of per-byte lookup tables, so a batch of keys hashes
with KEY_BYTES table gathers.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

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
def _int_tables(seed: int, ways: int, key_width: int) -> tuple[tuple[int, ...], ...]:
    """byte_tables as Python ints with all ways packed (way w in bits 32w+31 … 32w)."""
    tables = byte_tables(seed, ways, key_width)
    return tuple(tuple(sum(int(h) << (32 * w) for w, h in enumerate(entry)) for entry in pos)
                 for pos in tables)


SMALL_BATCH = 16  # below this many keys, plain Python beats numpy's per-call overhead


def hash_keys(keys: np.ndarray, seed: int, ways: int, key_width: int) -> np.ndarray:
    """H_w(k) of every key of a (N, KEY_BYTES) uint8 array, as a (N, ways) uint32 array."""
    if len(keys) <= SMALL_BATCH:
        tables = _int_tables(seed, ways, key_width)
        out = np.zeros((len(keys), ways), dtype=np.uint32)
        for i, key in enumerate(np.asarray(keys, dtype=np.uint8)):
            packed = 0
            for table, byte in zip(tables, key.tobytes()):
                packed ^= table[byte]
            out[i] = [(packed >> (32 * w)) & 0xFFFFFFFF for w in range(ways)]
        return out
    lanes = _lane_tables(seed, ways, key_width)
    columns = np.ascontiguousarray(np.asarray(keys, dtype=np.uint8).T)
    n = columns.shape[1]
    acc = np.zeros((lanes.shape[0], n), dtype=np.uint64)
    for lane in range(lanes.shape[0]):
        for pos in range(lanes.shape[1]):
            acc[lane] ^= lanes[lane, pos].take(columns[pos])
    both = np.ascontiguousarray(acc.T).view(np.uint32).reshape(n, -1)
    return both[:, :ways]


def candidate_rows(keys: np.ndarray, seed: int, ways: int, key_width: int, rows: int) -> np.ndarray:
    """row_w(k) = H_w(k) mod ROWS for every key and way, as (N, ways) int64 (§3 step 5)."""
    return (hash_keys(keys, seed, ways, key_width) & np.uint32(rows - 1)).astype(np.int64)
