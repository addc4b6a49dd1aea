"""The servers' event loop (pynq_kv.serve.loop): `pynq-kv serve` runs on uvloop, a dependency,
unless PYNQ_KV_EVENT_LOOP=asyncio; INFO says which."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from abuse_support import Served
from pynq_kv.serve import loop


@pytest.mark.parametrize("env, expected", [(None, "uvloop"), ("asyncio", "asyncio")])
def test_serve_runs_on_the_chosen_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       env: str, expected: str) -> None:
    if env is None:
        monkeypatch.delenv(loop.ENV, raising=False)
    else:
        monkeypatch.setenv(loop.ENV, env)
    served = Served(tmp_path)
    try:
        client = redis.Redis(host="127.0.0.1", port=served.resp_port, socket_timeout=5)
        assert client.info("server")["multiplexing_api"] == expected
        client.set("k", "v")
        assert client.get("k") == b"v"
        client.close()
    finally:
        assert served.stop() == 0


def test_run_returns_the_coroutines_result(monkeypatch: pytest.MonkeyPatch) -> None:
    async def which() -> str:
        await asyncio.sleep(0)
        return loop.loop_name()

    monkeypatch.delenv(loop.ENV, raising=False)
    assert loop.run(which()) == "uvloop"
    monkeypatch.setenv(loop.ENV, "asyncio")
    assert loop.run(which()) == "asyncio"
