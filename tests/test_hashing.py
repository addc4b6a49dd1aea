"""The hash of docs/engine.md §3: known answers, committed vectors, numpy == literal form, and
the C version (pynq_kv/_h3.c, when built) == the numpy one."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.geometry import DEFAULT_HASH_SEED, KEY_WIDTHS
from pynq_kv import hashing
from pynq_kv.hashing import (GOLDEN64, h3_matrix, hash_int, hash_keys, hash_keys_numpy, way_state,
                             xorshift64)
from pynq_kv.keys import KeyFormat

try:
    from pynq_kv._h3 import hash_into as hash_into_c
except ImportError:
    hash_into_c = None

VECTORS = json.loads((Path(__file__).parent / "vectors" / "hash.json").read_text())
needs_c = pytest.mark.skipif(hash_into_c is None, reason="pynq_kv._h3 was not built")
# hash_keys is the C version where it was built: each test of both runs it and the numpy one
BOTH = [pytest.param(hash_keys, id="hash_keys"), pytest.param(hash_keys_numpy, id="numpy")]


def test_xorshift64_known_answer():
    # By hand: 1 ^ 1<<13 = 0x2001; ^ >>7 = 0x2041; ^ <<17 = 0x40822041.
    assert xorshift64(1) == 0x40822041
    assert xorshift64(0) == 0


def test_way_state_rules():
    assert way_state(0, 0) == GOLDEN64
    assert way_state(GOLDEN64, 0) == GOLDEN64  # zero state replaced by the constant
    assert way_state(5, 1) == 5 ^ ((2 * GOLDEN64) % (1 << 64))


def test_matrix_is_the_generator_sequence():
    state = way_state(DEFAULT_HASH_SEED, 2)
    expected = []
    for _ in range(144):
        state = xorshift64(state)
        expected.append(state >> 32)
    assert list(h3_matrix(DEFAULT_HASH_SEED, 2, 144)) == expected
    assert hash_int(1 << 7, DEFAULT_HASH_SEED, 2, 144) == expected[7]


@pytest.mark.parametrize("width", KEY_WIDTHS)
def test_committed_vectors(width):
    cases = [v for v in VECTORS["vectors"] if v["key_width"] == width]
    assert cases
    keys = np.array([list(int(v["key"], 16).to_bytes(width // 8, "big")) for v in cases], dtype=np.uint8)
    for seed in {v["seed"] for v in cases}:
        rows = [i for i, v in enumerate(cases) if v["seed"] == seed]
        batch = hash_keys(keys[rows], int(seed, 16), VECTORS["ways"], width)
        for row, i in zip(batch, rows):
            expected = [int(h, 16) for h in cases[i]["hashes"]]
            assert [int(x) for x in row] == expected
            assert [hash_int(int(cases[i]["key"], 16), int(seed, 16), w, width)
                    for w in range(VECTORS["ways"])] == expected


@pytest.mark.parametrize("hasher", BOTH)
@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KEY_WIDTHS), st.integers(2, 8), st.integers(0, 2**64 - 1), st.data())
def test_batch_hash_matches_literal_definition_and_is_linear(hasher, width, ways, seed, data):
    a = data.draw(st.integers(0, 2**width - 1))
    b = data.draw(st.integers(0, 2**width - 1))
    keys = np.array([list(k.to_bytes(width // 8, "big")) for k in (a, b, a ^ b)], dtype=np.uint8)
    h = hasher(keys, seed, ways, width)
    assert h.shape == (3, ways)
    for way in range(ways):
        assert int(h[0, way]) == hash_int(a, seed, way, width)
        assert int(h[2, way]) == int(h[0, way]) ^ int(h[1, way])


@pytest.mark.parametrize("name, keys", [
    ("random", np.random.default_rng(7).integers(0, 256, (65536, 36), dtype=np.uint8)),
    ("sequential strings", KeyFormat(288).encode_many(f"key:{i:012d}" for i in range(65536))),
])
def test_rows_spread_evenly(name, keys):
    """65536 keys over 1024 rows: every way's row counts look like a uniform draw."""
    rows = hash_keys(keys, DEFAULT_HASH_SEED, 4, 288) & 1023
    for way in range(4):
        counts = np.bincount(rows[:, way], minlength=1024)
        chi2 = float(((counts - 64.0) ** 2 / 64.0).sum())
        # 1023 degrees of freedom: mean 1023, sd ~45; 1300 is > 6 sd out.
        assert chi2 < 1300, (name, way, chi2)


