"""Which event loop the front-ends run on: uvloop where it is installed, asyncio's own otherwise.

Every front-end shares one loop, and at one request per client turn most of a request's server
CPU is the sockets' system calls and the loop's own work (docs/resp.md, "Performance"). uvloop
(libuv) does that work in C. Nothing in pynq-kv depends on which loop runs: both TCP front-ends
accept through pynq_kv/serve/accept.py's Listener, never through the loop's own server, and the
rest is the asyncio API both loops implement. `auto` (the default) takes uvloop when it imports.
"""

from __future__ import annotations

import asyncio
from typing import Any, Coroutine, Optional, TypeVar

EVENT_LOOPS = ("auto", "asyncio", "uvloop")
T = TypeVar("T")


def uvloop_installed() -> bool:
    """uvloop imports here (an install that is there but broken counts as none: auto then
    falls back to asyncio's loop instead of failing at start)."""
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def unavailable(event_loop: str) -> Optional[str]:
    """Why `event_loop` cannot run here (serve's config and the RESP module's flags say it), or
    None."""
    if event_loop not in EVENT_LOOPS:
        return f"event_loop must be one of {', '.join(EVENT_LOOPS)}, got {event_loop!r}"
    if event_loop == "uvloop" and not uvloop_installed():
        return ("event loop uvloop: uvloop is not installed here (pip install uvloop), or use "
                "--event-loop asyncio")
    return None


def resolve(event_loop: str) -> str:
    """The loop `event_loop` names here: auto becomes uvloop when it is installed."""
    reason = unavailable(event_loop)
    if reason is not None:
        raise ValueError(reason)
    if event_loop == "auto":
        return "uvloop" if uvloop_installed() else "asyncio"
    return event_loop


def run(main: Coroutine[Any, Any, T], event_loop: str = "auto") -> T:
    """asyncio.run(main) on the loop `event_loop` names."""
    if resolve(event_loop) == "uvloop":
        import uvloop

        return uvloop.run(main)
    return asyncio.run(main)


def running_loop_name() -> str:
    """The running loop for the start-up banner: "uvloop 0.23.0" or "asyncio"."""
    loop_module = type(asyncio.get_running_loop()).__module__
    if loop_module.startswith("uvloop"):
        import uvloop

        return f"uvloop {uvloop.__version__}"
    return "asyncio"
