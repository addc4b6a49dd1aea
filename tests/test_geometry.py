"""Geometry's slot addressing (docs/engine.md §4): flat numbers <-> (bank, index)."""

from __future__ import annotations

import numpy as np

from pynq_kv import Geometry

G = Geometry(ways=3, rows=4, stash=2)  # slots 0..11 in the banks, 12..13 in the stash


def test_scalar_addresses_follow_section_4():
    expected = [(b, i) for b in range(3) for i in range(4)] + [(3, 0), (3, 1)]
    assert [G.slot_address(n) for n in range(G.capacity)] == expected
    assert [G.slot_number(b, i) for b, i in expected] == list(range(G.capacity))
    assert all(type(x) is int for x in G.slot_address(13))


def test_array_forms_match_the_scalar_ones():
    numbers = np.arange(G.capacity)
    banks, indexes = G.slot_address(numbers)
    assert list(zip(banks.tolist(), indexes.tolist())) == [G.slot_address(n) for n in range(G.capacity)]
    assert G.slot_number(banks, indexes).tolist() == numbers.tolist()


def test_has_slot_bounds():
    inside = [(0, 0), (2, 3), (3, 0), (3, 1)]
    outside = [(-1, 0), (0, -1), (0, 4), (3, 2), (4, 0)]
    assert all(G.has_slot(b, i) for b, i in inside)
    assert not any(G.has_slot(b, i) for b, i in outside)
    pairs = inside + outside
    mask = G.has_slot(np.array([b for b, _ in pairs]), np.array([i for _, i in pairs]))
    assert mask.tolist() == [True] * len(inside) + [False] * len(outside)
    assert not Geometry(ways=2, rows=2, stash=0).has_slot(2, 0)  # no stash, no bank WAYS
