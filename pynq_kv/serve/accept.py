"""Accepting TCP clients without flooding the log, and log lines that cannot flood it.

asyncio's own accept loop (3.11, selector_events._accept_connection) answers EMFILE/ENFILE by
logging a traceback and scheduling a retry, but then keeps calling accept() for the rest of its
backlog-sized loop: one traceback and one more retry timer per attempt. At a 256-descriptor limit
with 400 clients waiting that wrote 1.7 M tracebacks in 105 s (issue 16). `Listener` is the
accept loop the RESP front-end uses instead: every failed accept is counted, the log gets at most
one line per LOG_INTERVAL seconds (saying how many it left out), and on running out of
descriptors or memory it stops accepting for RESOURCE_BACKOFF seconds instead of spinning; the
clients wait in the kernel's backlog and are accepted once descriptors are free again.

Both TCP front-ends accept through it: RESP, and the admin service, whose uvicorn server is
handed a Listener in place of the loop's own server. The event loop's accept loop is then never
used, so the behaviour above is the same on asyncio's loop and on uvloop (whose libuv accepts
and closes waiting clients itself when out of descriptors, and closes a server whose listen
callback gets an error).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from typing import Any, Callable

LOG_INTERVAL = 10.0  # seconds between two log lines of one LogLimiter
RESOURCE_BACKOFF = 0.2  # seconds without accepting after EMFILE/ENFILE/ENOBUFS/ENOMEM
ACCEPT_BATCH = 64  # accepts per readiness event, so one busy listener cannot hog the loop
RESOURCE_ERRNOS = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking TCP socket listening on host:port, bound now so that a busy port fails
    start-up with a clear error. Made with IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm
    off (TCP_NODELAY) only on sockets whose proto says TCP, and the accepted clients inherit it;
    with proto 0 every small reply would wait for the client's delayed ACK (about 40 ms)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class LogLimiter:
    """At most one log line per interval; the next one says how many were suppressed."""

    def __init__(self, logger: logging.Logger, interval: float = LOG_INTERVAL) -> None:
        self.logger = logger
        self.interval = interval
        self.suppressed = 0
        self._last = float("-inf")

    def warning(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            self.suppressed += 1
            return
        if self.suppressed:
            message += " (%d similar messages suppressed in the last %.0f s)"
            args = (*args, self.suppressed, now - self._last)
        self._last = now
        self.suppressed = 0
        self.logger.warning(message, *args)


class Listener:
    """A listening TCP socket whose clients get protocol_factory()'s protocol (as create_server).

    accept_errors counts failed accept() calls; they are logged through one LogLimiter. close()
    and wait_closed() are those of asyncio.Server, so a server that keeps its listeners as
    asyncio.Server objects (uvicorn) can keep a Listener instead.
    """

    def __init__(self, protocol_factory: Callable[[], asyncio.Protocol], sock: socket.socket,
                 logger: logging.Logger, name: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.factory = protocol_factory
        self.sock = sock
        self.name = name
        self.accept_errors = 0
        self.backoffs = 0
        self._log = LogLimiter(logger)
        self._closed = False
        self._resume: Any = None
        sock.setblocking(False)
        self.loop.add_reader(sock.fileno(), self._accept)

    @classmethod
    def bind(cls, protocol_factory: Callable[[], asyncio.Protocol], host: str, port: int,
             backlog: int, logger: logging.Logger, name: str) -> "Listener":
        """Bind and listen on host:port now (an error here is a start-up error), then accept."""
        sock = listening_socket(host, port, backlog)
        try:
            return cls(protocol_factory, sock, logger, name)
        except BaseException:
            sock.close()
            raise

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # the client gave up while waiting: next one
                continue
            except OSError as exc:
                self.accept_errors += 1
                if exc.errno in RESOURCE_ERRNOS:
                    self._log.warning("%s: cannot accept clients: %s; pausing accepts for %g s "
                                      "(%d accept errors so far)", self.name, exc.strerror,
                                      RESOURCE_BACKOFF, self.accept_errors)
                    self._pause()
                else:
                    self._log.warning("%s: accept failed: %s (%d accept errors so far)",
                                      self.name, exc, self.accept_errors)
                return
            conn.setblocking(False)
            self.loop.create_task(self._connect(conn))

    async def _connect(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(self.factory, sock=conn)
        except Exception as exc:  # the client is gone already, or no memory: count, drop it
            self.accept_errors += 1
            self._log.warning("%s: could not set up an accepted client: %s", self.name, exc)
            conn.close()

    def _pause(self) -> None:
        self.backoffs += 1
        self.loop.remove_reader(self.sock.fileno())
        self._resume = self.loop.call_later(RESOURCE_BACKOFF, self._restart)

    def _restart(self) -> None:
        self._resume = None
        if not self._closed:
            self.loop.add_reader(self.sock.fileno(), self._accept)

    def getsockname(self) -> Any:
        return self.sock.getsockname()

    def close(self) -> None:
        """Stop accepting and close the listening socket (clients stay connected)."""
        if self._closed:
            return
        self._closed = True
        if self._resume is not None:
            self._resume.cancel()
        else:
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()

    async def wait_closed(self) -> None:
        """Nothing to wait for: close() stops accepting at once (asyncio.Server's interface)."""

