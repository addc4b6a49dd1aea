"""RESP abuse scenarios of issue 16, as functions benchmarks/abuse.py (and the tests) call
(a helper module: `make bench` skips files starting with "_").

Each runs a real `pynq-kv serve` (model backend, RESP only, loopback) in its own process,
stores KNOWN_KEYS known keys, connects a *control* client that PINGs every CONTROL_EVERY
seconds and times each reply, runs the abuse, then reads the keys back and returns a dict:

    inputs                what was sent (scenario-specific)
    crashes               1 if the server process died, else 0
    keys_lost             known keys missing or changed afterwards
    max_control_stall_ms  the slowest control PING reply while the abuse ran
    peak_rss_mb           the server's peak RSS (VmHWM), idle_rss_mb its RSS before the abuse
    ...                   the server's own counters and log size where the scenario needs them

    run_glob_stall()          CONFIG GET with patterns that make a backtracking glob explode
    run_client_memory(...)    clients each holding a partial command of many tiny arguments
    run_fd_exhaustion(...)    more clients than the server has file descriptors
"""

from __future__ import annotations

import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Optional

HOST = "127.0.0.1"
KNOWN_KEYS = 200
CONTROL_EVERY = 0.01
BANNER = re.compile(rb"Redis \(RESP2/RESP3\) on tcp://[\d.]+:(\d+)")
ADMIN_BANNER = re.compile(rb"admin API on http://[\d.]+:(\d+)")


def command(*args: bytes) -> bytes:
    """One RESP multibulk request."""
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def read_reply(sock: socket.socket, buf: bytearray) -> bytes:
    """One whole reply line or bulk (enough for the simple replies used here)."""
    while True:
        end = buf.find(b"\r\n")
        if end >= 0:
            if buf[:1] == b"$" and int(buf[1:end]) >= 0:
                need = end + 2 + int(buf[1:end]) + 2
                if len(buf) >= need:
                    reply = bytes(buf[:need])
                    del buf[:need]
                    return reply
            elif buf[:1] in (b"+", b"-", b":", b"$"):
                reply = bytes(buf[:end + 2])
                del buf[:end + 2]
                return reply
            else:
                raise ValueError(f"unexpected reply {bytes(buf[:40])!r}")
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        buf += data


class Client:
    """A blocking RESP client for the simple commands the scenarios send."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.buf = bytearray()

    def call(self, *args: bytes) -> bytes:
        self.sock.sendall(command(*args))
        return read_reply(self.sock, self.buf)

    def close(self) -> None:
        self.sock.close()


class Server:
    """`pynq-kv serve` with RESP (and the admin service if asked) on free ports; stderr (the
    log) goes to a file."""

    def __init__(self, *serve_args: str, nofile: Optional[int] = None, rows: int = 1024,
                 admin: bool = False) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="pynq-kv-abuse-")
        self.log_path = Path(self.tmp.name) / "serve.log"
        self.log = open(self.log_path, "wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYNQ_KV_")}

        def limit() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pynq_kv", "--backend", "model", "--rows", str(rows), "serve",
             "--bind", HOST, "--resp-port", "0", "--admin-port", "0", "--disable", "udp",
             *([] if admin else ["--disable", "admin"]), *serve_args],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=env,
            preexec_fn=limit)
        deadline = time.monotonic() + 60
        while True:
            log = self.log_path.read_bytes()
            match = BANNER.search(log)
            admin_match = ADMIN_BANNER.search(log)
            if match and (admin_match or not admin):
                self.port = int(match[1])
                self.admin_port = int(admin_match[1]) if admin_match else None
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("serve did not start:\n" + self.log_path.read_text())
            time.sleep(0.05)

    def status_kb(self, field: str) -> int:
        with open(f"/proc/{self.proc.pid}/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        return 0

    def rss_mb(self) -> float:
        return self.status_kb("VmRSS") / 1024

    def peak_rss_mb(self) -> float:
        return self.status_kb("VmHWM") / 1024

    def log_lines(self, containing: bytes = b"") -> int:
        return sum(1 for line in self.log_path.read_bytes().splitlines() if containing in line)

    def crashed(self) -> bool:
        return self.proc.poll() is not None

    def info_stats(self, port_client: "Client") -> dict[str, str]:
        text = port_client.call(b"INFO", b"stats").split(b"\r\n", 1)[1].decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()
        self.tmp.cleanup()


class Control(threading.Thread):
    """PINGs every CONTROL_EVERY seconds; .worst is the slowest reply in seconds."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.client = Client(port)
        self.worst = 0.0
        self.failures = 0
        self._halt = threading.Event()
        self.start()

    def run(self) -> None:
        while not self._halt.is_set():
            start = time.perf_counter()
            try:
                reply = self.client.call(b"PING")
            except OSError:
                self.failures += 1
                return
            self.worst = max(self.worst, time.perf_counter() - start)
            if reply != b"+PONG\r\n":
                self.failures += 1
            self._halt.wait(CONTROL_EVERY)

    def finish(self) -> float:
        """Stop; the worst stall in ms."""
        self._halt.set()
        self.join(60)
        self.client.close()
        return round(self.worst * 1000, 1)


