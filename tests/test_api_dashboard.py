"""The dashboard in a real browser: headless Chromium loads / from uvicorn, its script polls
/v1/stats, and the counters it writes into the page match the engine's, each beside its own
label. (tests/test_dashboard_live.py does the same against `pynq-kv serve` under load.)"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from html.parser import HTMLParser

import pytest
import uvicorn

from api_support import LAYOUT, small_appliance
from chromium import CHROMIUM, Browser, dump_dom, label_pairs
from pynq_kv_api.main import create_app

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-packages.txt)")


class _Texts(HTMLParser):
    """Text of every element that has an id."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, str] = {}
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        element_id = dict(attrs).get("id")
        self._open.append(element_id)
        if element_id:
            self.texts[element_id] = ""

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for element_id in self._open:
            if element_id:
                self.texts[element_id] += data


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """(url, appliance): the admin app under uvicorn on a free loopback port, in a thread."""
    appliance = small_appliance()
    engine = appliance.engine
    engine.mset({f"key{i}".encode(): b"v" for i in range(7)})
    rule_id = engine.add_rule(LAYOUT.rule(5, b"web", "web", dst_port=443))
    assert rule_id == 1
    for port in (443, 443, 80):
        engine.lookup(LAYOUT.key(src_ip="10.0.0.1", dst_port=port))
    engine.lookup(b"key1")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(appliance), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/", appliance
    server.should_exit = True
    thread.join(timeout=10)


def test_dashboard_shows_the_engine_counters(served, tmp_path):
    url, appliance = served
    result = dump_dom(url, tmp_path / "profile")
    parser = _Texts()
    parser.feed(result.stdout)
    texts = parser.texts
    assert texts.get("polls", "0") != "0", (
        f"the page never polled:\n{result.stdout[:2000]}\n{result.stderr[-2000:]}")
    stats = appliance.engine.stats()
    assert texts["counter-occupancy"] == str(len(appliance.engine)) == "7"
    assert texts["tile-occupancy-sub"] == "7 of 264 slots"
    assert texts["counter-lookups"] == str(stats["lookups"]) == "4"
    assert texts["counter-rule_hits"] == "2" and texts["counter-exact_hits"] == "1"
    assert texts["counter-misses"] == "1"
    assert texts["tile-hit-ratio"] == "75.0 %" and texts["tile-rule-hits"] == "2"
    assert texts["rule-1-hits"] == "2" and texts["rule-1-name"] == "web"
    assert texts["backend"] == "model" and texts["status"].startswith("live")


def test_frontend_figures_sit_next_to_their_own_labels(served, tmp_path):
    """Each front-end counter is read off the page where a reader looks for it: on its label's
    line. (A heading inside the two-column grid once moved every number one label along.)"""
    url, appliance = served
    appliance.register_frontend("bench", lambda: {"alpha": 11, "beta": 22, "gamma": {"x": 33}})
    with Browser(tmp_path / "profile") as browser:
        browser.goto(url)
        browser.wait_for("!!document.querySelector('#frontend-bench')")
        pairs = label_pairs(browser, ".figure", ".label", "#frontends table")
    shown = {(p["scope"], p["label"]): p["figure"] for p in pairs}
    assert {k: v for k, v in shown.items() if k[0] == "frontend-bench-counters"} == {
        ("frontend-bench-counters", "alpha"): "11", ("frontend-bench-counters", "beta"): "22",
        ("frontend-bench-counters", "gamma.x"): "33"}, pairs
    admin = {label: figure for (scope, label), figure in shown.items()
             if scope == "frontend-admin-counters"}
    reported = {key.replace("_", " ") for key in appliance.frontend_stats()["admin"]}
    assert {"requests", "responses 2xx", "imports running"} <= set(admin) <= reported, pairs
    assert all(figure.isdigit() for figure in admin.values()), pairs