@pytest.mark.parametrize("width", KEY_WIDTHS)
@pytest.mark.parametrize("ways", [2, 3, 4, 8])
@pytest.mark.parametrize("hash_keys", BOTH)
def test_small_and_large_batches_agree(width, ways, hash_keys):
    """Small batches are gathered whole or in parts, large ones a byte position at a time
    (skipping all-zero positions): all give the same answer."""
    from pynq_kv.hashing import SMALL_BATCH

    keys = np.random.default_rng(width + ways).integers(0, 256, (2 * SMALL_BATCH + 3, width // 8), dtype=np.uint8)
    keys[:, 3] = 0  # an all-zero byte position
    keys[7] = 0  # the zero key
    large = hash_keys(keys, 0xABCDEF, ways, width)
    small = np.concatenate([hash_keys(keys[i:i + 5], 0xABCDEF, ways, width)
                            for i in range(0, len(keys), 5)])
    medium = np.concatenate([hash_keys(keys[i:i + SMALL_BATCH], 0xABCDEF, ways, width)
                             for i in range(0, len(keys), SMALL_BATCH)])
    assert (large == medium).all()
    assert (large == small).all()
    assert not large[7].any()
    assert int(large[1000, 0]) == hash_int(int.from_bytes(keys[1000].tobytes(), "big"), 0xABCDEF, 0, width)
    assert int(large[5, ways - 1]) == hash_int(int.from_bytes(keys[5].tobytes(), "big"), 0xABCDEF, ways - 1, width)


def test_hash_keys_is_the_c_version_when_it_was_built():
    assert (hashing._hash_into_c is None) == (hash_into_c is None)
    if os.environ.get("CI"):  # make test installs a compiler and Python's headers: it is built
        assert hash_into_c is not None


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.sampled_from(KEY_WIDTHS), st.integers(1, 8), st.integers(0, 2**64 - 1),
       st.integers(0, 70), st.data())
def test_the_c_hash_equals_the_numpy_one(width, ways, seed, n, data):
    """Any batch, zero bytes anywhere (the C loop skips them), odd way counts (a half-used
    lane), and keys that are not a contiguous array."""
    raw = data.draw(st.binary(min_size=n * (width // 8), max_size=n * (width // 8)))
    keys = np.frombuffer(raw, dtype=np.uint8).reshape(n, width // 8)
    keys = np.where(keys < 96, 0, keys).astype(np.uint8)
    expected = hash_keys_numpy(keys, seed, ways, width)
    got = hash_keys(keys, seed, ways, width)
    assert got.dtype == expected.dtype and got.shape == expected.shape == (n, ways)
    assert (got == expected).all()
    wide = np.zeros((n, 2 * (width // 8)), dtype=np.uint8)
    wide[:, ::2] = keys
    assert (hash_keys(wide[:, ::2], seed, ways, width) == expected).all()


@needs_c
def test_the_c_hash_refuses_arrays_it_cannot_read():
    table = hashing.row_tables(1, 4, 64)
    keys = np.zeros((3, 8), dtype=np.uint8)
    out = np.zeros((3, 2), dtype=np.uint64)
    hash_into_c(keys, table, out)  # the right shapes
    for bad_keys, bad_table, bad_out, why in [
        (np.zeros((3, 9), np.uint8), table, out, "256 rows per key byte"),
        (keys.astype(np.uint16), table, out, "keys must be uint8"),
        (keys, table.astype(np.uint32), out, "must be uint64"),
        (keys, table, np.zeros((2, 2), np.uint64), "out must be"),
        (keys, table, np.zeros((3, 3), np.uint64), "out must be"),
        (keys.ravel(), table, out, "2-D"),
    ]:
        with pytest.raises(ValueError, match=why):
            hash_into_c(bad_keys, bad_table, bad_out)
    frozen = out.copy()
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        hash_into_c(keys, table, frozen)
    with pytest.raises(ValueError, match="contiguous"):
        hash_into_c(np.zeros((3, 16), np.uint8)[:, ::2], table, out)
