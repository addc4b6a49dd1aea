"""Servers and raw clients for the RESP front-end tests.

`PynqServer` runs pynq-kv's RESP server on its own event loop in a background thread (engine
calls stay on that loop: use .on_loop() to look at the engine). `RedisServer` starts Debian's
redis-server on a free loopback port in a temporary directory, so the same tests can show that
they describe Redis' own behaviour. Everything binds 127.0.0.1 and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import selectors
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Optional

from pynq_kv import Geometry, KVEngine
from pynq_kv.appliance import Appliance
from pynq_kv.serve.resp import RespConfig, start_resp_server

HOST = "127.0.0.1"
TIMEOUT = 10.0

HAVE_REDIS = shutil.which("redis-server") is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class PynqServer:
    """pynq-kv's RESP server in a background thread with its own event loop."""

    def __init__(self, config: Optional[RespConfig] = None, geometry: Optional[Geometry] = None,
                 layout: Any = None, value_kind: str = "bytes",
                 redis: Optional["RedisServer"] = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="resp-server", daemon=True)
        self.thread.start()
        geometry = geometry or Geometry(rows=1024, rules=64)
        self.appliance = Appliance(lambda: KVEngine("model", geometry, value_kind=value_kind),
                                   layout=layout)
        self.tier: Any = None
        if redis is not None:  # a host tier: this redis-server behind the engine
            from pynq_kv.tier import Tier

            self.tier = Tier(self.appliance, TcpRedis(redis.port))
            self.run(self.tier.start())
            self.appliance.tier = self.tier
        self.server = self.run(start_resp_server(self.appliance, HOST, 0, config=config or RespConfig()))
        self.port = self.server.port

    def run(self, coro: Any, timeout: float = TIMEOUT) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def on_loop(self, fn: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        """fn() on the server's loop thread (engine access must happen there)."""
        async def call() -> Any:
            return fn()
        return self.run(call(), timeout)

    @property
    def engine(self) -> KVEngine:
        return self.appliance.engine

    def items(self) -> dict:
        return self.on_loop(lambda: dict(self.appliance.engine.items()))

    def rules(self) -> dict:
        return self.on_loop(lambda: self.appliance.engine.rules())

    def stats(self) -> dict:
        return self.on_loop(self.server.stats)

    def stop(self) -> None:
        try:
            self.run(self.server.close())
            if self.tier is not None:
                self.run(self.tier.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(TIMEOUT)
            self.loop.close()
            self.appliance.close()


class TcpRedis:
    """A Redis on a loopback port as pynq_kv.tier.Tier connects to it."""

    def __init__(self, port: int) -> None:
        self.port = port

    def handshake(self) -> list[list[bytes]]:
        return []

    async def open_link(self, factory: Callable[[], Any]) -> tuple[Any, Any]:
        return await asyncio.get_running_loop().create_connection(factory, HOST, self.port)


class RedisServer:
    """Debian's redis-server on a free loopback port, no persistence, in a temporary dir."""

    def __init__(self, *extra: str) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="pynq-kv-redis-")
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", HOST, "--save", "", "--appendonly",
             "no", "--dir", self.tmp.name, *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=1) as sock:
                    sock.sendall(b"QUIT\r\n")
                    sock.recv(16)
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("redis-server did not start")
                time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(TIMEOUT)
        self.tmp.cleanup()


def exchange(port: int, data: bytes, timeout: float = 5.0, chunk: int = 0) -> bytes:
    """Send data (in chunks of `chunk` bytes if > 0), half-close, and read until the server
    closes; b"<TIMEOUT>" is appended if it did not close in time."""
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        if chunk:
            for start in range(0, len(data), chunk):
                sock.sendall(data[start:start + chunk])
                time.sleep(0.001)
        else:
            sock.sendall(data)
        try:
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = bytearray()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                piece = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                return bytes(out) + b"<RESET>"
            if not piece:
                return bytes(out)
            out += piece
        return bytes(out) + b"<TIMEOUT>"


class RawClient:
    """A socket that sends bytes and reads whole replies (parsed with hiredis to know where they
    end) while keeping the raw bytes for exact comparison."""

    def __init__(self, port: int, timeout: float = 5.0) -> None:
        import hiredis

        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.reader = hiredis.Reader(notEnoughData=Ellipsis)
        self.raw = bytearray()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def replies(self, n: int) -> list[Any]:
        out: list[Any] = []
        while len(out) < n:
            reply = self.reader.gets()
            if reply is not Ellipsis:
                out.append(reply)
                continue
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError(f"closed after {len(out)} of {n} replies")
            self.raw += data
            self.reader.feed(data)
        return out

    def call(self, *args: Any) -> Any:
        self.send(encode_command(*args))
        return self.replies(1)[0]

    def closed(self, timeout: float = 5.0) -> bool:
        """True once the server has closed the connection (reads EOF)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
                self.raw += data
                self.reader.feed(data)
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()


def encode_command(*args: Any) -> bytes:
    """A command as a RESP multibulk request."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def here() -> Path:
    return Path(__file__).resolve().parent


def exchange_all(port: int, inputs: list[bytes], timeout: float) -> list[tuple[bytes, str]]:
    """Each input on its own connection at once, half-closed; (output, how it ended): 'closed',
    'reset' or 'timeout' (neither answered to the end nor closed in time)."""
    sel = selectors.DefaultSelector()
    outputs = [bytearray() for _ in inputs]
    ends = ["timeout"] * len(inputs)
    for i, data in enumerate(inputs):
        sock = socket.create_connection((HOST, port), timeout=timeout)
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        sock.setblocking(False)
        sel.register(sock, selectors.EVENT_READ, i)
    deadline = time.monotonic() + timeout
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(timeout=0.1):
            try:
                piece = key.fileobj.recv(65536)
            except ConnectionResetError:
                piece, ends[key.data] = b"", "reset"
            if piece:
                outputs[key.data] += piece
                continue
            if ends[key.data] == "timeout":
                ends[key.data] = "closed"
            sel.unregister(key.fileobj)
            key.fileobj.close()
    for key in list(sel.get_map().values()):
        key.fileobj.close()
    sel.close()
    return [(bytes(o), e) for o, e in zip(outputs, ends)]
