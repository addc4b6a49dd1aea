"""pynq_kv.net codecs: binary messages, the UDP frame header and the text subset.

Round trips are checked against independently packed bytes (struct layouts written out here from
the protocol documentation), and malformed input must fail with the documented reason.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.net import codec, text
from pynq_kv.net.codec import CodecError, Opcode, Request, Response
from pynq_kv.net.udpframe import FrameHeader, wrap

small = st.binary(max_size=300)
u8, u16, u32, u64 = (st.integers(0, (1 << n) - 1) for n in (8, 16, 32, 64))

requests = st.builds(Request, u8, small, st.binary(max_size=40), small, u32, u64, u8, u16)
responses = st.builds(Response, u8, u16, small, st.binary(max_size=40), small, u32, u64, u8)


def reference_request(r: Request) -> bytes:
    """The 24-byte request header laid out field by field (memcached binary protocol)."""
    body = r.extras + r.key + r.value
    return (bytes([0x80, r.opcode]) + len(r.key).to_bytes(2, "big") + bytes([len(r.extras),
            r.data_type]) + r.vbucket.to_bytes(2, "big") + len(body).to_bytes(4, "big")
            + r.opaque.to_bytes(4, "big") + r.cas.to_bytes(8, "big") + body)


@settings(max_examples=200, deadline=None)
@given(requests)
def test_request_encoding_and_round_trip(request: Request) -> None:
    raw = request.encode()
    assert raw == reference_request(request)
    parsed, end = codec.parse_request(raw)
    assert parsed == request and end == len(raw)


@settings(max_examples=200, deadline=None)
@given(responses)
def test_response_round_trip(response: Response) -> None:
    raw = response.encode()
    assert raw[0] == 0x81 and struct.unpack_from(">H", raw, 6)[0] == response.status
    assert codec.parse_response(raw) == (response, len(raw))


@settings(max_examples=100, deadline=None)
@given(st.lists(requests, max_size=6))
def test_several_requests_back_to_back(batch: list[Request]) -> None:
    assert codec.parse_requests(b"".join(r.encode() for r in batch)) == batch


@settings(max_examples=200, deadline=None)
@given(requests, st.data())
def test_any_cut_of_a_request_is_refused(request: Request, data: st.DataObject) -> None:
    raw = request.encode()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(CodecError) as info:
        codec.parse_request(raw[:cut])
    if cut < 24:
        assert info.value.reason == "short_header"
    else:
        assert info.value.reason == "short_body"
        assert (info.value.opcode, info.value.opaque) == (request.opcode, request.opaque)
        assert info.value.next_offset is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_arbitrary_bytes_parse_or_fail_cleanly(raw: bytes) -> None:
    try:
        request, end = codec.parse_request(raw)
    except CodecError as exc:
        assert exc.reason in {"short_header", "bad_magic", "short_body", "inconsistent_lengths"}
    else:
        assert request.encode() == raw[:end]


def test_inconsistent_lengths_keep_the_framing() -> None:
    # key length 5 with a 3-byte body: the body length still says where the next request starts
    raw = struct.pack(">BBHBBHIIQ", 0x80, 0x00, 5, 0, 0, 0, 3, 77, 0) + b"abc"
    noop = Request(Opcode.NOOP).encode()
    with pytest.raises(CodecError) as info:
        codec.parse_request(raw + noop)
    assert info.value.reason == "inconsistent_lengths"
    assert (info.value.opcode, info.value.opaque, info.value.next_offset) == (0, 77, len(raw))
    assert codec.parse_request(raw + noop, info.value.next_offset)[0] == Request(Opcode.NOOP)


def test_bad_magic_and_field_ranges() -> None:
    with pytest.raises(CodecError, match="magic") as info:
        codec.parse_request(Response(0).encode())
    assert info.value.reason == "bad_magic"
    with pytest.raises(CodecError):
        codec.parse_response(Request(0).encode())
    for bad in (dict(opcode=256), dict(opcode=-1), dict(opcode=0, opaque=1 << 32),
                dict(opcode=0, cas=1 << 64), dict(opcode=0, key="text"),
                dict(opcode=0, extras=bytes(256)), dict(opcode=0, key=bytes(1 << 16))):
        with pytest.raises(CodecError):
            Request(**bad)
    with pytest.raises(CodecError):
        Response(0, status=1 << 16)
    with pytest.raises(CodecError):
        codec.set_request(b"k", b"v", flags=1 << 32)


def test_builders_give_the_documented_shapes() -> None:
    assert codec.set_request(b"k", b"v", flags=1, exptime=2).extras == struct.pack(">II", 1, 2)
    assert codec.set_request(b"k", b"v", quiet=True).opcode == Opcode.SETQ
    assert codec.delete_request(b"k", quiet=True).opcode == Opcode.DELETEQ
    assert codec.match_request(b"k").opcode == 0xC0
    assert codec.match_extras(2, 7) == bytes([2, 0, 0, 0, 0, 0, 0, 7])
    assert codec.parse_match_extras(bytes([1, 0, 0, 0, 255, 255, 255, 255])) == (1, codec.NO_ENTRY)
    with pytest.raises(CodecError):
        codec.parse_match_extras(b"\x01")
    assert codec.error_response(0, codec.Status.KEY_NOT_FOUND, 9).value == b"Not found"
    assert Request(Opcode.GETKQ).quiet and not Request(Opcode.GETK).quiet


@given(u16, u16, u16, u16)
def test_frame_header_round_trip(rid: int, seq: int, total: int, reserved: int) -> None:
    header = FrameHeader(rid, seq, total, reserved)
    assert header.pack() == struct.pack(">HHHH", rid, seq, total, reserved)
    assert FrameHeader.unpack(header.pack() + b"body") == header


def test_frame_header_refuses_bad_input() -> None:
    with pytest.raises(ValueError):
        FrameHeader.unpack(b"\x00" * 7)
    with pytest.raises(ValueError):
        FrameHeader(1 << 16)
    assert wrap(5, b"x") == b"\x00\x05\x00\x00\x00\x01\x00\x00x"


# -- text subset --------------------------------------------------------------------------
def test_text_commands_parse() -> None:
    body = (b"get a  b\r\nset k 0 0 3 noreply\r\nxyz\r\ndelete k 0\r\ndelete q noreply\n"
            b"version\r\nGET a\r\n\r\nset k 0 0 2 whatever\r\nab\r\n")
    commands, cut = text.parse_text(body)
    assert not cut
    assert commands == [
        text.TextGet((b"a", b"b")),
        text.TextSet(b"k", 0, 0, b"xyz", True, True),
        text.TextDelete(b"k", False),
        text.TextDelete(b"q", True),
        text.TextVersion(),
        text.TextReply(text.R_ERROR),
        text.TextReply(text.R_ERROR),
        text.TextSet(b"k", 0, 0, b"ab", True, False),
    ]


@pytest.mark.parametrize("line, reply", [
    (b"set k 0 0 x\r\n", text.R_BADFMT),
    (b"set k 0 0 -1\r\n", text.R_BADFMT),
    (b"set k a 0 1\r\n", text.R_BADFMT),
    (b"set k 0 0 12345678901\r\n", text.R_BADFMT),
    (b"set k 0 0\r\n", text.R_ERROR),
    (b"delete k 5\r\n", text.R_DELUSAGE),
    (b"delete k noreply 0\r\n", text.R_DELUSAGE),
    (b"delete\r\n", text.R_ERROR),
    (b"delete a b c d\r\n", text.R_ERROR),
    (b"get\r\n", text.R_ERROR),
    (b"version x\r\n", text.R_ERROR),
    (b"gets k\r\n", text.R_ERROR),
])
def test_text_lines_answered_by_syntax(line: bytes, reply: bytes) -> None:
    assert text.parse_text(line) == ([text.TextReply(reply)], False)


def test_text_data_blocks() -> None:
    # the block is <bytes>+2 bytes whatever its last two are (memcached reads it the same way)
    commands, cut = text.parse_text(b"set k 0 0 2\r\nabc\r\nget k\r\n")
    assert commands[0] == text.TextSet(b"k", 0, 0, b"ab", False, False)
    assert commands[1:] == [text.TextReply(text.R_ERROR), text.TextGet((b"k",))]
    assert not cut
    assert text.parse_text(b"set k 0 -5 1\r\nx\r\n")[0] == [text.TextSet(b"k", 0, -5, b"x", True, False)]
    assert text.parse_text(b"get a\r\nset k 0 0 5\r\nab\r\n") == ([text.TextGet((b"a",))], True)
    assert text.parse_text(b"get a\r\nget b") == ([text.TextGet((b"a",))], True)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=60))
def test_text_parser_never_fails(body: bytes) -> None:
    commands, _ = text.parse_text(body)
    assert len(commands) <= body.count(b"\n")


def test_text_formatting() -> None:
    assert text.value_unit(b"k", b"ab") == b"VALUE k 0 2\r\nab\r\n"
    assert text.version_reply(b"x") == b"VERSION x\r\n"
    assert text.is_error(text.R_NOMEM) and text.is_error(text.R_ERROR)
    assert not text.is_error(text.NOT_FOUND) and not text.is_error(text.END)
