"""/healthz, the dashboard page, and the app without an appliance."""

from __future__ import annotations

from api_support import TestClient, client_for, small_appliance
from pynq_kv import KVEngine
from pynq_kv_api.deps import get_engine, get_layout
from pynq_kv_api.main import create_app


def test_healthz():
    with client_for(small_appliance()) as client:
        r = client.get("/healthz").json()
    assert r["status"] == "ok" and r["backend"] == "model"


def test_without_an_appliance_routes_say_503():
    with TestClient(create_app()) as client:
        assert client.get("/v1/stats").status_code == 503
        assert client.get("/healthz").status_code == 503


def test_engine_and_layout_can_be_overridden_without_an_appliance():
    app = create_app()
    engine = KVEngine(rows=64)
    engine.set(b"k", b"v")
    app.dependency_overrides[get_engine] = lambda: engine
    app.dependency_overrides[get_layout] = lambda: None
    with TestClient(app) as client:
        assert client.get("/v1/entries/k").json() == {"key": "k", "value": "v"}


def test_dashboard_and_docs_are_served():
    with client_for(small_appliance()) as client:
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        for element in ('id="tiles"', 'id="counters"', 'id="chart-frontends"', 'id="rules"',
                        'id="overlay"', 'src="static/charts.js"'):
            assert element in page.text
        assert "v1/stats" in client.get("/static/dashboard.js").text
        assert "drawTimeSeries" in client.get("/static/charts.js").text
        docs = client.get("/docs")
        assert docs.status_code == 200
        # the Swagger UI comes from this server, not a CDN: an isolated lab network still has docs
        assert "cdn." not in docs.text and "/static/swagger/swagger-ui-bundle.js" in docs.text
        script = client.get("/static/swagger/swagger-ui-bundle.js")
        assert script.status_code == 200 and "SwaggerUIBundle" in script.text
        assert client.get("/static/swagger/swagger-ui.css").status_code == 200
        paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/overlay", "/v1/overlay/reload", "/v1/entries", "/v1/entries/{key}",
            "/v1/entries/imports/{job_id}", "/v1/rules", "/v1/rules/{rule_id}", "/v1/lookup/{key}",
            "/v1/stats", "/metrics", "/healthz"} <= set(paths)
