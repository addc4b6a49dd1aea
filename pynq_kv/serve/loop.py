"""The event loop every server runs on: uvloop's where it is installed, else asyncio's.

uvloop (a dependency on Linux) implements the same asyncio API on libuv; its socket transports
cost about a fifth less server CPU per unpipelined request than asyncio's (docs/resp.md).
PYNQ_KV_EVENT_LOOP=asyncio chooses asyncio's loop anyway (to rule the loop out when debugging).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")

ENV = "PYNQ_KV_EVENT_LOOP"


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on the chosen loop."""
    if os.environ.get(ENV, "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def loop_name() -> str:
    """The running loop's implementation, as INFO reports it: "uvloop" or "asyncio"."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]
