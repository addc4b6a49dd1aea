"""Bodies refused before they are read, and paths that cannot leave the service (issue 16).

The ASGI-level tests call the app with a receive() that records every call, so "not read" is
checked, not assumed; the server tests stream 200 MB into a real `pynq-kv serve` and read its
RSS (benchmarks/_abuse_admin.py, which benchmarks/abuse.py runs at 500 MB).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from api_support import AUTH, TOKEN, small_appliance
from pynq_kv.serve.config import ConfigError, build_config
from pynq_kv_api.deps import get_appliance
from pynq_kv_api.main import create_app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _abuse_admin import AUTH as SERVER_AUTH  # noqa: E402
from _abuse_admin import HOST, run_big_body, serving  # noqa: E402

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


def test_serve_applies_the_limits_of_its_config_file(tmp_path: Path) -> None:
    config = tmp_path / "serve.toml"
    config.write_text("admin_max_body = 100\n")
    with serving("--config", str(config)) as server:
        assert server.http("PUT", "/v1/entries/k", {"value": "v" * 100}, SERVER_AUTH)[0] == 413
        assert server.http("PUT", "/v1/entries/k", {"value": "v"}, SERVER_AUTH)[0] == 201
        assert server.http("GET", "/v1/entries/k")[0] == 200


def test_200_mb_without_the_token_costs_the_server_no_memory() -> None:
    result = run_big_body(200_000_000)
    assert result["crashes"] == 0 and result["status"] == 401, result
    assert result["peak_rss_mb"] - result["idle_rss_mb"] < 50, result
    assert result["bytes_sent_before_answer"] < 50_000_000, result
    assert not result["key_stored"] and result["healthz_after"] == "ok", result


def test_200_mb_streamed_with_the_token_is_413_and_stores_nothing() -> None:
    result = run_big_body(200_000_000, authorized=True, chunked=True)
    assert result["crashes"] == 0 and result["status"] == 413, result
    assert result["peak_rss_mb"] - result["idle_rss_mb"] < 50, result
    assert not result["key_stored"] and result["healthz_after"] == "ok", result


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


def test_traversal_attempts_are_4xx_and_read_nothing_outside() -> None:
    secret = Path("/etc/passwd").read_bytes()[:32]
    with serving() as server:
        for target in TRAVERSALS:
            status, body = raw_get(server.admin_port, target)
            assert 400 <= status < 500, (target, status, body[:200])
            assert secret not in body and b"root:" not in body, target
        # in a key route, ".." is part of a key like any other byte: a lookup of it is a miss
        status, body = raw_get(server.admin_port, "/v1/lookup/..%2f..%2f..%2fetc%2fpasswd")
        found = json.loads(body)
        assert (status, found["key"], found["kind"]) == (200, "../../../etc/passwd", "miss")
        assert server.http("GET", "/healthz")[0] == 200
