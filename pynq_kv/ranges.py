"""Integer ranges as ternary value/mask entries (docs/engine.md §8, "Range expansion").

A rule entry matches `(key AND mask) = value`, a subcube of the key space, so a range
`[lo, hi]` must be written as a union of subcubes. The classic prefix expansion is not the
smallest such union: `[1, 6]` over 3 bits needs 4 prefixes but only 3 cubes
(`?01`, `01?`, `1?0`). `range_to_ternary` returns a minimum cover, which matters because rule
entries are the scarcest resource of the engine (§1, `RULES`).

Algorithm (after Schieber, Geist & Zaks, "Computing the minimum DNF representation of Boolean
functions defined by intervals", 2005; this is an independent derivation). A cube lies inside
`[lo, hi]` exactly when its smallest member (stars as 0) is `>= lo` and its largest (stars as
1) is `<= hi`. Bits above the highest bit `s` where lo and hi differ are fixed in every cube.
Below `s` the range is a lower half `{0x : x >= A}` plus an upper half `{1y : y <= B}`; a cube
may leave bit `s` free only if its low part lies in `[A, B]`. Walking down
from `s`, the two leading bits of A and B decide one *level*:

- both 0 (`zero`): the quarter `01` is entirely inside, `11` entirely outside. One cube
  `01*..*` covers that quarter; the rest is the same problem one bit shorter, every cube
  getting a 0 in this bit.
- both 1 (`one`): mirror image, cube `10*..*`, the rest gets a 1.
- A's bit 0, B's bit 1: the quarters `01` and `10` are both inside. If the remaining bits
  satisfy `A' <= B' + 1` (`share`) the one-bit-shorter solution is stretched so that it also
  covers `10` (lower-half cubes `0R` become `*0R`, upper-half `1R` become `1*R`, shared `*R`
  become `**R`; their low parts cover every value because `A' <= B' + 1`), and `01*..*` is the
  only extra cube. Otherwise (`split`) both quarters need a cube of their own.

The walk stops when A = 0 or B = all ones (a one-sided range, whose minimum is the prefix
expansion), or A > B (the halves share nothing; each is one-sided). Every level costs O(1)
integer operations, so a cover takes O(width) operations plus its output.

Minimality is proven per range by `minimality_witness`: it builds, along the same levels,
a set of points of the range no two of which fit in one cube inside the range, of the same
size as the cover; a cover needs one cube per such point.
"""

from __future__ import annotations

from numbers import Integral
from typing import NamedTuple, Optional

from .errors import InvalidRule

Entry = tuple[int, int]  # (value, mask): mask bit 1 = care, value has no bits outside mask
Half = Optional[int]     # a cube's bit at the split position: 0, 1 or None (don't care)


def _checked(lo: int, hi: int, width: int) -> tuple[int, int, int]:
    """Plain ints with 0 <= lo <= hi < 2**width, else InvalidRule."""
    for label, number in (("width", width), ("range start", lo), ("range end", hi)):
        if type(number) is not int and (isinstance(number, bool) or not isinstance(number, Integral)):
            raise InvalidRule(f"{label} must be an integer, not {type(number).__name__}")
    lo, hi, width = int(lo), int(hi), int(width)
    if width < 1:
        raise InvalidRule(f"range width must be at least 1 bit, got {width}")
    if lo < 0 or hi < 0:
        raise InvalidRule(f"range [{lo}, {hi}] has a negative end")
    if lo > hi:
        raise InvalidRule(f"range [{lo}, {hi}] is empty (start > end)")
    if hi >> width:
        raise InvalidRule(f"range [{lo}, {hi}] does not fit in {width} bits (max {(1 << width) - 1})")
    return lo, hi, width


def prefix_cover(lo: int, hi: int, width: int) -> list[Entry]:
    """The classic prefix expansion of [lo, hi] (largest aligned blocks), for comparison."""
    lo, hi, width = _checked(lo, hi, width)
    full = (1 << width) - 1
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << width
        while lo + size - 1 > hi:
            size >>= 1
        out.append((lo, full & ~(size - 1)))
        lo += size
    return out


