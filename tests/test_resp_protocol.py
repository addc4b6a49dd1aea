"""RESP framing in isolation: the request parser (partial frames, inline commands, pipelines,
malformed input, limits) and the reply encoders. Redis' own answers to the same bytes are
checked in test_resp_compat.py (test_raw_bytes_identical).

Every test runs twice: with the parser's fast path in C (pynq_kv/_respfast.c) and with the
Python one (RequestParser._fast_py) that replaces it where the C was not built."""

from __future__ import annotations

import itertools
import os

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.serve.resp import errors as E
from pynq_kv.serve.resp import protocol
from pynq_kv.serve.resp.protocol import (
    ErrorReply,
    Raw,
    RequestParser,
    RespSet,
    Simple,
    Verbatim,
    commands_of,
    encode,
    splitargs,
    splitargs_stepwise,
    string2ll,
)
from resp_helpers import encode_command

BUILT_FAST_C = protocol.fast_c


@pytest.fixture(scope="module", autouse=True, params=["c", "python"])
def fast_path(request: pytest.FixtureRequest):
    """Which fast path the parser takes: module-scoped, so hypothesis' tests can run on both."""
    if request.param == "c" and BUILT_FAST_C is None:
        pytest.skip("pynq_kv._respfast was not built")
    protocol.fast_c = BUILT_FAST_C if request.param == "c" else None
    yield request.param
    protocol.fast_c = BUILT_FAST_C


def test_the_parser_uses_the_c_fast_path_when_it_was_built() -> None:
    if os.environ.get("CI"):  # make test installs a compiler and Python's headers: it is built
        assert BUILT_FAST_C is not None


def parse(data: bytes, chunk: int = 0, **kwargs) -> tuple[list[list[bytes]], bytes | None]:
    """(commands, protocol error) of data fed whole or in chunks."""
    parser = RequestParser(**kwargs)
    out: list = []
    pieces = [data[i:i + chunk] for i in range(0, len(data), chunk)] if chunk else [data]
    for piece in pieces:
        parser.feed(piece, out)
    return [c for item in out for c in commands_of(item)], parser.error


@pytest.mark.parametrize("chunk", [0, 1, 2, 3, 7, 64])
def test_pipeline_of_multibulk_commands_in_any_chunking(chunk):
    commands = [[b"SET", b"k%d" % i, b"v\r\n%d" % i] for i in range(20)] + [[b"GET", b"k1"]] * 30
    data = b"".join(encode_command(*c) for c in commands)
    assert parse(data, chunk) == (commands, None)


def test_partial_frame_waits_and_keeps_state():
    parser = RequestParser()
    out: list = []
    data = encode_command("SET", "key", "value") + encode_command("PING")
    for i, byte in enumerate(data):
        parser.feed(bytes([byte]), out)
        if i < len(data) - 15:
            assert out == []
    assert [c for item in out for c in commands_of(item)] == [[b"SET", b"key", b"value"], [b"PING"]]
    assert not parser.pending() and parser.buffered() == 0


def test_long_bulk_is_held_until_complete_then_parsed_once():
    value = b"x" * 100_000
    data = encode_command("SET", "k", value)
    parser = RequestParser()
    out: list = []
    for start in range(0, len(data), 1000):
        parser.feed(data[start:start + 1000], out)
        if start + 1000 < len(data):
            assert out == [] and parser.buffered() >= start
    assert commands_of(out[0]) == [[b"SET", b"k", value]]


def test_uniform_pipeline_comes_out_as_one_block():
    data = b"".join(encode_command("GET", "key:%d" % i) for i in range(16))
    parser = RequestParser()
    out: list = []
    assert parser.feed(data + b"*2\r\n$3\r\nGE", out) == 16
    assert len(out) == 1 and type(out[0]) is tuple
    assert out[0][0] == [b"GET"] * 16 and out[0][1] == [b"key:%d" % i for i in range(16)]
    assert parser.pending()
    parser.feed(b"T\r\n$1\r\nz\r\n", out)
    assert out[1] == [b"GET", b"z"]



