"""/v1/stats and /metrics: engine counters, per-rule hits, front-end counters, read per request."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from api_support import LAYOUT, client_for, small_appliance
from pynq_kv.latency import BUCKETS, LatencyRecorder


@pytest.fixture
def appliance():
    appliance = small_appliance()
    engine = appliance.engine
    engine.mset({b"a": b"1", b"b": b"2", b"c": b"3"})
    rule_id = engine.add_rule(LAYOUT.rule(7, b"web", "web", dst_port=443))
    assert rule_id == 1
    engine.lookup(b"a")
    engine.lookup(LAYOUT.key(src_ip="1.2.3.4", dst_port=443))
    engine.lookup(LAYOUT.key(src_ip="1.2.3.4", dst_port=444))
    engine.get(b"zz")
    appliance.register_frontend("resp", lambda: {
        "connections": 2, "commands": {"get": np.int64(5), "set": 1}, "version": "7.0", "ok": True})
    return appliance


@pytest.fixture
def client(appliance):
    with client_for(appliance) as c:
        yield c


def test_stats(client):
    s = client.get("/v1/stats").json()
    c = s["counters"]
    assert (c["lookups"], c["exact_hits"], c["rule_hits"], c["misses"], c["inserts"]) == (4, 1, 1, 2, 3)
    assert s["hit_rate"] == 0.5
    assert s["occupancy"]["used"] == 3 and s["backend"] == "model"
    assert s["rules"] == [{"id": 1, "name": "web", "priority": 7, "hits": 1}]
    assert s["frontends"] == {"resp": {"connections": 2, "commands": {"get": 5, "set": 1},
                                       "version": "7.0", "ok": True}}


def test_hit_rate_is_null_before_any_lookup():
    with client_for(small_appliance()) as client:
        assert client.get("/v1/stats").json()["hit_rate"] is None


def scrape(client) -> dict:
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def test_metrics(client, appliance):
    m = scrape(client)
    assert m[("pynq_kv_lookups_total", ())] == 4
    assert m[("pynq_kv_rule_hits_total", ())] == 1
    assert m[("pynq_kv_occupancy", ())] == 3
    assert m[("pynq_kv_capacity", ())] == 264
    assert m[("pynq_kv_rule_hits_per_rule_total", (("rule_id", "1"), ("rule_name", "web")))] == 1
    assert m[("pynq_kv_frontend_commands_get", (("frontend", "resp"),))] == 5
    assert m[("pynq_kv_frontend_ok", (("frontend", "resp"),))] == 1
    assert not any("version" in name for name, _ in m)
    appliance.engine.set(b"d", b"4")  # read at scrape time, not cached
    assert scrape(client)[("pynq_kv_occupancy", ())] == 4


def test_the_admin_service_counts_its_own_requests():
    from pynq_kv_api.main import create_app
    from api_support import TestClient

    appliance = small_appliance()
    with TestClient(create_app(appliance)) as client:
        client.get("/healthz")
        client.get("/v1/entries/missing")
        admin = client.get("/v1/stats").json()["frontends"]["admin"]
    assert admin["requests"] == 3 and admin["responses_2xx"] == 1 and admin["responses_4xx"] == 1
    assert admin["imports_running"] == 0


def test_the_admin_counters_carry_the_servers_accept_errors():
    """serve counts uvicorn's failed accepts (pynq_kv.serve.accept) and hands the count in."""
    from pynq_kv_api.main import create_app
    from api_support import TestClient

    failed = [0]
    with TestClient(create_app(small_appliance(), accept_errors=lambda: failed[0])) as client:
        assert client.get("/v1/stats").json()["frontends"]["admin"]["accept_errors"] == 0
        failed[0] = 7
        assert client.get("/v1/stats").json()["frontends"]["admin"]["accept_errors"] == 7
        assert "accept_errors" in client.get("/metrics").text


def test_metrics_time_the_admin_requests():
    """Every admin request lands in one bucket of the latency histogram, scrapes included."""
    with client_for(small_appliance()) as client:
        for _ in range(3):
            client.get("/healthz")
        first = scrape(client)
        second = scrape(client)
    name = "pynq_kv_frontend_request_duration_seconds"
    admin = (("frontend", "admin"),)
    assert first[(f"{name}_count", admin)] == 3  # the scrape itself ends after it is read
    assert second[(f"{name}_count", admin)] == 4
    assert 0 < first[(f"{name}_sum", admin)] < 3 * 10
    buckets = sorted((float(dict(labels)["le"]), value) for (sample, labels), value in second.items()
                     if sample == f"{name}_bucket" and dict(labels)["frontend"] == "admin")
    assert [le for le, _ in buckets] == [*BUCKETS, float("inf")]
    assert buckets[-1] == (float("inf"), 4)
    assert [count for _, count in buckets] == sorted(count for _, count in buckets)  # cumulative


def test_every_front_ends_latency_in_stats_and_metrics():
    """A front-end's registered recorder shows in /v1/stats (quantiles since start) and in
    /metrics as its own labelled histogram, beside the admin service's."""
    appliance = small_appliance()
    recorder = LatencyRecorder()
    recorder.observe(0.00002, 90)  # (1e-05, 2.5e-05]
    recorder.observe(0.003, 10)    # (0.0025, 0.005]
    appliance.register_frontend("resp", lambda: {"commands": 100}, recorder)
    with client_for(appliance) as client:
        latency = client.get("/v1/stats").json()["latency"]
        m = scrape(client)
    assert set(latency) == {"admin", "resp"}
    assert latency["resp"]["count"] == 100
    assert latency["resp"]["sum"] == pytest.approx(90 * 0.00002 + 10 * 0.003)
    assert latency["resp"]["p50"] == pytest.approx(0.00001 + 0.000015 * 50 / 90)
    assert latency["resp"]["p99"] == pytest.approx(0.0025 + 0.0025 * 9 / 10)
    assert latency["admin"]["count"] == 0 and latency["admin"]["p99"] is None  # not done yet
    name = "pynq_kv_frontend_request_duration_seconds"
    resp = {float(dict(labels)["le"]): value for (sample, labels), value in m.items()
            if sample == f"{name}_bucket" and dict(labels)["frontend"] == "resp"}
    assert resp[0.00001] == 0 and resp[0.000025] == 90 and resp[0.0025] == 90 and resp[0.005] == 100
    assert m[(f"{name}_count", (("frontend", "resp"),))] == 100
    assert m[(f"{name}_count", (("frontend", "admin"),))] == 1  # the /v1/stats request
    appliance.unregister_frontend("resp")
    assert "resp" not in appliance.frontend_latencies()