def _known(i: int) -> tuple[bytes, bytes]:
    return b"known:%d" % i, b"value:%d" % i


def _store_known(port: int) -> None:
    client = Client(port)
    for i in range(KNOWN_KEYS):
        key, value = _known(i)
        assert client.call(b"SET", key, value) == b"+OK\r\n"
    client.close()


def _keys_lost(port: int) -> int:
    client = Client(port)
    lost = 0
    for i in range(KNOWN_KEYS):
        key, value = _known(i)
        if client.call(b"GET", key) != b"$%d\r\n%s\r\n" % (len(value), value):
            lost += 1
    client.close()
    return lost


def _scenario(server: Server, run: Any) -> dict[str, Any]:
    """Known keys, idle RSS, control client, the abuse (run(server) -> extra fields), results."""
    try:
        _store_known(server.port)
        idle = server.rss_mb()
        control = Control(server.port)
        extra = run(server)
        stall = control.finish()
        crashed = server.crashed()
        result = {
            "crashes": int(crashed),
            "keys_lost": KNOWN_KEYS if crashed else _keys_lost(server.port),
            "max_control_stall_ms": stall,
            "control_failures": control.failures,
            "peak_rss_mb": round(server.peak_rss_mb(), 1) if not crashed else None,
            "idle_rss_mb": round(idle, 1),
        }
        if not crashed:
            probe = Client(server.port)
            stats = server.info_stats(probe)
            probe.close()
            for name in ("evicted_clients", "accept_errors", "closed_query_buffer_limit"):
                result[name] = int(stats.get(name, -1))
        result["log_lines"] = server.log_lines()
        result["log_accept_warnings"] = server.log_lines(b"cannot accept clients")
        result.update(extra)
        return result
    finally:
        server.stop()


GLOB_PATTERNS = [b"*?" * 12 + b"x", b"*?" * 40 + b"x", b"*a" * 30 + b"b", b"?" * 10_000 + b"*",
                 b"[" + b"a-" * 100_000 + b"]*", b"*[a-z]*?*[^q]*?*?*?*?*?*?x"]


def run_glob_stall(repeats: int = 5) -> dict[str, Any]:
    """CONFIG GET with each pattern of GLOB_PATTERNS, `repeats` times (issue 16: 13.5 s)."""
    def abuse(server: Server) -> dict[str, Any]:
        client = Client(server.port)
        slowest = 0.0
        for _ in range(repeats):
            for pattern in GLOB_PATTERNS:
                start = time.perf_counter()
                client.sock.sendall(command(b"CONFIG", b"GET", pattern))
                header = read_reply_header(client)
                slowest = max(slowest, time.perf_counter() - start)
                assert header.startswith(b"*"), header
        client.close()
        return {"slowest_config_get_ms": round(slowest * 1000, 1)}

    result = _scenario(Server(), abuse)
    result["inputs"] = {"patterns": len(GLOB_PATTERNS), "repeats": repeats,
                        "longest_pattern_bytes": max(map(len, GLOB_PATTERNS))}
    return result