def test_after_a_command_split_between_reads_the_rest_takes_the_fast_path_again():
    # A read ending inside a command used to send the whole next read down the exact path, one
    # 64 KiB split per GET: 3 s to parse 256 KiB of pipelined GETs (issue 16, one client
    # starving the rest). The carried command comes out alone, the rest as one block again.
    commands = [[b"GET", b"known:%06d" % i] for i in range(2000)]
    data = b"".join(encode_command(*c) for c in commands)
    parser = RequestParser()
    out: list = []
    cut = len(data) // 2 + 7  # inside a command
    parser.feed(data[:cut], out)
    first = len(out)
    parser.feed(data[cut:], out)
    assert [c for item in out for c in commands_of(item)] == commands
    later = out[first:]
    assert type(later[0]) is list  # the command that straddled the cut
    assert len(later) == 2 and type(later[1]) is tuple and len(later[1][0]) > 900

def test_inline_commands():
    assert parse(b"SET a b\r\nGET a\nPING\r\n") == ([[b"SET", b"a", b"b"], [b"GET", b"a"], [b"PING"]], None)
    assert parse(b"\r\n  \t\r\n\n") == ([], None)
    assert parse(b"GET a") == ([], None)  # no newline yet


@pytest.mark.parametrize("line, args", [
    (b"a b  c", [b"a", b"b", b"c"]),
    (b'"a b" c', [b"a b", b"c"]),
    (b'"\\x41\\x4a\\n\\r\\t\\b\\a\\"\\\\"', [b"AJ\n\r\t\b\a\"\\"]),
    (b'"\\x4g"', [b"x4g"]),
    (b"'it\\'s' x", [b"it's", b"x"]),
    (b"'a\\nb'", [b"a\\nb"]),
    (b'a"b c"d', None), (b'"a"b', None), (b"'a'b", None), (b'"abc', None), (b"'abc", None),
    (b'ab"c d" e', [b"abc d", b"e"]), (b'ab"c d"', [b"abc d"]), (b"x\vy", [b"x\vy"]), (b"\v\fx", [b"x"]),
    (b'""', [b""]), (b"''", [b""]),
])
def test_splitargs_follows_sdssplitargs(line, args):
    assert splitargs(line) == args


@pytest.mark.parametrize("line, args", [(b"a\x0bb \x0cc", [b"a\x0bb", b"c"]),
                                        (b"a\x0cb", [b"a\x0cb"]),
                                        (b"\x0b\x0c get k", [b"get", b"k"])])
def test_vertical_tab_and_form_feed_are_blanks_only_before_a_token(line, args):
    assert splitargs(line) == args


@given(st.binary(max_size=40).map(lambda b: b.replace(b"\0", b"")))
def test_the_quick_split_is_the_stepwise_one(line):
    """splitargs takes bytes.split() for a line without quotes, \v or \f: the same words."""
    assert splitargs(line) == splitargs_stepwise(line)


@pytest.mark.parametrize("text, value", [
    (b"0", 0), (b"12", 12), (b"-7", -7), (b"9223372036854775807", (1 << 63) - 1),
    (b"-9223372036854775808", -(1 << 63)),
    (b"", None), (b"01", None), (b"-0", None), (b"+1", None), (b" 1", None), (b"1_0", None),
    (b"9223372036854775808", None), (b"1" * 21, None), (b"\xd9\xa3", None), (b"-", None),
])
def test_string2ll_is_strict(text, value):
    assert string2ll(text) == value