def _at_least(a: int, n: int) -> list[Entry]:
    """Minimum cover of [a, 2**n - 1]: one prefix per 0-bit of a above its lowest 1, plus a."""
    full = (1 << n) - 1
    if a == 0:
        return [(0, 0)]
    low = (a & -a).bit_length() - 1
    out = [(a, full & ~((1 << low) - 1))]
    for i in range(low + 1, n):
        if not a >> i & 1:
            out.append(((a >> (i + 1) << (i + 1)) | 1 << i, full & ~((1 << i) - 1)))
    return out


def _at_most(b: int, n: int) -> list[Entry]:
    """Minimum cover of [0, b]: the mirror image (complement) of _at_least."""
    full = (1 << n) - 1
    return [(value ^ mask, mask) for value, mask in _at_least(full ^ b, n)]


def _at_least_points(a: int, n: int) -> list[int]:
    """Points of [a, 2**n - 1] pairwise too far apart for one cube (AND of any two < a)."""
    if a == 0:
        return [0]
    low = (a & -a).bit_length() - 1
    return [a] + [(a >> (i + 1) << (i + 1)) | 1 << i for i in range(low + 1, n) if not a >> i & 1]


def _at_most_points(b: int, n: int) -> list[int]:
    full = (1 << n) - 1
    return [full ^ x for x in _at_least_points(full ^ b, n)]


class _Plan(NamedTuple):
    """The levels of one range below its split bit (see the module docstring)."""

    split: int                     # highest bit position where lo and hi differ
    levels: list[tuple[int, str]]  # (bit position, "zero" | "one" | "share" | "split"), top first
    rest: int                      # number of bits below the split left for the closing case
    closing: str                   # "all" | "at_most" | "at_least" | "apart"


def _plan(lo: int, hi: int) -> _Plan:
    """Classify each bit below the split, top down, until a closing case is reached."""
    split = (lo ^ hi).bit_length() - 1
    levels = []
    m = split
    while True:
        full = (1 << m) - 1
        a, b = lo & full, hi & full
        if a == 0:
            return _Plan(split, levels, m, "all" if b == full else "at_most")
        if b == full:
            return _Plan(split, levels, m, "at_least")
        if a > b:
            return _Plan(split, levels, m, "apart")
        m -= 1
        bits = (a >> m, b >> m)
        if bits[0] == bits[1]:
            levels.append((m, "one" if bits[0] else "zero"))
        else:  # (0, 1): a <= b rules out (1, 0)
            rest = (1 << m) - 1
            levels.append((m, "share" if a & rest <= (b & rest) + 1 else "split"))


def _halves(entries: list[Entry], m: int) -> list[tuple[Half, int, int]]:
    """Split (value, mask) pairs over m+1 bits into (bit m or None, low value, low mask)."""
    full = (1 << m) - 1
    return [(value >> m if mask >> m else None, value & full, mask & full) for value, mask in entries]


# The full quarters (split bit, this bit) that get a cube of their own at each level.
_OWN_CUBES: dict[str, tuple[tuple[int, int], ...]] = {
    "zero": ((0, 1),), "one": ((1, 0),), "share": ((0, 1),), "split": ((0, 1), (1, 0)),
}

# How each level turns a cube of the one-bit-shorter problem into a cube of its own:
# split-bit value in -> (split-bit value out, this bit: 0, 1 or None for don't care).
_LIFT: dict[str, dict[Half, tuple[Half, Half]]] = {
    "zero": {0: (0, 0), 1: (1, 0), None: (None, 0)},
    "one": {0: (0, 1), 1: (1, 1), None: (None, 1)},
    "share": {0: (None, 0), 1: (1, None), None: (None, None)},
    "split": {0: (0, 0), 1: (1, 1)},
}


