"""Redis' glob patterns (stringmatchlen) in linear time: the one matcher every front-end uses.

Redis matches `*`, `?`, `[...]` (with `^` negation, `a-z` ranges, `\\` escapes) and `\\x`
escapes by backtracking; a pattern like ``*?*?*?...x`` costs time doubling with every `*?`
(issue 16: one 24-byte CONFIG GET pattern held the event loop for 13.5 s). Here a pattern is
compiled once into a token list and matched as a bit-parallel NFA (shift-and): one big-integer
step per text byte, so a match costs O(len(pattern) + len(text) x states/64) whatever the
pattern, and a pattern with more single-byte tokens than the text has bytes is rejected
before any step.

The language is exactly Redis 7's, quirks included (util.c stringmatchlen):
- an empty text matches only the empty pattern (Redis' KEYS special-cases a lone "*" itself);
- a `\\` at the very end of the pattern is a literal backslash;
- an unterminated `[` set takes the rest of the pattern as members; `[]` matches nothing and
  `[^]` any byte; in a set, `x-y` is a range whenever two more pattern bytes follow the `x`
  (so `[a-]` is the range a..]);
- with nocase, literals and range bounds compare through C tolower (ASCII only; a range's
  bounds are ordered *before* lowering), but a `\\`-escaped set member compares exactly.
"""

from __future__ import annotations

import re
from typing import Optional

_STAR, _QUESTION, _OPEN, _BACKSLASH = b"*?[\\"
_ALL = (1 << 256) - 1  # accept sets are 256-bit integers: bit c accepts byte c
_UPPER = ((1 << 26) - 1) << 65  # A-Z
_STARS = re.compile(rb"\*+")
# The members of a set, in Redis' order of tests: `\x` (an escape when a byte follows), then
# `]` ends the set, then `x-y` (a range when two bytes follow x), then a single byte. Matched
# in C; nothing follows the repetition, so the regex never backtracks.
_SET_BODY = re.compile(rb"(?:\\.|[^\]\\]-.|[^\]])*", re.S)
_SET_MEMBER = re.compile(rb"\\(.)|([^\]\\])-(.)|(.)", re.S)


def _lower(c: int) -> int:
    """C tolower() in the C locale."""
    return c + 32 if 65 <= c <= 90 else c


def _caseless(bits: int) -> int:
    """The bytes whose C tolower() is in bits (A-Z are tested as a-z, never as themselves)."""
    return (bits & ~_UPPER) | ((bits >> 32) & _UPPER)


class Glob:
    """A compiled pattern; .match(text) says whether text matches it, as Redis would.

    limit, when given, is the longest text the pattern will be asked about: compiling stops
    once the pattern needs more bytes than that (it can then match nothing), so a megabyte
    pattern against short names costs no more than a short one.
    """

    __slots__ = ("pattern", "nocase", "_sets", "_stars", "_accept", "_singles", "_masks")

    def __init__(self, pattern: bytes, nocase: bool = False, limit: Optional[int] = None) -> None:
        self.pattern = pattern
        self.nocase = nocase
        self._sets: list[int] = []  # per token: the bytes it accepts; -1 for '*'
        self._singles = 0  # tokens that consume exactly one byte
        self._compile(limit)
        n = len(self._sets)
        self._stars = sum(1 << i for i, s in enumerate(self._sets) if s < 0)
        self._accept = 1 << n  # the state after the last token
        self._masks: dict[int, int] = {}  # text byte -> states whose token accepts it

    def _compile(self, limit: Optional[int]) -> None:
        pat = self.pattern
        n = len(pat)
        sets = self._sets
        p = 0
        while p < n:
            c = pat[p]
            if c == _STAR:
                p = _STARS.match(pat, p).end() - 1  # a run of '*' is one '*'
                sets.append(-1)
            else:
                if c == _QUESTION:
                    accept = _ALL
                elif c == _OPEN:
                    p, accept = self._compile_set(p + 1)
                else:
                    if c == _BACKSLASH and p + 1 < n:
                        p += 1
                        c = pat[p]
                    accept = _caseless(1 << _lower(c)) if self.nocase else 1 << c
                sets.append(accept)
                self._singles += 1
                if limit is not None and self._singles > limit:
                    return  # needs more bytes than any text it will see: matches nothing
            p += 1

    def _compile_set(self, p: int) -> tuple[int, int]:
        """(its last position, accepted bytes) of the set whose members start at p."""
        pat, nocase = self.pattern, self.nocase
        negate = pat[p:p + 1] == b"^"
        if negate:
            p += 1
        end = _SET_BODY.match(pat, p).end()
        accept = 0
        # members repeat at most 256 + 256 * 256 ways: each distinct one is applied once
        for escaped, start, stop, single in set(_SET_MEMBER.findall(pat, p, end)):
            if escaped:
                accept |= 1 << escaped[0]  # exact, even with nocase (as Redis)
            elif start:
                low, high = sorted((start[0], stop[0]))
                if nocase:
                    low, high = _lower(low), _lower(high)
                if low <= high:
                    span = (1 << (high + 1)) - (1 << low)
                    accept |= _caseless(span) if nocase else span
            else:
                accept |= _caseless(1 << _lower(single[0])) if nocase else 1 << single[0]
        # at ']' the set ends there; unterminated, it ends with the pattern
        return (end if end < len(pat) else end - 1), accept ^ _ALL if negate else accept

    def _mask(self, c: int) -> int:
        mask = self._masks.get(c)
        if mask is None:
            mask = 0
            for i, accept in enumerate(self._sets):
                if accept > 0 and accept >> c & 1:
                    mask |= 1 << i
            self._masks[c] = mask
        return mask

    def match(self, text: bytes) -> bool:
        """Whether text matches: one shift-and step per byte, no backtracking."""
        if not text:
            return not self.pattern
        if self._singles > len(text):
            return False
        stars = self._stars
        states = 1 | (1 & stars) << 1  # before any byte: token 0, and past it if it is a '*'
        mask = self._mask
        for c in text:
            states = ((states & mask(c)) << 1) | (states & stars)
            states |= (states & stars) << 1  # a '*' may match nothing (no two '*' in a row)
            if not states:
                return False
        return bool(states & self._accept)
