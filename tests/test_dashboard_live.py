"""The dashboard of a running appliance under load, as a person sees it in a browser.

`pynq-kv serve` runs in a subprocess on loopback ports; redis-py, memcached/UDP and REST
requests load it for a few seconds while headless Chromium shows the dashboard. Then the page is
paused and read: every figure must stand next to its own label with the value the stats API sent
(read from the browser's network layer, not from the page's script), and every chart must have
plotted the load. The screenshot is kept in the test's tmp dir.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from chromium import CHROMIUM, Browser, label_pairs
from test_serve import Served, env, http, memcached_udp  # noqa: F401  (env: the fixture)

pytestmark = [pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed"),
              pytest.mark.timeout(90)]

LOAD_SECONDS = 6
SETS_PER_SECOND = 120  # each second: SETs, as many GETs of stored keys, a third as many misses
LATENCY = "pynq_kv_frontend_request_duration_seconds"
SMOOTHING = 5  # the page's latency window, in polls (LATENCY_SMOOTHING in dashboard.js)


@pytest.fixture
def appliance(env: dict[str, str]) -> Iterator[Served]:
    server = Served(["--rows", "256", "--rules", "16", "serve", "--no-store", "--resp-port", "0",
                     "--udp-port", "0", "--admin-port", "0",
                     "--layout", "src_ip:ipv4,dst_port:port"], env)
    yield server
    if server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait()


def run_load(ports: dict[str, int]) -> dict[str, int]:
    """A bounded, paced load on every front-end; returns what it sent, by kind."""
    client = redis.Redis(port=ports["resp"], socket_timeout=10)
    sent = {"sets": 0, "hits": 0, "misses": 0, "rule_lookups": 0, "udp_gets": 0}
    for second in range(LOAD_SECONDS):
        start = time.monotonic()
        pipe = client.pipeline(transaction=False)
        for i in range(SETS_PER_SECOND):
            key = f"user:{second}:{i}"
            pipe.set(key, f"v{i}")
            pipe.get(key)
            if i % 3 == 0:
                pipe.get(f"absent:{second}:{i}")
        pipe.execute()
        sent["sets"] += SETS_PER_SECOND
        sent["hits"] += SETS_PER_SECOND
        sent["misses"] += math.ceil(SETS_PER_SECOND / 3)
        for i in range(4):  # wildcard lookups by field over REST: two rules, both win sometimes
            status, body = http(ports["admin"],
                                f"/v1/lookup/src_ip=10.0.{second}.{i},dst_port={443 if i % 2 else 22}"
                                "?encoding=fields")
            assert status == 200 and body["kind"] == "rule", body
            sent["rule_lookups"] += 1
        memcached_udp(ports["udp"], 0x00, f"user:{second}:0".encode())  # binary GET
        sent["udp_gets"] += 1
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
    return sent


def number(text: str) -> float:
    return float(text.replace(",", "").replace("%", "").strip())


def seconds(text: str) -> float:
    """A latency as the page writes it: "85.3 µs", "1.25 ms", "2 s"."""
    value, unit = text.split()
    return float(value) * {"µs": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def matches(shown: str, value: Any) -> bool:
    """Whether shown is how the page writes value (numbers with thousands separators)."""
    if value is None:
        return shown == "–"
    if isinstance(value, bool):
        return shown == str(value).lower()
    if isinstance(value, int):
        return shown == f"{value:,}"
    if isinstance(value, float):
        return math.isclose(number(shown), value, abs_tol=5e-4)
    if isinstance(value, list):
        return shown == ", ".join(" ".join(map(str, v)) if isinstance(v, list) else str(v)
                                  for v in value)
    return shown == str(value)


def flatten(obj: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[prefix + key] = value
    return out


def last_response_body(browser: Browser, suffix: str) -> Any:
    """The JSON body of the last finished response whose URL ends with suffix."""
    urls = {e["params"]["requestId"]: e["params"]["response"]["url"]
            for e in browser.events if e["method"] == "Network.responseReceived"}
    finished = [e["params"]["requestId"] for e in browser.events
                if e["method"] == "Network.loadingFinished"
                and urls.get(e["params"]["requestId"], "").endswith(suffix)]
    assert finished, f"the page fetched no {suffix} while the test watched"
    body = browser.call("Network.getResponseBody", {"requestId": finished[-1]})
    return json.loads(body["body"])


def metrics_bodies(browser: Browser) -> list[str]:
    """Every /metrics response the page read, in the order it read them."""
    urls = {e["params"]["requestId"]: e["params"]["response"]["url"]
            for e in browser.events if e["method"] == "Network.responseReceived"}
    return [browser.call("Network.getResponseBody", {"requestId": e["params"]["requestId"]})["body"]
            for e in browser.events if e["method"] == "Network.loadingFinished"
            and urls.get(e["params"]["requestId"], "").endswith("/metrics")]


Histogram = tuple[list[tuple[float, float]], float]  # cumulative (le, count), count


def latency_histograms(text: str) -> dict[str, Histogram]:
    """The front-ends' latency histograms in one /metrics body, by front-end."""
    buckets: dict[str, list[tuple[float, float]]] = {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != LATENCY:
            continue
        for sample in family.samples:
            frontend = sample.labels["frontend"]
            if sample.name == LATENCY + "_bucket":
                buckets.setdefault(frontend, []).append((float(sample.labels["le"]), sample.value))
            elif sample.name == LATENCY + "_count":
                counts[frontend] = sample.value
    return {name: (sorted(buckets[name]), counts[name]) for name in counts}


def histogram_quantile(q: float, before: Histogram, after: Histogram) -> float | None:
    """Prometheus' histogram_quantile of the requests between two scrapes: linear inside the
    bucket holding rank q, the last finite bound for the +Inf bucket."""
    total = after[1] - before[1]
    if total <= 0:
        return None
    rank = q * total
    lower, lower_count = 0.0, 0.0
    for (le, cumulative), (_, earlier) in zip(after[0], before[0]):
        count = cumulative - earlier
        if count >= rank:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - lower_count) / max(count - lower_count, 1e-12)
        lower, lower_count = le, count
    return lower