def read_reply_header(client: Client) -> bytes:
    """An array reply, read whole; returns its header line (CONFIG GET answers an array)."""
    sock, buf = client.sock, client.buf
    while b"\r\n" not in buf:
        buf += sock.recv(65536)
    end = buf.find(b"\r\n")
    header = bytes(buf[:end])
    del buf[:end + 2]
    for _ in range(max(0, int(header[1:]))):
        read_reply(sock, buf)
    return header


def run_client_memory(clients: int = 20, args_per_command: int = 900_000,
                      maxmemory_clients: int = 256 * 1024 * 1024,
                      hold_seconds: float = 1.0) -> dict[str, Any]:
    """Each client sends all but the last argument of one EXISTS with args_per_command 2-byte
    arguments and holds it (issue 16: 20 such clients, RSS 1,019 MB)."""
    partial = (b"*%d\r\n$6\r\nEXISTS\r\n" % (args_per_command + 1)
               + b"$2\r\nab\r\n" * (args_per_command - 1))

    def abuse(server: Server) -> dict[str, Any]:
        socks = []
        closed = 0
        for _ in range(clients):
            sock = socket.create_connection((HOST, server.port), timeout=30)
            try:
                sock.sendall(partial)
            except OSError:  # evicted while sending
                closed += 1
            socks.append(sock)
        time.sleep(hold_seconds)
        for sock in socks:
            sock.close()
        return {"clients_closed_while_sending": closed}

    result = _scenario(Server("--maxmemory-clients", str(maxmemory_clients)), abuse)
    result["inputs"] = {"clients": clients, "args_per_command": args_per_command,
                        "bytes_per_client": len(partial), "maxmemory_clients": maxmemory_clients}
    return result


def _served(frontend: str, port: int) -> bool:
    """A new client of that front-end is answered (PING, or GET /healthz)."""
    if frontend == "resp":
        client = Client(port, timeout=2)
        try:
            return client.call(b"PING") == b"+PONG\r\n"
        finally:
            client.close()
    with socket.create_connection((HOST, port), timeout=2) as sock:
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        return sock.recv(12) == b"HTTP/1.1 200"


def run_fd_exhaustion(nofile: int = 256, clients: int = 400, hold_seconds: float = 5.0,
                      frontend: str = "resp") -> dict[str, Any]:
    """`clients` connections to a server limited to `nofile` descriptors, held hold_seconds,
    then closed; afterwards a new client must be served (issue 16: 1.7 M tracebacks). frontend
    "admin" aims them at the admin service instead of RESP."""
    def abuse(server: Server) -> dict[str, Any]:
        port = server.port if frontend == "resp" else server.admin_port
        socks = []
        refused = 0
        for _ in range(clients):
            try:
                socks.append(socket.create_connection((HOST, port), timeout=2))
            except OSError:
                refused += 1
        time.sleep(hold_seconds)
        for sock in socks:
            sock.close()
        deadline = time.monotonic() + 30
        served_again = False
        while not served_again and time.monotonic() < deadline:
            try:
                served_again = _served(frontend, port)
            except OSError:
                time.sleep(0.2)
        return {"connect_failures": refused, "served_again": served_again}

    result = _scenario(Server(nofile=nofile, admin=frontend == "admin"), abuse)
    result["inputs"] = {"nofile": nofile, "clients": clients, "hold_seconds": hold_seconds,
                        "frontend": frontend}
    return result


__all__ = ["run_glob_stall", "run_client_memory", "run_fd_exhaustion"]
