"""Reply framing of the host tier's Redis links (pynq_kv.redislink): the C framer
(pynq_kv/_respframe.c) and the Python one agree on every reply, every cut of it and every
malformed byte string, and both agree with the replies as they were built; the C request
encoders (one command, a block of them) encode as the Python ones."""

from __future__ import annotations

import asyncio
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv import redislink
from pynq_kv.redislink import ProtocolError, frame_replies_py, reply_end

try:
    from pynq_kv._respframe import encode as encode_c
    from pynq_kv._respframe import encode_block as encode_block_c
    from pynq_kv._respframe import frame as frame_c
except ImportError:  # pragma: no cover - the install built no C extension
    encode_c = encode_block_c = frame_c = None

needs_c = pytest.mark.skipif(frame_c is None, reason="pynq_kv._respframe was not built")

_text = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"r").replace(b"\n", b"n"))


def _reply(depth: int = 2) -> st.SearchStrategy[bytes]:
    """Any RESP2/RESP3 reply Redis may send (pushes apart), as bytes."""
    leaves = st.one_of(
        _text.map(lambda t: b"+" + t + b"\r\n"),
        _text.map(lambda t: b"-ERR " + t + b"\r\n"),
        st.integers(-2**63, 2**63 - 1).map(lambda n: b":%d\r\n" % n),
        st.binary(max_size=40).map(lambda b: b"$%d\r\n%s\r\n" % (len(b), b)),
        st.just(b"$-1\r\n"), st.just(b"*-1\r\n"), st.just(b"_\r\n"), st.just(b"#t\r\n"),
        st.just(b",1.5\r\n"), st.just(b"(12345678901234567890\r\n"),
        st.binary(max_size=20).map(lambda b: b"=%d\r\ntxt:%s\r\n" % (len(b) + 4, b)),
    )
    if depth == 0:
        return leaves
    inner = _reply(depth - 1)
    return st.one_of(
        leaves,
        st.lists(inner, max_size=5).map(lambda xs: b"*%d\r\n" % len(xs) + b"".join(xs)),
        st.lists(inner, max_size=4).map(lambda xs: b"~%d\r\n" % len(xs) + b"".join(xs)),
        st.lists(st.tuples(inner, inner), max_size=3).map(
            lambda ps: b"%%%d\r\n" % len(ps) + b"".join(k + v for k, v in ps)),
        st.tuples(inner, inner, inner).map(lambda t: b"|1\r\n" + t[0] + t[1] + t[2]),
    )


def _both(buf: bytes, pos: int, limit: int) -> tuple:
    """What each framer says: a result, or that the bytes are not RESP."""
    out = []
    for framer in (frame_c, frame_replies_py):
        try:
            out.append(framer(buf, pos, limit))
        except ValueError:
            out.append("not RESP")
    return tuple(out)


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.lists(_reply(), min_size=1, max_size=6), st.data())
def test_c_and_python_frame_the_same_replies(replies: list[bytes], data: st.DataObject) -> None:
    buf = b"".join(replies)
    ends = []
    pos = 0
    for reply in replies:
        pos += len(reply)
        ends.append(pos)
    errors = sum(r[:1] == b"-" for r in replies)
    limit = data.draw(st.integers(1, len(replies) + 2))
    c, py = _both(buf, 0, limit)
    assert c == py
    n = min(limit, len(replies))
    assert c == (ends[n - 1], n, sum(r[:1] == b"-" for r in replies[:n]))
    assert _both(buf, 0, len(replies))[0] == (len(buf), len(replies), errors)
    cut = data.draw(st.integers(0, len(buf)))  # a read that ends anywhere
    c, py = _both(buf[:cut], 0, len(replies))
    assert c == py
    whole = sum(1 for end in ends if end <= cut)
    assert c[1] == whole and c[0] == (ends[whole - 1] if whole else 0)


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.integers(0, 4))
def test_c_and_python_agree_on_any_bytes(buf: bytes, limit: int) -> None:
    c, py = _both(buf, 0, limit)
    assert c == py


@pytest.mark.parametrize("framer", [pytest.param(frame_c, marks=needs_c, id="c"),
                                    pytest.param(frame_replies_py, id="python")])
def test_framing_stops_at_a_push_and_at_the_limit(framer) -> None:
    buf = b"+OK\r\n:1\r\n>2\r\n$10\r\ninvalidate\r\n*0\r\n+OK\r\n"
    assert framer(buf, 0, 9) == (9, 2, 0)
    assert framer(buf, 0, 1) == (5, 1, 0)
    push_end = reply_end(buf, 9)
    assert framer(buf, push_end, 9) == (len(buf), 1, 0)
    assert framer(b"-ERR x\r\n-ERR y\r\n+OK\r\n", 0, 5) == (21, 3, 2)


@pytest.mark.parametrize("framer", [pytest.param(frame_c, marks=needs_c, id="c"),
                                    pytest.param(frame_replies_py, id="python")])
@pytest.mark.parametrize("bad", [b"?x\r\n", b"$abc\r\n", b"*\r\n", b"*1\r\n!-\r\n"])
def test_bytes_that_are_not_resp_are_refused(framer, bad: bytes) -> None:
    with pytest.raises(ValueError):
        framer(bad, 0, 5)
    assert issubclass(ProtocolError, ValueError)


