"""Bodies refused before they are read, and paths that cannot leave the service (issue 16).

The ASGI-level tests call the app with a receive() that records every call, so "not read" is
checked, not assumed; the server tests stream 200 MB into a real `pynq-kv serve` and read its
RSS (the `big_body` scenario of the abuse suite, tests/abuse_scenarios.py, which
benchmarks/abuse.py runs at 500 MB).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest

from abuse_scenarios import big_body
from abuse_support import ADMIN_TOKEN, HOST, Scenario, Served, http_request, run_scenario
from api_support import AUTH, TOKEN, small_appliance
from pynq_kv.serve.config import ConfigError, build_config
from pynq_kv_api.deps import get_appliance
from pynq_kv_api.main import create_app
SERVER_AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

HUGE = 10 ** 9


def call(app: Any, method: str, path: str, headers: dict[str, str],
         body: bytes | Iterator[bytes] = b"") -> tuple[int, dict[str, str], int]:
    """(status, response headers, receive() calls) of one request sent straight to the app;
    body: all of it, or chunks (an endless iterator is a client that never stops sending)."""
    reads = 0
    chunks = iter([body]) if isinstance(body, bytes) else body
    following = next(chunks, None)

    async def receive() -> dict:
        nonlocal reads, following
        reads += 1
        if following is None:
            return {"type": "http.disconnect"}
        chunk, following = following, next(chunks, None)
        return {"type": "http.request", "body": chunk, "more_body": following is not None}

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "server": (HOST, 80), "client": (HOST, 1234),
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], {k.decode(): v.decode() for k, v in start["headers"]}, reads


def app_for(appliance: Any, **kwargs: Any) -> Any:
    app = create_app(token=TOKEN, **kwargs)
    app.dependency_overrides[get_appliance] = lambda: appliance
    return app


@pytest.mark.parametrize("method,path", [("PUT", "/v1/entries/k"), ("POST", "/v1/entries"),
                                         ("POST", "/v1/rules"), ("POST", "/v1/overlay/reload")])
def test_no_token_is_401_before_a_byte_of_the_body_is_read(method: str, path: str) -> None:
    appliance = small_appliance()
    try:
        app = app_for(appliance)
        for auth in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
            status, headers, reads = call(app, method, path, {
                "content-length": str(HUGE), "content-type": "application/json", **auth})
            assert (status, reads) == (401, 0)
            assert headers["www-authenticate"] == "Bearer" and headers["connection"] == "close"
        # with no body to leave unread, the connection stays open for the next request
        status, headers, reads = call(app, method, path, {})
        assert (status, reads) == (401, 0) and "connection" not in headers
        assert len(appliance.engine) == 0
    finally:
        appliance.close()


def test_a_declared_length_over_the_limit_is_413_before_reading() -> None:
    appliance = small_appliance()
    try:
        app = app_for(appliance, max_body_bytes=1000, max_import_bytes=5000)
        for path, declared in (("/v1/entries/k", 1001), ("/v1/entries", 5001)):
            method = "PUT" if path != "/v1/entries" else "POST"
            status, headers, reads = call(app, method, path, {
                "content-length": str(declared), "content-type": "application/json", **AUTH})
            assert (status, reads, headers["connection"]) == (413, 0, "close")
        # reads need no token and get the same limit
        status, _, reads = call(app, "GET", "/v1/entries/k", {"content-length": str(HUGE)})
        assert (status, reads) == (413, 0)
        # at the limit the body is read and the route runs
        body = b'{"value": "v"}'
        status, _, reads = call(app, "PUT", "/v1/entries/k", {
            "content-length": str(len(body)), "content-type": "application/json", **AUTH}, body)
        assert (status, reads) == (201, 1)
        assert dict(appliance.engine.items()) == {b"k": b"v"}
    finally:
        appliance.close()


def test_a_stream_of_no_declared_length_stops_at_the_limit() -> None:
    appliance = small_appliance()
    chunked = {"transfer-encoding": "chunked", "content-type": "application/json", **AUTH}
    try:
        app = app_for(appliance, max_body_bytes=1000, max_import_bytes=3000)
        endless = itertools.chain([b'{"value": "'], itertools.repeat(b"a" * 100))
        status, headers, reads = call(app, "PUT", "/v1/entries/k", chunked, endless)
        assert (status, headers["connection"]) == (413, "close")
        assert reads <= 12  # stopped at the first chunk past 1,000 bytes, not drained
        assert len(appliance.engine) == 0
        # imports have their own, larger limit: 2,000 bytes is too much for a PUT, fine for them
        lines = "key,value\n" + "".join(f"k{i:03d},{i:04d}\n" for i in range(200))
        assert 1000 < len(lines) < 3000
        halves = iter([lines[:1000].encode(), lines[1000:].encode()])
        status, _, _ = call(app, "POST", "/v1/entries", {**chunked, "content-type": "text/csv"},
                            halves)
        assert status == 202
        endless = itertools.chain([b"key,value\n"], itertools.repeat(b"k,1\n" * 25))
        status, _, reads = call(app, "POST", "/v1/entries", {**chunked, "content-type": "text/csv"},
                                endless)
        assert status == 413 and reads <= 32
    finally:
        appliance.close()


def test_serve_settings_carry_the_limits() -> None:
    config = build_config({"admin_max_body": 4096, "admin_max_import": 1 << 20}, {})
    assert (config.admin_max_body, config.admin_max_import) == (4096, 1 << 20)
    assert config.public()["admin_max_body"] == 4096
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(ConfigError, match="admin_max_body"):
            build_config({"admin_max_body": bad}, {})


def put_json(port: int, path: str, body: dict[str, Any]) -> int:
    return http_request(port, "PUT", path, json.dumps(body).encode(),
                        {**SERVER_AUTH, "Content-Type": "application/json"})[0]


def test_serve_applies_the_limits_of_its_config_file(tmp_path: Path) -> None:
    server = Served(tmp_path, config={"admin_max_body": 100})
    try:
        assert put_json(server.admin_port, "/v1/entries/k", {"value": "v" * 100}) == 413
        assert put_json(server.admin_port, "/v1/entries/k", {"value": "v"}) == 201
        assert http_request(server.admin_port, "GET", "/v1/entries/k")[0] == 200
    finally:
        server.stop()


def big_put(tmp_path: Path, authorized: bool, chunked: bool) -> tuple[dict, dict]:
    """One 200 MB PUT through the abuse frame: (its record, the PUT's own figures)."""
    scenario = Scenario("big_body_200mb", big_body(small_bytes=200_000_000,
                                                   variants=[(authorized, chunked)]))
    record = run_scenario(scenario, small=True, workdir=tmp_path)
    assert "error" not in record and record["crashes"] == 0, record
    assert record["control"]["ping_failures"] == record["control"]["healthz_failures"] == 0
    return record, record["puts"][0]


def test_200_mb_without_the_token_costs_the_server_no_memory(tmp_path: Path) -> None:
    record, put = big_put(tmp_path, authorized=False, chunked=False)
    assert put["status"] == 401 and not put["key_stored"], record
    assert record["peak_rss_mb"] - record["idle_rss_mb"] < 50, record
    assert put["bytes_sent_before_answer"] < 50_000_000, record


def test_200_mb_streamed_with_the_token_is_413_and_stores_nothing(tmp_path: Path) -> None:
    record, put = big_put(tmp_path, authorized=True, chunked=True)
    assert put["status"] == 413 and not put["key_stored"], record
    assert record["peak_rss_mb"] - record["idle_rss_mb"] < 50, record


def raw_get(port: int, target: str) -> tuple[int, bytes]:
    """GET target exactly as written (no client-side normalisation of .. or %2e)."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


TRAVERSALS = [
    "/static/../../../../../../etc/passwd",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static/swagger/../../../../../../../etc/passwd",
    "/static/swagger/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc/passwd",
    "/v1/../../../../etc/passwd",
    "/v1/%2e%2e/%2e%2e/etc/passwd",
    "/v1/entries/../../../../etc/passwd",
    "/v1/entries/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "/v1/rules/..%2f..%2fetc%2fpasswd",
    "/docs/../../../../etc/passwd",
]


def test_traversal_attempts_are_4xx_and_read_nothing_outside(tmp_path: Path) -> None:
    secret = Path("/etc/passwd").read_bytes()[:32]
    server = Served(tmp_path)
    try:
        for target in TRAVERSALS:
            status, body = raw_get(server.admin_port, target)
            assert 400 <= status < 500, (target, status, body[:200])
            assert secret not in body and b"root:" not in body, target
        # in a key route, ".." is part of a key like any other byte: a lookup of it is a miss
        status, body = raw_get(server.admin_port, "/v1/lookup/..%2f..%2f..%2fetc%2fpasswd")
        found = json.loads(body)
        assert (status, found["key"], found["kind"]) == (200, "../../../etc/passwd", "miss")
        assert http_request(server.admin_port, "GET", "/healthz")[0] == 200
    finally:
        server.stop()
