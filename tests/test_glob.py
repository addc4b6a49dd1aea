"""Glob matching (pynq_kv.globmatch): Redis' semantics, in linear time.

Three witnesses: a line-by-line port of Redis 7's recursive stringmatchlen on random small
inputs, Debian's redis-server itself (KEYS for the case-sensitive form, CONFIG GET for the
caseless one, against pynq-kv's CONFIG GET), and timing growth on the patterns that make a
backtracking matcher explode (issue 16: a 24-byte CONFIG GET pattern stalled the loop 13.5 s).
"""

from __future__ import annotations

import random
import time

import pytest
import redis

from pynq_kv.globmatch import Glob
from resp_helpers import HAVE_REDIS, HOST, PynqServer, RedisServer

pytestmark = pytest.mark.timeout(120)


def redis_stringmatch(pat: bytes, text: bytes, nocase: bool) -> bool:
    """util.c stringmatchlen, ported step by step (its pointer walk as indexes), as an oracle."""
    def low(c: int) -> int:
        return c + 32 if 65 <= c <= 90 else c

    def at(i: int) -> int:
        return pat[i] if i < len(pat) else 0  # the C string's NUL after the pattern

    def impl(p: int, s: int, skip: list[bool]) -> bool:
        while p < len(pat) and s < len(text):
            c = pat[p]
            if c == 42:
                while p < len(pat) and at(p + 1) == 42:
                    p += 1
                if len(pat) - p == 1:
                    return True
                while s < len(text):
                    if impl(p + 1, s, skip):
                        return True
                    if skip[0]:
                        return False
                    s += 1
                skip[0] = True
                return False
            if c == 63:
                s += 1
            elif c == 91:
                p += 1
                negate = at(p) == 94
                if negate:
                    p += 1
                match = False
                while True:
                    left = len(pat) - p
                    if at(p) == 92 and left >= 2:
                        p += 1
                        match |= pat[p] == text[s]
                    elif at(p) == 93:
                        break
                    elif left == 0:
                        p -= 1
                        break
                    elif left >= 3 and pat[p + 1] == 45:
                        start, end, ch = pat[p], pat[p + 2], text[s]
                        if start > end:
                            start, end = end, start
                        if nocase:
                            start, end, ch = low(start), low(end), low(ch)
                        p += 2
                        match |= start <= ch <= end
                    else:
                        match |= (low(pat[p]) == low(text[s])) if nocase else pat[p] == text[s]
                    p += 1
                if negate:
                    match = not match
                if not match:
                    return False
                s += 1
            else:
                if c == 92 and len(pat) - p >= 2:
                    p += 1
                    c = pat[p]
                if (low(c) != low(text[s])) if nocase else c != text[s]:
                    return False
                s += 1
            p += 1
            if s == len(text):
                while at(p) == 42:
                    p += 1
                break
        return p >= len(pat) and s == len(text)

    return impl(0, 0, [False])


ALPHABET = b"aAbB*?[]^-\\z"


