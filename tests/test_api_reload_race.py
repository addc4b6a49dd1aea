"""Reloads racing writes (issue 16): no acknowledged write lost, no acknowledged delete undone.

The storm against a real `pynq-kv serve` is the `reload_race` scenario of the abuse suite
(tests/abuse_scenarios.py: tests/test_abuse.py runs it for 4 s, benchmarks/abuse.py for 30 s);
here the lease rules of Appliance are checked on their own.
"""

from __future__ import annotations

import asyncio

from pynq_kv import KVEngine
from pynq_kv.appliance import Appliance
from pynq_kv_api.deps import get_appliance
from pynq_kv_api.main import create_app


def test_a_reload_waits_for_lent_engines_and_holds_new_leases_back() -> None:
    appliance = Appliance(lambda: KVEngine(rows=64, rules=16))

    async def scenario() -> list[str]:
        events: list[str] = []
        release = asyncio.Event()

        async def holder() -> None:
            async with appliance.lease() as engine:
                events.append("lent")
                await release.wait()
                engine.set(b"late", b"1")  # acknowledged while the reload waits
                events.append("written")

        async def latecomer() -> None:
            async with appliance.lease() as engine:
                events.append("late lease")
                assert engine is appliance.engine

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        old = appliance.engine
        reload = asyncio.create_task(appliance.reload_when_idle())
        await asyncio.sleep(0)
        late = asyncio.create_task(latecomer())
        await asyncio.sleep(0.01)
        assert appliance.engine is old and events == ["lent"]  # both wait for the holder
        release.set()
        await asyncio.gather(first, reload, late)
        events.append("reloaded" if appliance.engine is not old else "not reloaded")
        return events

    try:
        events = asyncio.run(scenario())
        assert events == ["lent", "written", "late lease", "reloaded"]
        assert appliance.engine.get(b"late") == b"1"
    finally:
        appliance.close()


def test_a_slow_export_reader_does_not_hold_reloads_back() -> None:
    """The lease ends when the route returns, before its (streamed) response is sent."""
    appliance = Appliance(lambda: KVEngine(rows=64, rules=16))
    for i in range(50):
        appliance.engine.set(f"k{i}".encode(), b"v")
    app = create_app(token=None)
    app.dependency_overrides[get_appliance] = lambda: appliance

    async def scenario() -> int:
        first_body = asyncio.Event()
        reader_stuck = asyncio.Event()  # never set: the client stops reading

        requested = False

        async def receive() -> dict:
            nonlocal requested
            if requested:  # the client stays connected and sends nothing more
                await reader_stuck.wait()
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.body":
                first_body.set()
                await reader_stuck.wait()

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "GET", "scheme": "http", "path": "/v1/entries",
                 "raw_path": b"/v1/entries", "query_string": b"format=ndjson", "root_path": "",
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "headers": []}
        export = asyncio.create_task(app(scope, receive, send))
        await asyncio.wait_for(first_body.wait(), 5)
        try:
            return await asyncio.wait_for(appliance.reload_when_idle(), 5)
        finally:
            export.cancel()

    try:
        assert asyncio.run(scenario()) == 50
    finally:
        appliance.close()