def test_latency_quantiles_read_like_prometheus(served, tmp_path):
    """The page's quantiles of the requests between two scrapes of the latency histogram
    interpolate inside a bucket and stop at the last finite bound, as histogram_quantile."""
    url, _ = served
    before = {"buckets": [[0.001, 4], [0.01, 4], ["Infinity", 4]], "count": 4, "sum": 0}
    after = {"buckets": [[0.001, 14], [0.01, 24], ["Infinity", 34]], "count": 34, "sum": 1}
    with Browser(tmp_path / "profile") as browser:
        browser.goto(url)
        got = browser.evaluate(
            f"(() => {{ const fix = (h) => ({{...h, buckets: h.buckets.map(([le, n]) => [Number(le), n])}});"
            f" const b = fix({json.dumps(before)}), a = fix({json.dumps(after)});"
            f" return [0.3, 0.5, 0.99].map((q) => quantile(q, b, a)).concat([quantile(0.5, a, a)]); }})()")
    assert got[0] == pytest.approx(0.0009)  # rank 9 of 30: 9/10 of the first bucket
    assert got[1] == pytest.approx(0.0055)  # rank 15: half-way through (0.001, 0.01]
    assert got[2] == pytest.approx(0.01)  # in the +Inf bucket: its lower bound
    assert got[3] is None  # no request between the two scrapes


def test_a_reload_restarts_the_history_and_rereads_the_overlay(served, tmp_path):
    """Counters restart from zero after a reload: the page must not draw that drop as a rate."""
    url, _ = served
    series = "JSON.parse(document.querySelector('#chart-outcomes svg').dataset.series ?? '{}')"
    with Browser(tmp_path / "profile") as browser:
        browser.goto(url)
        browser.wait_for(f"({series}).misses?.length >= 3")
        request = urllib.request.Request(url + "v1/overlay/reload", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
        browser.wait_for("document.getElementById('overlay-main-reloads')?.textContent === '1'")
        misses = browser.evaluate(f"({series}).misses")
    assert len(misses) <= 2 and all(v in (None, 0) for v in misses), misses


def test_docs_page_renders_without_a_cdn(served, tmp_path):
    """Swagger UI renders the API's routes from files this server serves (no internet here)."""
    url, _ = served
    result = dump_dom(url + "docs", tmp_path / "profile")
    dom = result.stdout
    assert 'class="swagger-ui' in dom and "pynq-kv admin" in dom, (
        f"Swagger UI did not render:\n{dom[:2000]}\n{result.stderr[-2000:]}")
    assert "/v1/entries/{key}" in dom  # an operation rendered from /openapi.json


def test_latency_figures_and_labelled_histograms(served, tmp_path):
    """Latency text keeps three figures in the unit that fits; /metrics' histogram is split by
    its frontend label, each front-end's buckets in order of their bounds."""
    url, _ = served
    text = "\n".join([
        "# TYPE pynq_kv_frontend_request_duration_seconds histogram",
        'pynq_kv_frontend_request_duration_seconds_bucket{frontend="resp",le="1e-05"} 2.0',
        'pynq_kv_frontend_request_duration_seconds_bucket{frontend="resp",le="+Inf"} 5.0',
        'pynq_kv_frontend_request_duration_seconds_count{frontend="resp"} 5.0',
        'pynq_kv_frontend_request_duration_seconds_sum{frontend="resp"} 0.25',
        'pynq_kv_frontend_request_duration_seconds_bucket{frontend="udp",le="0.001"} 1.0',
        'pynq_kv_frontend_request_duration_seconds_bucket{frontend="udp",le="+Inf"} 1.0',
        'pynq_kv_frontend_request_duration_seconds_count{frontend="udp"} 1.0',
        'pynq_kv_frontend_request_duration_seconds_sum{frontend="udp"} 0.0004',
        'pynq_kv_frontend_request_duration_seconds_created{frontend="udp"} 1.7e9',
    ])
    with Browser(tmp_path / "profile") as browser:
        browser.goto(url)
        texts = browser.evaluate(
            "[0, 8.5e-6, 8.53e-5, 1.25e-3, 0.12, 2.5, null].map(latencyText)")
        parsed = browser.evaluate(
            f"(() => {{ const h = parseLatency({json.dumps(text)});"
            " for (const v of Object.values(h)) v.buckets = v.buckets.map(([le, n]) => [String(le), n]);"
            " return h; })()")
    assert texts == ["0 µs", "8.5 µs", "85.3 µs", "1.25 ms", "120 ms", "2.5 s", "–"]
    assert parsed == {
        "resp": {"buckets": [["0.00001", 2], ["Infinity", 5]], "count": 5, "sum": 0.25},
        "udp": {"buckets": [["0.001", 1], ["Infinity", 1]], "count": 1, "sum": 0.0004},
    }