def test_matches_redis_algorithm_on_random_inputs() -> None:
    rng = random.Random(16)
    checked = 0
    for _ in range(6000):
        pat = bytes(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
        text = bytes(rng.choice(b"aAbBz-]^\\[") for _ in range(rng.randint(0, 6)))
        for nocase in (False, True):
            assert Glob(pat, nocase).match(text) == redis_stringmatch(pat, text, nocase), (pat, text, nocase)
            checked += 1
    assert checked == 12000


@pytest.mark.parametrize("pattern,text,expected", [
    (b"*", b"", False),  # Redis: an empty text matches only the empty pattern
    (b"", b"", True),
    (b"a\\", b"a\\", True),  # a trailing backslash is literal
    (b"[a-]", b"]", True),  # x-y is a range whenever two bytes follow x
    (b"[]", b"]", False),
    (b"[^]", b"q", True),
    (b"[abc", b"b", True),  # unterminated set: the rest of the pattern
    (b"h\\*llo", b"h*llo", True),
    (b"h\\*llo", b"hello", False),
])
def test_redis_quirks(pattern: bytes, text: bytes, expected: bool) -> None:
    assert Glob(pattern).match(text) is expected
    assert redis_stringmatch(pattern, text, False) is expected


def test_nocase_set_escape_is_exact_and_ranges_lower_after_ordering() -> None:
    assert Glob(b"[\\A]", nocase=True).match(b"A")
    assert not Glob(b"[\\A]", nocase=True).match(b"a")  # escaped set member: exact, as Redis
    assert not Glob(b"[Z-a]", nocase=True).match(b"b")  # ordered Z..a, lowered z..a: empty
    assert Glob(b"[a-c]", nocase=True).match(b"B")


PATHOLOGICAL = [b"*?" * 12 + b"x", b"*a" * 10 + b"b", b"a*a*a*a*a*a*a*a*a*c", b"*[a-z]*?*[^q]*?x",
                b"**********************y", b"?" * 40]


def test_growth_is_linear_not_exponential() -> None:
    """Time per match against the pattern's `*?` count: a backtracking matcher doubles per
    pair (2^24 steps at 24 pairs), this one grows with the pattern's length."""
    text = b"maxmemory-clients-and-a-few-more-bytes" * 2

    def cost(pairs: int) -> float:
        glob = Glob(b"*?" * pairs + b"x", nocase=True)
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(20):
                assert not glob.match(text)
            best = min(best, time.perf_counter() - start)
        return best / 20

    small, large = cost(8), cost(32)
    assert large < 0.01  # 32 pairs: milliseconds at most (a backtracking matcher: hours)
    assert large / small < 16  # 4x the pattern: well under 16x the time (exponential: 2^24)


def test_pathological_config_get_does_not_stall_the_server() -> None:
    server = PynqServer()
    try:
        conn = redis.Redis(host=HOST, port=server.port, socket_timeout=10)
        for pattern in PATHOLOGICAL + [b"*?" * 100_000 + b"x", b"[" + b"a-" * 200_000 + b"]*"]:
            start = time.perf_counter()
            assert isinstance(conn.execute_command("CONFIG", "GET", pattern), dict)
            assert time.perf_counter() - start < 0.5, pattern[:40]
        conn.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def real_redis():
    if not HAVE_REDIS:
        pytest.skip("redis-server is not installed")
    server = RedisServer()
    yield server
    server.stop()


KEYS = [b"hello", b"hallo", b"hxllo", b"hllo", b"heeeello", b"h*llo", b"h\\llo", b"Hello",
        b"a]b", b"a-b", b"a^b", b"[x]", b"?", b"*", b"user:1000:name", b"user:42:mail",
        b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", b"", b"x" * 40]
PATTERNS = [b"*", b"h?llo", b"h*llo", b"h[ae]llo", b"h[^e]llo", b"h[a-b]llo", b"h[b-a]llo",
            b"h\\*llo", b"h\\\\llo", b"[", b"[]", b"[^]", b"a[]-]b", b"a[\\^]b", b"a[^a-z]b",
            b"user:*:name", b"user:[0-9]*", b"*:*:*", b"\\?", b"[?*]", b"H*", b"h*", b"[a-]",
            b"a*", b"*b", b"a\\", b"[abc", b"**", b"?*?"] + PATHOLOGICAL


def test_keys_agree_with_redis_server(real_redis) -> None:
    conn = redis.Redis(host=HOST, port=real_redis.port, socket_timeout=30)
    conn.flushall()
    for key in KEYS:
        conn.set(key, b"v")
    for pattern in PATTERNS:
        theirs = sorted(conn.keys(pattern))
        glob = Glob(pattern)
        # KEYS itself answers a lone "*" with every key, before any matching (db.c)
        ours = sorted(k for k in KEYS if pattern == b"*" or glob.match(k))
        assert ours == theirs, pattern
    conn.close()


def test_config_get_agrees_with_redis_server(real_redis) -> None:
    server = PynqServer()
    try:
        ours = redis.Redis(host=HOST, port=server.port, socket_timeout=10)
        theirs = redis.Redis(host=HOST, port=real_redis.port, socket_timeout=10)
        names = set(ours.config_get("*"))
        assert len(names) > 10
        for pattern in [b"MAX*", b"*[a-m]*", b"[^p]*", b"*-*", b"?ort", b"*CLIENTS", b"*[R-T]",
                        b"[M]axmemory", b"*[\\m]*", b"b?nd", b"*e?"] + PATHOLOGICAL:
            got = set(ours.config_get(pattern))
            want = {name for name in theirs.config_get(pattern) if name in names}
            assert got == want, pattern
        ours.close()
        theirs.close()
    finally:
        server.stop()
