"""pynq_kv.bulk: the NDJSON and CSV files the admin API (and the CLI) import and export."""

from __future__ import annotations

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynq_kv.bulk import BulkFormatError, csv_header, format_record, read_records


def read(text: str, fmt: str, **kwargs) -> list:
    return list(read_records(io.StringIO(text, newline=""), fmt, **kwargs))


def test_ndjson_forms():
    text = ('{"key": "a", "value": "b"}\n\n'
            '{"key": 7, "value": {"hex": "ff00"}}\n'
            '{"key": {"base64": "/w=="}, "value": "x", "extra": 1}\n')
    assert read(text, "ndjson") == [(1, b"a", b"b"), (3, 7, b"\xff\x00"), (4, b"\xff", b"x")]
    assert read('{"key": "0x10", "value": "12"}\n', "ndjson", int_keys=True, int_values=True) == [(1, 16, 12)]


def test_csv_forms():
    text = 'id,value,key\n1,"multi\nline",k1\n\n2,v2,k2\n'
    assert read(text, "csv") == [(3, b"k1", b"multi\nline"), (5, b"k2", b"v2")]  # where a record ends
    assert read("key,value\n,\n", "csv") == [(2, b"", b"")]
    assert read("key,value\n6b,ff\n", "csv", encoding="hex") == [(2, b"k", b"\xff")]
    assert read("key,value\n0x2a,9\n", "csv", int_keys=True, int_values=True) == [(2, 42, 9)]


@pytest.mark.parametrize("fmt, text, line, column", [
    ("ndjson", '{"key": "a", "value": "b"}\n{"key": "a"\n', 2, None),
    ("ndjson", '[1, 2]\n', 1, None),
    ("ndjson", '{"key": true, "value": "b"}\n', 1, "key"),
    ("ndjson", '{"key": "a", "value": {"hex": "f"}}\n', 1, "value"),
    ("ndjson", '{"key": "x", "value": "3"}\n{"key": "z", "value": "1.5"}\n', 2, "value"),
    ("csv", "k,v\n", 1, None),
    ("csv", "", 1, None),
    ("csv", "key,value\na,b,c\n", 2, None),
    ("csv", "key,value\nzz,00\n", 2, "key"),
])
def test_errors_name_the_line(fmt, text, line, column):
    options = {"encoding": "hex"} if "zz" in text else {"int_values": "1.5" in text}
    with pytest.raises(BulkFormatError) as info:
        read(text, fmt, **options)
    assert (info.value.line, info.value.column) == (line, column)
    assert str(info.value).startswith(f"line {line}: ")


items = st.one_of(st.binary(max_size=12), st.integers(min_value=0, max_value=1 << 300))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(items, items), max_size=5))
def test_ndjson_round_trips_anything(records):
    text = "".join(format_record(k, v, "ndjson") for k, v in records)
    assert [(k, v) for _, k, v in read(text, "ndjson")] == records


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=12), st.binary(max_size=12)), max_size=5),
       st.sampled_from(["hex", "base64"]))
def test_csv_round_trips_bytes_in_hex_and_base64(records, encoding):
    text = csv_header() + "".join(format_record(k, v, "csv", encoding) for k, v in records)
    assert [(k, v) for _, k, v in read(text, "csv", encoding=encoding)] == records


def test_csv_quotes_cells_and_refuses_bytes_that_are_not_text_under_utf8():
    assert format_record(b"a,b", b'say "hi"', "csv") == '"a,b","say ""hi"""\n'
    with pytest.raises(ValueError, match="not UTF-8"):
        format_record(b"\xff", b"v", "csv")
