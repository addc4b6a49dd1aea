"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest

from pynq_kv.serve.eventloop import uvloop_installed


@pytest.fixture(params=["asyncio", pytest.param("uvloop", marks=pytest.mark.skipif(
    not uvloop_installed(), reason="uvloop is not installed here"))])
def loop_name(request: pytest.FixtureRequest) -> str:
    """Each event loop serve can run on (a test taking it runs once per loop)."""
    return request.param