def test_the_link_uses_the_c_framer_when_it_was_built() -> None:
    assert redislink.frame_replies is (frame_c or frame_replies_py)
    if os.environ.get("CI"):  # make test installs a compiler and Python's headers: it is built
        assert frame_c is not None and redislink._encode_c is encode_c is not None
        assert redislink._encode_block_c is encode_block_c is not None


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=12), st.binary(min_size=9990, max_size=10010)),
                max_size=40))
def test_the_c_encoder_encodes_as_the_python_one(args: list[bytes]) -> None:
    assert encode_c(args) == redislink.encode_command_py(args)
    assert encode_c(tuple(args)) == redislink.encode_command(args)


def test_arguments_other_than_bytes_take_the_python_encoder() -> None:
    mixed = [b"SET", bytearray(b"k"), memoryview(b"v")]
    assert redislink.encode_command(mixed) == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
    if encode_c is not None:
        with pytest.raises(TypeError):
            encode_c(mixed)


_arg = st.one_of(st.binary(max_size=8), st.binary(min_size=4090, max_size=4100))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4).flatmap(lambda argc: st.lists(
    st.lists(_arg, min_size=argc, max_size=argc), min_size=1, max_size=6)))
def test_a_block_encodes_as_its_commands_one_by_one(rows: list[list[bytes]]) -> None:
    block = tuple(list(column) for column in zip(*rows))
    expected = b"".join(map(redislink.encode_command_py, rows))
    assert redislink.encode_block_py(block) == expected
    assert redislink.encode_block(block) == expected
    if encode_block_c is not None:
        assert encode_block_c(tuple(map(tuple, block))) == expected


@needs_c
def test_the_c_block_encoder_refuses_what_it_cannot_encode() -> None:
    """Other bytes-like arguments go to the Python encoder (a TypeError from C); columns of
    different lengths are a caller's bug in both encoders."""
    mixed = ([b"SET", b"SET"], [b"k", bytearray(b"l")], [b"v", memoryview(b"w")])
    assert redislink.encode_block(mixed) == (b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
                                             b"*3\r\n$3\r\nSET\r\n$1\r\nl\r\n$1\r\nw\r\n")
    for bad in (mixed, [], [[b"x"]] * 65, [b"not a column of bytes"], [[b"a"], 7]):
        with pytest.raises(TypeError):
            encode_block_c(bad)
    assert encode_block_c([[b"PING"]] * 64) == b"*64\r\n" + b"$4\r\nPING\r\n" * 64
    assert encode_block_c([[], []]) == b""
    with pytest.raises(ValueError):
        encode_block_c([[b"INCR", b"INCR"], [b"a"]])
    with pytest.raises(ValueError):
        redislink.encode_block_py([[b"INCR", b"INCR"], [b"a"]])


class _Recorder:
    """A transport that keeps what the link writes, one entry per write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def close(self) -> None:
        pass


def test_a_link_writes_at_once_when_early_write_requests_wait() -> None:
    """Fewer than EARLY_WRITE requests go out at the end of the loop turn, in one write; the
    request that makes EARLY_WRITE (or a run that large) goes out at once with all queued before
    it. Replies still reach their handlers in request order across the writes."""
    async def scenario() -> None:
        link = redislink.Link("test", on_lost=lambda link, exc: None)
        out = _Recorder()
        link.connection_made(out)
        got: list[bytes] = []
        for i in range(redislink.EARLY_WRITE - 1):
            link.send(redislink.encode_command([b"GET", b"k%d" % i]), got.append)
        assert out.writes == []
        link.send(redislink.encode_command([b"GET", b"last"]), got.append)
        assert len(out.writes) == 1 and out.writes[0].count(b"GET") == redislink.EARLY_WRITE
        runs: list[tuple[bytes, int]] = []
        link.send_many(redislink.encode_block(([b"SET"] * 3, [b"a", b"b", b"c"], [b"1"] * 3)), 3,
                       lambda replies, errors: runs.append((replies, errors)))
        assert len(out.writes) == 1  # three: at the end of the turn
        await asyncio.sleep(0)
        assert len(out.writes) == 2 and out.writes[1].count(b"SET") == 3
        big = redislink.EARLY_WRITE + 1
        link.send_many(redislink.encode_block(([b"SET"] * big, [b"k"] * big, [b"v"] * big)), big,
                       lambda replies, errors: runs.append((replies, errors)))
        assert len(out.writes) == 3  # a run of EARLY_WRITE or more: at once
        link.data_received(b"$1\r\nv\r\n" * redislink.EARLY_WRITE + b"+OK\r\n-ERR no\r\n+OK\r\n"
                           + b"+OK\r\n" * big)
        assert got == [b"$1\r\nv\r\n"] * redislink.EARLY_WRITE
        assert runs == [(b"+OK\r\n-ERR no\r\n+OK\r\n", 1), (b"+OK\r\n" * big, 0)]
        await asyncio.sleep(0)
        assert len(out.writes) == 3

    asyncio.run(scenario())