def range_to_ternary(lo: int, hi: int, width: int) -> list[Entry]:
    """A minimum set of (value, mask) pairs whose union is exactly [lo, hi] over width bits.

    Broadest entries (fewest care bits) first, then by value and mask: deterministic, and
    the entry that most keys hit gets the lowest index. Raises InvalidRule for an empty,
    negative or too wide range.
    """
    lo, hi, width = _checked(lo, hi, width)
    full = (1 << width) - 1
    if lo == hi:
        return [(lo, full)]
    plan = _plan(lo, hi)
    # Cubes as (depth, split bit, low value, low mask): created at `depth` levels below the top.
    cubes: list[tuple[int, Half, int, int]] = []
    for depth, (p, kind) in enumerate(plan.levels):
        cubes.extend((depth, t, bit << p, 1 << p) for t, bit in _OWN_CUBES[kind])
    m, a, b = plan.rest, lo & ((1 << plan.rest) - 1), hi & ((1 << plan.rest) - 1)
    if plan.closing == "all":
        closing = [(None, 0, 0)]
    elif plan.closing == "at_most":
        closing = _halves(_at_most(1 << m | b, m + 1), m)
    elif plan.closing == "at_least":
        closing = _halves(_at_least(a, m + 1), m)
    else:
        closing = [(0, v, k) for v, k in _at_least(a, m)] + [(1, v, k) for v, k in _at_most(b, m)]
    deepest = len(plan.levels)
    cubes.extend((deepest, t, v, k) for t, v, k in closing)

    # lifts[d][t]: what the levels above depth d add to a cube whose split bit is t there.
    lifts: list[dict[Half, tuple[Half, int, int]]] = [{t: (t, 0, 0) for t in (0, 1, None)}]
    for p, kind in plan.levels:
        above = lifts[-1]
        step = {}
        for t, (t_up, bit) in _LIFT[kind].items():
            final, v, k = above[t_up]
            if bit is not None:
                v, k = v | bit << p, k | 1 << p
            step[t] = (final, v, k)
        lifts.append(step)

    s = plan.split
    prefix_mask = full & ~((1 << (s + 1)) - 1)
    out = []
    for depth, t, v, k in cubes:
        final, up_v, up_k = lifts[depth][t]
        value, mask = (lo & prefix_mask) | up_v | v, prefix_mask | up_k | k
        if final is not None:
            value, mask = value | final << s, mask | 1 << s
        out.append((value, mask))
    return sorted(out, key=lambda entry: (bin(entry[1]).count("1"), entry))


def minimality_witness(lo: int, hi: int, width: int) -> list[int]:
    """Points of [lo, hi], no two inside one cube that lies inside [lo, hi]; sorted.

    Two points x, y share such a cube iff (x AND y) >= lo and (x OR y) <= hi (the smallest
    cube holding both). Any exact cover needs one entry per witness point, and the witness has
    as many points as range_to_ternary returns entries, which proves that cover minimum.
    """
    lo, hi, width = _checked(lo, hi, width)
    if lo == hi:
        return [lo]
    plan = _plan(lo, hi)
    m, a, b = plan.rest, lo & ((1 << plan.rest) - 1), hi & ((1 << plan.rest) - 1)
    if plan.closing == "all":
        points = [(1, 0)]
    elif plan.closing == "at_most":
        points = [(x >> m, x & ((1 << m) - 1)) for x in _at_most_points(1 << m | b, m + 1)]
    elif plan.closing == "at_least":
        points = [(x >> m, x & ((1 << m) - 1)) for x in _at_least_points(a, m + 1)]
    else:
        points = [(0, x) for x in _at_least_points(a, m)] + [(1, y) for y in _at_most_points(b, m)]
    # Points as (split bit, low bits), lifted one level at a time from the deepest up.
    for p, kind in reversed(plan.levels):
        if kind == "zero":
            points = points + [(0, 1 << p)]
        elif kind == "one":
            points = [(t, r | 1 << p) for t, r in points] + [(1, (1 << p) - 1)]
        else:
            # One low part z goes into both full quarters 01 and 10. It must conflict with
            # every lower-half point x (x AND z < A'), every upper-half point y (y OR z > B')
            # and with itself across the quarters.
            if kind == "split":  # B' < z < A' does all of that
                z = (hi & ((1 << p) - 1)) + 1
            else:
                # The smallest upper-half point z does (by induction over the levels,
                # z < A' and x AND z < A' for every lower-half x); it leaves the upper half.
                z = min(r for t, r in points if t == 1)
                points.remove((1, z))
            points = [(t, r | t << p) for t, r in points] + [(0, 1 << p | z), (1, z)]
    prefix = lo >> (plan.split + 1) << (plan.split + 1)
    return sorted(prefix | t << plan.split | r for t, r in points)