@pytest.mark.parametrize("data, error", [
    (b"*1\r\n+PING\r\n", b"ERR Protocol error: expected '$', got '+'"),
    (b"*1\r\n$-1\r\n", E.PROTO_INVALID_BULK),
    (b"*x\r\n", E.PROTO_INVALID_MBULK),
    (b"*2147483648\r\n", E.PROTO_INVALID_MBULK),
    (b"'unbalanced\r\n", E.PROTO_UNBALANCED),
    (b"A" * (64 * 1024 + 1), E.PROTO_TOO_BIG_INLINE),
    (b"*" + b"1" * (64 * 1024 + 1), E.PROTO_TOO_BIG_MBULK),
    (b"*1\r\n$" + b"1" * (64 * 1024 + 1), E.PROTO_TOO_BIG_BULK),
    (b"*1\r\n$1025\r\n", E.PROTO_INVALID_BULK),  # over max_bulk_len=1024 below
])
@pytest.mark.parametrize("chunk", [0, 1000])
def test_protocol_errors_after_the_commands_before_them(data, error, chunk):
    commands, got = parse(encode_command("PING") + data, chunk, max_bulk_len=1024)
    assert commands == [[b"PING"]]
    assert got == error


def test_nothing_is_accepted_after_an_error():
    parser = RequestParser()
    out: list = []
    parser.feed(b"*1\r\n$x\r\n", out)
    assert parser.error == E.PROTO_INVALID_BULK
    parser.feed(encode_command("PING"), out)
    assert out == [] and parser.buffered() == 0


def test_unauthenticated_limits_and_one_command_at_a_time():
    parser = RequestParser()
    parser.unauth = True
    out: list = []
    assert parser.feed(encode_command("PING") * 3, out, limit=1) == 1
    assert parser.resume(out, 1) == 1 and parser.resume(out, 1) == 1 and parser.resume(out, 1) == 0
    parser.feed(b"*11\r\n", out)
    assert parser.error == E.PROTO_UNAUTH_MBULK
    parser = RequestParser()
    parser.unauth = True
    parser.feed(b"*1\r\n$16385\r\n", out)
    assert parser.error == E.PROTO_UNAUTH_BULK


def test_nul_byte_stops_a_header_like_strchr():
    # Redis looks for the line end with strchr(), which stops at a NUL: the line never ends
    assert parse(b"PING\x00\r\n") == ([], None)
    assert parse(b"*1\x00\r\n$4\r\nPING\r\n") == ([], None)
    assert parse(b"*1\r\n$4\r\nP\x00NG\r\n") == ([[b"P\x00NG"]], None)  # payloads are binary


def test_partial_command_counts_towards_buffered():
    parser = RequestParser()
    out: list = []
    parser.feed(b"*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$100\r\n" + b"x" * 50, out)
    assert out == [] and parser.pending()
    assert parser.buffered() >= 3 + 5 + 50


commands_strategy = st.lists(
    st.lists(st.binary(max_size=40), min_size=1, max_size=5), min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(commands=commands_strategy, cuts=st.lists(st.integers(0, 2000), max_size=10))
def test_any_split_of_a_pipeline_gives_the_same_commands(commands, cuts):
    data = b"".join(encode_command(*c) for c in commands)
    cuts = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    parser = RequestParser()
    out: list = []
    for a, b in zip(cuts, cuts[1:]):
        parser.feed(data[a:b], out)
    assert [c for item in out for c in commands_of(item)] == commands
    assert parser.error is None and not parser.pending()


@settings(max_examples=400, deadline=None)
@given(name=st.sampled_from([b"GET", b"SET", b"get", b"PING", b"X"]), argc=st.integers(1, 3),
       sizes=st.lists(st.integers(0, 20), min_size=2, max_size=2), count=st.integers(1, 24),
       payload=st.binary(min_size=64, max_size=64),
       mutations=st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=2),
       tail=st.binary(max_size=12), chunk=st.sampled_from([0, 0, 1, 5, 50]))
