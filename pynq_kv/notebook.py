"""Small helpers the notebooks share: their size, and servers started on loopback for them.

`sized(full, ci)` lets `make test` run every notebook quickly (PYNQ_KV_NB_SCALE=ci) while a
user gets the full size. `ServeProcess` starts `pynq-kv serve` as a user would (a subprocess,
every front-end on 127.0.0.1 and a free port, read back from its start-up banner) and
`RedisServer` a private redis-server beside it (no persistence), so a notebook can point real
clients at both and stop them again.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Optional, Sequence

SCALE_ENV = "PYNQ_KV_NB_SCALE"
SCALES = ("full", "ci")
# "  Redis (RESP2/RESP3) on tcp://127.0.0.1:6380", "  admin API on http://127.0.0.1:8080/ ..."
_BANNER = re.compile(r"(Redis|memcached|admin)\b.*? on (tcp|udp|http)://([\d.]+):(\d+)")
_FRONTEND = {"tcp": "resp", "udp": "udp", "http": "admin"}
_BANNER_END = "state file"  # the banner's last line names the state file (or its absence)


def scale() -> str:
    """The notebook size asked for in $PYNQ_KV_NB_SCALE: "full" (the default) or "ci"."""
    value = os.environ.get(SCALE_ENV, "full").strip().lower() or "full"
    if value not in SCALES:
        raise ValueError(f"{SCALE_ENV} must be one of {', '.join(SCALES)}, got {value!r}")
    return value


def sized(full: int, ci: int) -> int:
    """full, or ci when the notebook runs as a test (PYNQ_KV_NB_SCALE=ci)."""
    return ci if scale() == "ci" else full


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerError(RuntimeError):
    """A server the notebook needs did not start; the message carries its output."""


def _names_a_store(serve_args: Sequence[str]) -> bool:
    """Whether serve's arguments say where the data lives (else the notebooks' appliance runs
    memory-only: what they measure is the engine and its front-ends, not a Redis behind it)."""
    return any(arg.split("=")[0] in ("--store", "--no-store", "--data-dir", "--redis-url",
                                     "--appendfsync", "--redis-server") for arg in serve_args)


class ServeProcess:
    """`pynq-kv [global_args] serve [serve_args]` on 127.0.0.1, every front-end on a free port.

    `ports` maps "resp", "udp" and "admin" to the ports the banner named; `admin_url` is the
    admin API's base URL. Stop it with `stop()` or use it as a context manager.
    """

    def __init__(self, global_args: Sequence[str] = (), serve_args: Sequence[str] = (),
                 startup_timeout: float = 120.0) -> None:
        cmd = [sys.executable, "-m", "pynq_kv", *global_args, "serve", "--bind", "127.0.0.1",
               "--resp-port", "0", "--udp-port", "0", "--admin-port", "0",
               *([] if _names_a_store(serve_args) else ["--no-store"]), *serve_args]
        self._started = False
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.banner: list[str] = []
        self.ports: dict[str, int] = {}
        self.log: deque[str] = deque(maxlen=200)  # serve's latest output, banner included
        # serve keeps logging: a thread reads its output so that the pipe never fills, and
        # start-up waits on it with a deadline even if serve hangs before its banner
        lines: queue.Queue[Optional[str]] = queue.Queue()
        self._reader = threading.Thread(target=self._read_output, args=(lines,), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + startup_timeout
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:  # end of output, or the deadline
                break
            self.banner.append(line)
            match = _BANNER.search(line)
            if match:
                self.ports[_FRONTEND[match[2]]] = int(match[4])
            if _BANNER_END in line:
                self._started = True
                return
        self._kill()
        self._reader.join(10)
        raise ServerError("pynq-kv serve did not start:\n" + "\n".join(self.banner))

    def _read_output(self, lines: "queue.Queue[Optional[str]]") -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.log.append(line)
            if not self._started:
                lines.put(line)
        lines.put(None)

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['admin']}"

    def _kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a graceful stop), SIGKILL after timeout; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill()
        self._reader.join(timeout)
        return int(self.proc.returncode)

    def __enter__(self) -> "ServeProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class RedisServer:
    """A private redis-server on 127.0.0.1 and a free port, with no persistence."""

    def __init__(self, executable: Optional[str] = None, startup_timeout: float = 20.0) -> None:
        exe = executable or shutil.which("redis-server")
        if exe is None:
            raise ServerError("redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)")
        self.port = free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="pynq-kv-redis-")
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self._dir.name],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + startup_timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise ServerError(f"redis-server did not answer PING on port {self.port}")

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._dir.cleanup()
        return int(self.proc.returncode)

    def __enter__(self) -> "RedisServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["SCALE_ENV", "RedisServer", "ServeProcess", "ServerError", "free_port", "scale", "sized"]