def hover_point(browser: Browser, chart: str, name: str, k: int) -> dict[str, str]:
    """Point at the k-th plotted point of one line; returns the legend's texts by label."""
    where = browser.evaluate(
        f"(() => {{ const svg = document.querySelector('#{chart} svg');"
        f" const d = svg.querySelector('path.line[data-series=\"{name}\"]').getAttribute('d');"
        f" const [x, y] = d.split(/[ML]/).filter(Boolean)[{k}].split(',').map(Number);"
        f" const box = svg.getBoundingClientRect(); return [box.x + x, box.y + y]; }})()")
    browser.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": where[0], "y": where[1]})
    return browser.evaluate(
        f"Object.fromEntries([...document.querySelectorAll('#{chart} .legend .item')].map("
        f"i => [i.querySelector('.label').textContent, i.querySelector('.figure').textContent])"
        f".concat([['when', document.querySelector('#{chart} .legend .when').textContent]]))")


def short_number(text: str) -> float:
    scale = {"k": 1e3, "M": 1e6}.get(text[-1:], 1.0)
    return float(text.rstrip("kM")) * scale


def test_dashboard_of_a_loaded_appliance(appliance: Served, tmp_path: Path) -> None:
    ports = appliance.ports
    for name, priority, match in (("https", 5, {"dst_port": 443}), ("lan", 3, {"src_ip": "10.0.0.0/8"})):
        status, _ = http(ports["admin"], "/v1/rules", "POST",
                         {"priority": priority, "value": name, "name": name, "match": match})
        assert status == 201
    url = f"http://127.0.0.1:{ports['admin']}/"
    with Browser(tmp_path / "profile") as browser:
        browser.call("Network.enable")  # every response the page reads, from its first poll on
        browser.goto(url)
        browser.wait_for("document.body.dataset.state === 'live'")
        sent = run_load(ports)

        # let the page see the quiet appliance, then pause it
        polls = int(browser.evaluate("document.getElementById('polls').textContent"))
        browser.wait_for(f"Number(document.getElementById('polls').textContent) >= {polls + 2}")
        browser.evaluate("document.getElementById('pause').click()")
        browser.wait_for("document.body.dataset.state === 'paused'")
        stats = last_response_body(browser, "/v1/stats")
        scrapes = [latency_histograms(body) for body in metrics_bodies(browser)]
        shot = browser.screenshot(tmp_path / "dashboard.png")
        print(f"screenshot: {shot}")

        pairs = label_pairs(browser, ".figure", ".label", "table.kv, #tiles")
        headings = browser.evaluate(
            "[...document.querySelectorAll('#frontends .frontend')].map(f => [f.id, f.querySelector('h3').textContent])")
        rules_shown = browser.evaluate(
            "[...document.querySelectorAll('#rules tr')].map(r => [...r.cells].slice(0, 4).map(c => c.textContent))")
        series = {chart: json.loads(browser.evaluate(
            f"document.querySelector('#{chart} svg').dataset.series"))
            for chart in ("chart-frontends", "chart-outcomes", "chart-hit-ratio",
                          "chart-occupancy", "chart-latency", "chart-rules")}
        resp = [v for v in series["chart-frontends"]["resp"] if v is not None]
        busiest = resp.index(max(resp))
        hovered = hover_point(browser, "chart-frontends", "resp", busiest)
        points = browser.evaluate(
            "Object.fromEntries([...document.querySelectorAll('svg path.line')].map("
            "p => [p.closest('figure').id + '/' + p.dataset.series, Number(p.dataset.points)]))")

    # the engine counted exactly the load that was sent
    status, now = http(ports["admin"], "/v1/stats")
    counters = stats["counters"]
    assert counters["inserts"] == sent["sets"] and counters["occupancy"] == sent["sets"]
    assert counters["exact_hits"] == sent["hits"] + sent["udp_gets"]
    assert counters["misses"] == sent["misses"] and counters["rule_hits"] == sent["rule_lookups"]
    assert {k: now["counters"][k] for k in counters} == counters  # nothing moved since

    # every figure sits next to its own label and shows what the stats API sent
    by_scope: dict[str, dict[str, str]] = {}
    for pair in pairs:
        assert pair["label"] is not None, f"a figure with no label beside it: {pair}"
        by_scope.setdefault(pair["scope"], {})[pair["label"]] = pair["figure"]
    status, overlay = http(ports["admin"], "/v1/overlay")
    expected: dict[str, dict[str, Any]] = {
        "counters": counters,
        "overlay-main": {k: v for k, v in overlay.items()
                         if not isinstance(v, dict) and k not in ("uptime",)},
    }
    for name, section in overlay.items():
        if isinstance(section, dict) and name not in ("occupancy", "config"):
            expected[f"overlay-{name}"] = flatten(section)
    for name, section in stats["frontends"].items():
        expected[f"frontend-{name}-counters"] = flatten(section)
    assert "overlay-geometry" in expected and "frontend-resp-counters" in expected
    for scope, values in expected.items():
        shown = by_scope.get(scope, {})
        assert set(shown) == {key.replace("_", " ") for key in values}, (scope, shown)
        wrong = {key: (shown[key.replace("_", " ")], value) for key, value in values.items()
                 if not matches(shown[key.replace("_", " ")], value)}
        assert not wrong, f"{scope}: figures that are not the API's (shown, API): {wrong}"
    assert sorted(headings) == sorted([f"frontend-{n}", n] for n in stats["frontends"])
    tiles = by_scope["tiles"]
    assert set(tiles) == {"requests/s", "lookups/s", "hit ratio", "occupancy", "rule hits", "RESP p99"}
    assert tiles["hit ratio"] == f"{100 * stats['hit_rate']:.1f} %"
    assert tiles["occupancy"] == f"{100 * stats['occupancy']['load_factor']:.1f} %"
    assert tiles["rule hits"] == f"{counters['rule_hits']:,}"
    assert sorted(rules_shown) == sorted([str(r["id"]), r["name"], str(r["priority"]), f"{r['hits']:,}"]
                                         for r in stats["rules"])
    assert all(r["hits"] > 0 for r in stats["rules"])

    # the charts plotted the load
    def peak(chart: str, name: str) -> float:
        return max((v for v in series[chart][name] if v is not None), default=0.0)

    resp_commands = stats["frontends"]["resp"]["total_commands_processed"]
    assert 0.5 * SETS_PER_SECOND < peak("chart-frontends", "resp") <= resp_commands
    assert peak("chart-frontends", "udp") > 0 and peak("chart-frontends", "admin") > 0
    assert peak("chart-outcomes", "exact hits") > SETS_PER_SECOND / 2
    assert peak("chart-outcomes", "misses") > 0 and peak("chart-outcomes", "rule hits") > 0
    assert 0 < peak("chart-hit-ratio", "each second") <= 1
    assert series["chart-hit-ratio"]["since start"][-1] == pytest.approx(stats["hit_rate"])
    assert series["chart-occupancy"]["entries"][-1] == stats["occupancy"]["used"]
    # latency: a p99 and a p50 line per front-end, each what /metrics said between the page's
    # scrapes, RESP's in the tile; every RESP command and UDP datagram was timed
    latency = series["chart-latency"]
    assert set(latency) == {f"{name} {q}" for name in ("resp", "udp", "admin") for q in ("p50", "p99")}
    assert len(scrapes) == len(latency["resp p99"]), "one /metrics read per sample"
    for name in ("resp", "udp", "admin"):
        for q in (0.5, 0.99):
            shown = latency[f"{name} p{round(100 * q)}"]
            expected_line = [None] + [histogram_quantile(q, scrapes[max(0, i - SMOOTHING)][name],
                                                         scrapes[i][name])
                                      for i in range(1, len(scrapes))]
            assert [v is None for v in shown] == [v is None for v in expected_line], (name, q)
            assert [v for v in shown if v is not None] == pytest.approx(
                [v for v in expected_line if v is not None], rel=1e-9), (name, q, shown)
        assert peak("chart-latency", f"{name} p50") > 0, name
        assert all(p50 <= p99 for p50, p99 in zip(latency[f"{name} p50"], latency[f"{name} p99"])
                   if p99 is not None), name
    assert scrapes[-1]["resp"][1] == stats["frontends"]["resp"]["total_commands_processed"]
    assert scrapes[-1]["udp"][1] == sent["udp_gets"] == stats["frontends"]["udp"]["rx_datagrams"]
    resp_p99 = [v for v in latency["resp p99"] if v is not None][-1]
    assert seconds(tiles["RESP p99"]) == pytest.approx(resp_p99, rel=0.01, abs=5e-9)
    assert peak("chart-rules", "https") > 0 and peak("chart-rules", "lan") > 0
    # pointing at the busiest second shows its figure, not the quiet latest one
    assert short_number(hovered["resp"]) == pytest.approx(resp[busiest], rel=0.05), hovered
    assert resp[-1] < 0.5 * resp[busiest] and hovered["when"].endswith(" s ago"), hovered
    for chart, values in series.items():
        for name in values:
            if peak(chart, name) > 0:
                assert points[f"{chart}/{name}"] >= 2, (chart, name, points)
