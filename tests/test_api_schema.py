"""Schemathesis fuzzes the admin API from its own OpenAPI document: no input may cause a 5xx.

Every operation is exercised with the bearer token, so the mutating routes run for real against
a small engine; bulk imports get generated NDJSON and CSV bodies (valid and broken).
"""

from __future__ import annotations

import json

import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from api_support import AUTH, TOKEN, small_appliance
from pynq_kv_api.deps import get_appliance
from pynq_kv_api.main import create_app

APPLIANCE = small_appliance()
APP = create_app(token=TOKEN)
APP.dependency_overrides[get_appliance] = lambda: APPLIANCE

_items = st.one_of(st.text(max_size=40), st.integers(min_value=-2, max_value=1 << 300),
                   st.fixed_dictionaries({"hex": st.text("0123456789abcdefg", max_size=10)}),
                   st.none(), st.booleans())
_ndjson_line = st.one_of(
    st.fixed_dictionaries({"key": _items, "value": _items}).map(json.dumps),
    st.text(max_size=30))
_csv_row = st.tuples(st.text(max_size=20), st.text(max_size=20)).map(lambda kv: f"{kv[0]},{kv[1]}\n")


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # lone surrogates make invalid UTF-8: also a case


schemathesis.openapi.media_type(
    "application/x-ndjson", st.lists(_ndjson_line, max_size=5).map(lambda lines: _utf8("\n".join(lines))))
schemathesis.openapi.media_type(
    "text/csv", st.lists(_csv_row, max_size=5).map(lambda rows: _utf8("key,value\n" + "".join(rows))))

schema = schemathesis.openapi.from_asgi("/openapi.json", APP)


@schema.parametrize()
@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
def test_no_input_causes_a_server_error(case):
    response = case.call(headers=AUTH)
    assert response.status_code < 500, (
        f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}")