def test_uniform_pipelines_parse_as_the_exact_path_does(name, argc, sizes, count, payload,
                                                         mutations, tail, chunk):
    """The shape path (a run of commands with one name and fixed argument lengths, matched by
    one regular expression) agrees with the exact path byte by byte, also when one byte of
    the run is changed (a CRLF or header broken, a payload with CRLF in it) or a tail follows."""
    commands = []
    for i in range(count):
        args = [name] + [bytes(payload[(i * 7 + j * 13 + k) % 64] for k in range(sizes[j - 1]))
                         for j in range(1, argc)]
        commands.append(args)
    data = bytearray(b"".join(encode_command(*c) for c in commands) + tail)
    for pos, byte in mutations:
        data[pos % len(data)] = byte
    data = bytes(data)
    exact = RequestParser()
    want: list = []
    for i in range(len(data)):  # one byte at a time never takes a fast path
        exact.feed(data[i:i + 1], want)
    got = parse(data, chunk)
    assert got == ([c for item in want for c in commands_of(item)], exact.error)
    if not mutations and not tail and count >= 4 and not chunk:
        assert got == (commands, None)


@pytest.mark.parametrize("argc", [2, 3])
@pytest.mark.parametrize("where", [0, 5, 15])
def test_shape_run_with_its_own_separators_in_a_payload_parses_as_the_exact_path(argc, where):
    """A payload of the run's declared length holding the bytes the shape path cuts at (what
    lies between two commands, or between the two arguments) must not shift the cut: the run
    gives the commands the exact path reads, byte for byte."""
    name, size = b"X", 40
    between = b"\r\n*%d\r\n$1\r\nX\r\n$%d\r\n" % (argc, size)
    gap = b"\r\n$%d\r\n" % size
    commands = []
    for i in range(16):
        args = [name, b"k%039d" % i] + ([b"v%039d" % i] if argc == 3 else [])
        commands.append(args)
    for sep in (between, gap):
        tricky = (b"a" * 3 + sep).ljust(size, b"b")
        cmds = [list(c) for c in commands]
        cmds[where][1] = tricky
        if argc == 3:
            cmds[(where + 1) % 16][2] = tricky
        data = b"".join(encode_command(*c) for c in cmds)
        exact = RequestParser()
        want: list = []
        for i in range(len(data)):  # one byte at a time never takes a fast path
            exact.feed(data[i:i + 1], want)
        got = parse(data)
        assert got == ([c for item in want for c in commands_of(item)], None) == (cmds, None)
    uniform = RequestParser()
    out: list = []
    uniform.feed(b"".join(encode_command(*c) for c in commands), out)
    assert len(out) == 1 and type(out[0]) is tuple  # the shape path took the plain run whole
    assert [list(column) for column in out[0]] == [list(column) for column in zip(*commands)]


@settings(max_examples=300, deadline=None)
@given(commands=commands_strategy, cuts=st.lists(st.integers(0, 2000), max_size=10),
       tail=st.sampled_from([b"", b"*2\r\n$3\r\nGE", b"PING\r\n", b"*1\r\n$x\r\n", b"$3\r\n"]))
def test_take_parses_as_feed_does_and_says_when_nothing_is_left(commands, cuts, tail):
    """take (the server's call for a read) gives feed's items, blocks and errors for the same
    reads, and True exactly when nothing is pending and no error was found."""
    data = b"".join(encode_command(*c) for c in commands) * 5 + tail
    cuts = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    fed, took = RequestParser(), RequestParser()
    want: list = []
    got: list = []
    for a, b in zip(cuts, cuts[1:]):
        fed.feed(data[a:b], want)
        idle = took.take(data[a:b], got)
        assert got == want and took.error == fed.error
        assert idle == (not fed.pending() and fed.error is None)
        assert took.buffered() == fed.buffered()


_odd_count = st.sampled_from([b"0", b"00", b"01", b"+1", b"-1", b" 1", b"1 ", b"", b"x", b"1024",
                               b"1025", b"4096", b"4097", b"99999999999999999999"])
