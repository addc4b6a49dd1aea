"""Minimum ternary covers of integer ranges (pynq_kv.ranges, docs/engine.md §8).

Three independent checks of minimality: an exact brute-force minimum for every range of up to
6 bits, the 2W-4 worst case, and for every range tested the witness of pairwise incompatible
points, which proves the cover minimum by itself. Exactness (union == range) is checked by
enumeration up to 16 bits and by an exact trie search up to 128 bits.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.errors import InvalidRule
from pynq_kv.ranges import minimality_witness, prefix_cover, range_to_ternary


# -- independent reference implementations ------------------------------------------------------


def brute_min_cover(lo: int, hi: int, width: int) -> int:
    """Exact minimum by set cover over every prime implicant (branch and bound)."""
    full = (1 << width) - 1
    valid = set()
    for mask in range(1 << width):
        sub = mask
        while True:  # every value with bits only inside mask
            if sub >= lo and sub | (full & ~mask) <= hi:
                valid.add((sub, mask))
            if sub == 0:
                break
            sub = (sub - 1) & mask
    primes = [(v, m) for v, m in valid
              if not any((v & ~(1 << b), m & ~(1 << b)) in valid for b in range(width) if m >> b & 1)]
    points = range(lo, hi + 1)
    covers = [sum(1 << (x - lo) for x in points if x & m == v) for v, m in primes]
    everything = (1 << len(points)) - 1
    best = len(points)

    def search(covered: int, used: int) -> None:
        nonlocal best
        if covered == everything:
            best = min(best, used)
            return
        if used + 1 >= best:
            return
        first = (everything & ~covered & -(everything & ~covered)).bit_length() - 1
        for c in covers:
            if c >> first & 1:
                search(covered | c, used + 1)

    search(0, 0)
    return best


def uncovered_point(entries, lo: int, hi: int, width: int):
    """Some x in [lo, hi] that no entry matches, or None. Exact: a search over the bit trie
    that stops in subtrees a single entry covers and memoises subtrees inside the range."""
    known_covered = set()

    def walk(pos, prefix, tight_lo, tight_hi, alive):
        if not alive:
            return max(prefix << pos, lo) if tight_lo else prefix << pos
        if any(m & ((1 << pos) - 1) == 0 for _, m in alive):
            return None
        inside = not tight_lo and not tight_hi
        if inside and (pos, alive) in known_covered:
            return None
        b = pos - 1
        for bit in (0, 1):
            if (tight_lo and bit < (lo >> b & 1)) or (tight_hi and bit > (hi >> b & 1)):
                continue
            found = walk(b, prefix << 1 | bit,
                         tight_lo and bit == (lo >> b & 1), tight_hi and bit == (hi >> b & 1),
                         frozenset((v, m) for v, m in alive if not m >> b & 1 or (v >> b & 1) == bit))
            if found is not None:
                return found
        if inside:
            known_covered.add((pos, alive))
        return None

    return walk(width, 0, True, True, frozenset(entries))


def check_cover(lo: int, hi: int, width: int) -> list[tuple[int, int]]:
    """Every structural property except exactness; returns the cover."""
    full = (1 << width) - 1
    cover = range_to_ternary(lo, hi, width)
    assert cover == sorted(cover, key=lambda e: (bin(e[1]).count("1"), e))
    assert len(set(cover)) == len(cover)
    for value, mask in cover:
        assert 0 <= mask <= full and value & ~mask == 0
        # inside the range: smallest member >= lo and largest <= hi
        assert value >= lo and value | (full & ~mask) <= hi
    # the witness: points of the range, pairwise not inside one cube inside the range
    witness = minimality_witness(lo, hi, width)
    assert len(witness) == len(set(witness)) == len(cover)
    assert all(lo <= x <= hi for x in witness)
    for i, x in enumerate(witness):
        for y in witness[:i]:
            assert x & y < lo or x | y > hi, (lo, hi, x, y)
    assert len(cover) <= len(prefix_cover(lo, hi, width))
    return cover


def members(entries, width: int) -> int:
    """The union of entries as a bitset (bit x set = value x matched)."""
    union = 0
    for value, mask in entries:
        cube = 1 << value
        for b in range(width):
            if not mask >> b & 1:
                cube |= cube << (1 << b)
        union |= cube
    return union


def union_mask(entries, width: int) -> np.ndarray:
    values = np.arange(1 << width, dtype=np.int64)
    hit = np.zeros(1 << width, dtype=bool)
    for value, mask in entries:
        hit |= (values & mask) == value
    return hit


def range_mask(lo: int, hi: int, width: int) -> np.ndarray:
    values = np.arange(1 << width, dtype=np.int64)
    return (values >= lo) & (values <= hi)


# -- examples -------------------------------------------------------------------------------


def test_one_to_six_needs_three_entries_not_four():
    assert range_to_ternary(1, 6, 3) == [(1, 0b011), (2, 0b110), (4, 0b101)]  # ?01, 01?, 1?0
    assert len(prefix_cover(1, 6, 3)) == 4
    assert minimality_witness(1, 6, 3) == [1, 2, 4]


def test_trivial_ranges():
    assert range_to_ternary(0, 255, 8) == [(0, 0)]
    assert range_to_ternary(7, 7, 8) == [(7, 255)]
    assert range_to_ternary(0, 127, 8) == [(0, 128)]
    assert range_to_ternary(128, 255, 8) == [(128, 128)]
    assert range_to_ternary(5, 5, 1 << 7) == [(5, (1 << 128) - 1)]
    assert range_to_ternary(0, 0, 1) == [(0, 1)]
    assert range_to_ternary(0, 1, 1) == [(0, 0)]


def test_one_sided_ranges_match_prefix_expansion():
    # for [0, b] and [a, max] the prefix expansion is already minimum (popcount(b+1), zeros of a-1)
    for b in range(256):
        assert len(range_to_ternary(0, b, 8)) == len(prefix_cover(0, b, 8)) == bin(b + 1).count("1")
    for a in range(1, 256):
        assert len(range_to_ternary(a, 255, 8)) == len(prefix_cover(a, 255, 8)) == 8 - bin(a - 1).count("1")


def test_prefix_cover_is_the_classic_expansion():
    assert prefix_cover(1, 6, 3) == [(1, 7), (2, 6), (4, 6), (6, 7)]
    assert prefix_cover(0, 65535, 16) == [(0, 0)]
    assert prefix_cover(1000, 2000, 16) == [
        (1000, 0xFFF8), (1008, 0xFFF0), (1024, 0xFE00), (1536, 0xFF00), (1792, 0xFF80),
        (1920, 0xFFC0), (1984, 0xFFF0), (2000, 0xFFFF)]


def test_port_range_is_deterministic_and_broadest_first():
    cover = range_to_ternary(1000, 2000, 16)
    assert cover == range_to_ternary(1000, 2000, 16)
    assert cover[0] == (1024, 0xFE00)  # 1024..1535, the entry most ports hit
    assert len(cover) == 8


def test_worst_case_is_2w_minus_4_against_2w_minus_2_for_prefixes():
    # Schieber, Geist & Zaks: a W-bit range never needs more than 2W-4 entries (W >= 4)
    width = 8
    worst = max(len(range_to_ternary(lo, hi, width)) for lo in range(256) for hi in range(lo, 256))
    worst_prefix = max(len(prefix_cover(lo, hi, width)) for lo in range(256) for hi in range(lo, 256))
    assert (worst, worst_prefix) == (2 * width - 4, 2 * width - 2)
    lo, hi = (1 << 62) + 1, (1 << 64) - (1 << 62) - 2  # the 8-bit worst case's shape, 64 bits
    assert len(range_to_ternary(lo, hi, 64)) == 2 * 64 - 4
    # the prefix expansion's worst case: 2W-2 prefixes, W minimum entries
    assert len(prefix_cover(1, (1 << 64) - 2, 64)) == 2 * 64 - 2
    assert len(range_to_ternary(1, (1 << 64) - 2, 64)) == 64


# -- exhaustive -----------------------------------------------------------------------------


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 6])
def test_minimum_equals_brute_force_for_every_small_range(width):
    for lo in range(1 << width):
        for hi in range(lo, 1 << width):
            assert len(range_to_ternary(lo, hi, width)) == brute_min_cover(lo, hi, width), (lo, hi)


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 6, 7, 8])
def test_every_range_is_exact_and_proven_minimum(width):
    for lo in range(1 << width):
        for hi in range(lo, 1 << width):
            cover = check_cover(lo, hi, width)
            assert members(cover, width) == (1 << (hi + 1)) - (1 << lo), (lo, hi)


def test_random_16_bit_ranges_are_exact_by_enumeration():
    rng = random.Random(16)
    for _ in range(150):
        lo, hi = sorted((rng.getrandbits(16), rng.getrandbits(16)))
        cover = check_cover(lo, hi, 16)
        assert np.array_equal(union_mask(cover, 16), range_mask(lo, hi, 16)), (lo, hi)


def test_trie_search_finds_holes():
    # the exact checker used below must itself notice a missing entry
    cover = range_to_ternary(1000, 2000, 16)
    for i in range(len(cover)):
        hole = uncovered_point(cover[:i] + cover[i + 1:], 1000, 2000, 16)
        assert hole is not None and 1000 <= hole <= 2000
        assert not any(hole & m == v for j, (v, m) in enumerate(cover) if j != i)
    assert uncovered_point(cover, 1000, 2000, 16) is None


# -- properties at wide widths ---------------------------------------------------------------


@st.composite
def ranges(draw, max_width=128):
    """(lo, hi, width): ends random, or near powers of two / runs of equal bits (edge cases)."""
    width = draw(st.integers(1, max_width))
    full = (1 << width) - 1

    def end():
        kind = draw(st.sampled_from(["random", "power", "runs"]))
        if kind == "random":
            return draw(st.integers(0, full))
        if kind == "power":
            return max(0, min(full, (1 << draw(st.integers(0, width))) + draw(st.integers(-2, 2))))
        bits, value = 0, 0
        while bits < width:
            run = draw(st.integers(1, width - bits))
            value = value << run | (((1 << run) - 1) if draw(st.booleans()) else 0)
            bits += run
        return value

    lo, hi = sorted((end(), end()))
    return lo, hi, width


@settings(max_examples=300, deadline=None)
@given(ranges(), st.randoms(use_true_random=False))
def test_wide_ranges_exact_and_minimum(case, rnd):
    lo, hi, width = case
    cover = check_cover(lo, hi, width)
    full = (1 << width) - 1

    def member(x):
        return any(x & m == v for v, m in cover)

    samples = [lo, hi] + [rnd.randint(lo, hi) for _ in range(20)]
    assert all(member(x) for x in samples)
    outside = [x for x in (lo - 1, hi + 1) if 0 <= x <= full]
    outside += [rnd.randint(0, lo - 1) for _ in range(10) if lo > 0]
    outside += [rnd.randint(hi + 1, full) for _ in range(10) if hi < full]
    assert not any(member(x) for x in outside)


@settings(max_examples=120, deadline=None)
@given(ranges(max_width=64))
def test_wide_ranges_union_is_exactly_the_range(case):
    lo, hi, width = case
    cover = check_cover(lo, hi, width)  # every entry inside the range ...
    assert uncovered_point(cover, lo, hi, width) is None  # ... and every value covered


def test_128_bit_ranges_are_quick():
    rng = random.Random(128)
    for _ in range(50):
        lo, hi = sorted((rng.getrandbits(128), rng.getrandbits(128)))
        cover = check_cover(lo, hi, 128)
        assert uncovered_point(cover, lo, hi, 128) is None


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("lo, hi, width, message", [
    (5, 4, 8, "empty"),
    (-1, 4, 8, "negative"),
    (0, 256, 8, "does not fit in 8 bits"),
    (0, 1, 0, "at least 1 bit"),
    (1.0, 4, 8, "must be an integer"),
    (0, "4", 8, "must be an integer"),
    (True, 4, 8, "must be an integer"),
    (0, 4, None, "must be an integer"),
])
def test_bad_ranges_raise_invalid_rule(lo, hi, width, message):
    for function in (range_to_ternary, prefix_cover, minimality_witness):
        with pytest.raises(InvalidRule, match=message):
            function(lo, hi, width)


def test_numpy_integers_are_accepted():
    assert range_to_ternary(np.uint16(1), np.int64(6), np.int32(3)) == range_to_ternary(1, 6, 3)
