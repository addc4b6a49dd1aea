"""The hash of docs/engine.md §3: known answers, committed vectors, numpy == literal form."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.geometry import DEFAULT_HASH_SEED, KEY_WIDTHS
from pynq_kv.hashing import GOLDEN64, h3_matrix, hash_int, hash_keys, way_state, xorshift64
from pynq_kv.keys import KeyFormat

VECTORS = json.loads((Path(__file__).parent / "vectors" / "hash.json").read_text())


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


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(KEY_WIDTHS), st.integers(2, 8), st.integers(0, 2**64 - 1), st.data())
def test_numpy_matches_literal_definition_and_is_linear(width, ways, seed, data):
    a = data.draw(st.integers(0, 2**width - 1))
    b = data.draw(st.integers(0, 2**width - 1))
    keys = np.array([list(k.to_bytes(width // 8, "big")) for k in (a, b, a ^ b)], dtype=np.uint8)
    h = hash_keys(keys, seed, ways, width)
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
def test_small_and_large_batches_agree(width, ways):
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