_payload = st.one_of(st.binary(max_size=6), st.sampled_from([b"\r\n", b"a\r\n*1\r\n$1\r\nb",
                                                           b"x" * 4096, b"y" * 4097]))


@st.composite
def _request_piece(draw) -> bytes:
    """A command as clients send it, or one with a header, a CRLF or its framing changed."""
    argc = draw(st.sampled_from([1, 2, 2, 3, 3, 4, 33]))
    name = draw(st.sampled_from([b"GET", b"SET", b"get", b"X"]))
    args = [name] + [draw(_payload) for _ in range(argc - 1)]
    kind = draw(st.sampled_from(["plain"] * 6 + ["count", "length", "crlf", "inline"]))
    if kind == "inline":
        return b" ".join(a for a in args if b"\r" not in a and b"\n" not in a and b" " not in a)[:40] + b"\r\n"
    data = encode_command(*args)
    if kind == "count":
        return b"*" + draw(_odd_count) + data[data.index(b"\r\n"):]
    if kind == "length":
        at = data.index(b"$")
        return data[:at + 1] + draw(_odd_count) + data[data.index(b"\r\n", at):]
    if kind == "crlf":
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + draw(st.sampled_from([b"\n", b"\r", b"\r\r", b"", b"\0"])) + data[at + 1:]
    return data


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.tuples(_request_piece(), st.integers(1, 6)), min_size=1, max_size=8),
       cuts=st.lists(st.integers(0, 60_000), max_size=6),
       max_bulk_len=st.sampled_from([512 * 1024 * 1024, 4, 4096]))
def test_the_fast_path_takes_what_the_exact_path_reads_as_it_reads_it(pieces, cuts, max_bulk_len):
    """Runs of well-formed commands around ones with a non-canonical count or length, a
    length over the limit, a payload holding CRLF, a broken CRLF or an inline line, read in any
    pieces: the same commands, protocol error and leftover state as the exact path alone (a
    parse one command at a time)."""
    data = b"".join(piece * times for piece, times in pieces)
    exact = RequestParser(max_bulk_len)
    want: list = []
    exact.feed(data, want, 1)  # a limit parses a command at a time, never a fast path
    while exact.resume(want, 1):
        pass
    cuts = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    parser = RequestParser(max_bulk_len)
    got: list = []
    for a, b in zip(cuts, cuts[1:]):
        parser.take(data[a:b], got)
    assert [c for item in got for c in commands_of(item)] == want
    assert parser.error == exact.error
    if exact.error is None:
        assert parser.pending() == exact.pending() and parser.buffered() == exact.buffered()
    for item in got:  # a block holds commands of one argument count, within the limit
        if type(item) is tuple:
            assert len(item) <= protocol.BLOCK_MAX_ARGS and len({len(c) for c in item}) == 1


@pytest.mark.parametrize("argc", [1, 2, 32, 33])
def test_runs_of_one_argument_count_come_out_as_blocks(fast_path, argc):
    """The C fast path makes a block of every run of at least 4 commands with one argument
    count, up to BLOCK_MAX_ARGS arguments (the Python one of a leading uniform run only)."""
    command = [b"X"] + [b"a%d" % i for i in range(argc - 1)]
    commands = [command] * 5 + [[b"GET", b"k"]] + [command] * 3 + [[b"GET", b"k"]] * 4
    parser = RequestParser()
    out: list = []
    assert parser.feed(b"".join(encode_command(*c) for c in commands), out) == len(commands)
    assert [c for item in out for c in commands_of(item)] == commands
    if fast_path == "c":
        expected = []
        for argc_of_run, run in itertools.groupby(commands, len):
            run = list(run)
            blocked = len(run) >= 4 and argc_of_run <= protocol.BLOCK_MAX_ARGS
            expected += [tuple] if blocked else [list] * len(run)
        assert [type(item) for item in out] == expected
        # a name equal to the one before it is the same bytes object
        names: list[bytes] = []
        for item in out:
            names += item[0] if type(item) is tuple else [item[0]]
        assert all(a is b for a, b in zip(names, names[1:]) if a == b)


