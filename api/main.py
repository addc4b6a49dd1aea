"""The admin service: one FastAPI app over an Appliance (docs/api.md).

`create_app` builds it; `pynq-kv serve` runs it under uvicorn on the appliance's event loop,
beside the Redis and memcached front-ends, once its settings have refused a non-loopback address
without a token (`pynq_kv.serve.config`, through `pynq_kv.net.addr.is_loopback`).
Every route is `async def` and calls the engine directly: the loop orders engine calls, so no
thread ever touches the engine.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable, Optional

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pynq_kv import __version__
from pynq_kv.appliance import Appliance
from pynq_kv.latency import LatencyRecorder

from . import errors
from .imports import ImportJobs
from .limits import MAX_BODY_BYTES, MAX_IMPORT_BYTES, BodyGuard
from .routers import dashboard, entries, health, lookup, metrics, overlay, rules, stats


class _RequestCounter:
    """Counts requests by status class (the admin front-end's own counters in /v1/stats) and
    times them, arrival to the last byte of the response handed to the server, into the admin
    front-end's latency recorder (/metrics)."""

    def __init__(self, app: ASGIApp, counts: Counter, latency: LatencyRecorder) -> None:
        self.app = app
        self.counts = counts
        self.latency = latency

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.counts["requests"] += 1
        start = time.perf_counter()

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.counts[f"responses_{message['status'] // 100}xx"] += 1
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.latency.observe(time.perf_counter() - start)

        await self.app(scope, receive, counting_send)


def create_app(appliance: Optional[Appliance] = None, *, token: Optional[str] = None,
               config: Optional[dict[str, Any]] = None,
               max_body_bytes: int = MAX_BODY_BYTES,
               max_import_bytes: int = MAX_IMPORT_BYTES,
               accept_errors: Optional[Callable[[], int]] = None) -> FastAPI:
    """The admin app for appliance (None: tests provide one through dependency_overrides).

    token: the bearer token mutating routes require (None or "": no check, loopback only).
    config: the serve settings shown by /v1/overlay, secrets already hidden.
    max_body_bytes / max_import_bytes: the largest request body of any route / of a bulk
    import (POST /v1/entries); larger ones are 413 before they are read (limits.BodyGuard).
    accept_errors: how many accepts of the server running the app failed (serve's uvicorn
    accepts through pynq_kv.serve.accept's Listener, which counts them); reported with the
    admin counters.
    """
    if max_body_bytes < 1 or max_import_bytes < 1:
        raise ValueError("body limits must be at least 1 byte")
    app = FastAPI(
        title="pynq-kv admin",
        version=__version__,
        description="Administration of a pynq-kv key-value + wildcard lookup appliance: entries, "
                    "rules, lookups, counters. Routes that change something need the bearer token.",
        docs_url=None,  # served by _serve_docs from the installed swagger-ui-bundle, not a CDN
        redoc_url=None,
    )
    app.state.appliance = appliance
    app.state.token = token or None
    app.state.config = config
    app.state.imports = ImportJobs()
    counts: Counter = Counter()
    app.state.latency = LatencyRecorder()

    def limit_of(route: object) -> int:
        return max_import_bytes if getattr(route, "endpoint", None) is entries.import_entries \
            else max_body_bytes

    routers = (overlay, entries, rules, lookup, stats, metrics, health, dashboard)
    app.add_middleware(BodyGuard, api=app, limit_of=limit_of,  # inside the counter: refusals count
                       routes=[route for module in routers for route in module.router.routes])
    app.add_middleware(_RequestCounter, counts=counts, latency=app.state.latency)
    if appliance is not None:
        def admin_stats() -> dict[str, Any]:
            extra = {"accept_errors": accept_errors()} if accept_errors is not None else {}
            return {**counts, **app.state.imports.counts(), **extra}

        appliance.register_frontend("admin", admin_stats, app.state.latency)
    errors.install(app)
    for module in routers:
        app.include_router(module.router)
    _serve_docs(app)
    app.mount("/static", StaticFiles(directory=dashboard.STATIC), name="static")
    return app


def _serve_docs(app: FastAPI) -> None:
    """Swagger UI at /docs from files installed with the package: an appliance is often on a
    lab network with no way out, where FastAPI's default CDN links leave /docs blank."""
    app.mount("/static/swagger", StaticFiles(directory=str(swagger_ui_path)), name="swagger")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - docs",
            oauth2_redirect_url=redirect,
            swagger_js_url="/static/swagger/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger/swagger-ui.css",
            swagger_favicon_url="/static/swagger/favicon-32x32.png")

    @app.get(redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()