# -- encoders -----------------------------------------------------------------------------------
def decode(data: bytes):
    reader = hiredis.Reader(notEnoughData=Ellipsis)
    reader.feed(data)
    value = reader.gets()
    assert reader.gets() is Ellipsis
    return value


def test_encoding_resp2_and_resp3():
    value = {b"a": 1, b"b": [None, b"x", Simple("OK")], b"c": RespSet([b"s"])}
    assert encode(value, False) == (b"*6\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n*3\r\n$-1\r\n$1\r\nx\r\n"
                                    b"+OK\r\n$1\r\nc\r\n*1\r\n$1\r\ns\r\n")
    assert encode(value, True).startswith(b"%3\r\n")
    assert decode(encode(value, True)) == {b"a": 1, b"b": [None, b"x", b"OK"], b"c": [b"s"]}
    assert encode(RespSet([b"s"]), True) == b"~1\r\n$1\r\ns\r\n"
    assert encode(None, True) == b"_\r\n" and encode(True, True) == b"#t\r\n" and encode(True, False) == b":1\r\n"
    assert encode(Verbatim("hi"), True) == b"=6\r\ntxt:hi\r\n" and encode(Verbatim("hi"), False) == b"$2\r\nhi\r\n"
    assert encode(1.5, True) == b",1.5\r\n" and encode(1.5, False) == b"$3\r\n1.5\r\n"
    assert encode(Raw(b"+X\r\n"), False) == b"+X\r\n"
    assert encode(ErrorReply(b"ERR a\r\nb"), False) == b"-ERR a  b\r\n"
    assert encode(b"x" * 2000, False) == b"$2000\r\n" + b"x" * 2000 + b"\r\n"


def test_error_messages_match_redis_formats():
    assert E.unknown_command([b"FOO", b"a" * 100, b"b" * 50, b"c"]) == (
        b"ERR unknown command 'FOO', with args beginning with: '" + b"a" * 100 + b"' '" + b"b" * 25 + b"' ")
    assert E.unknown_command([b"F\x00OO", b"a\x00b"]) == b"ERR unknown command 'F', with args beginning with: 'a' "
    assert E.unknown_subcommand(b"client", b"nope") == b"ERR unknown subcommand 'nope'. Try CLIENT HELP."
    assert E.error_reply(b"ERR x\r\ny\n") == b"-ERR x  y \r\n"


_inline_line = st.lists(st.sampled_from([b"PING", b"GET", b"k", b"'a b'", b'"x"', b"v"]),
                        min_size=0, max_size=3).map(b" ".join)


@given(st.lists(st.tuples(_inline_line, st.sampled_from([b"\r\n", b"\n"]), st.integers(1, 5)),
                min_size=1, max_size=5))
def test_a_run_of_one_inline_line_parses_as_the_lines_one_by_one(runs):
    """Repeated inline lines come out as one block: the same commands as one at a time."""
    data = b"".join((line + end) * times for line, end, times in runs)
    one_by_one = RequestParser()
    expected: list = []
    one_by_one.feed(data, expected, 1)  # a limit parses a command at a time, never a run
    while one_by_one.resume(expected, 1):
        pass
    assert all(type(item) is list for item in expected)
    out: list = []
    RequestParser().feed(data, out)
    assert [c for item in out for c in commands_of(item)] == expected
    assert len(out) <= sum(1 for line, _, _ in runs if line.strip())  # a block per run at most


def test_a_run_of_inline_pings_is_one_block():
    out: list = []
    RequestParser().feed(b"PING\r\n" * 5 + b"PING x\n", out)
    assert out == [([b"PING"] * 5,), [b"PING", b"x"]]
