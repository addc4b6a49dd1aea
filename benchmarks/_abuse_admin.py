"""Abuse scenarios of the admin service, run against a real `pynq-kv serve` process (issue 16).

Two reusable scenarios, each starting its own server (model backend, loopback, free ports) and
returning a dict of figures; `benchmarks/abuse.py` runs them at full scale and
tests/test_api_reload_race.py / tests/test_api_limits.py at small scale:

- `run_reload_race(seconds)`: REST writers PUT unique keys, a REST deleter DELETEs known keys and
  a RESP writer SETs unique keys while another thread calls `POST /v1/overlay/reload` in a loop
  and a control client polls `/healthz`. Afterwards every acknowledged write must be there with
  its value, and no key whose DELETE was answered 204 may be back.
- `run_big_body(size_bytes)`: one PUT whose body of size_bytes is streamed from a generator
  (declared Content-Length, or chunked), with or without the token, while a control client
  sends RESP PINGs; peak RSS is the server's VmHWM.

    python benchmarks/_abuse_admin.py [--seconds 30] [--size 500000000]   # both, JSON out
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
TOKEN = "abuse-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
START_TIMEOUT = 60.0
IO_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A /proc/PID/status memory figure in MiB (VmRSS now, VmHWM the peak so far)."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")


class Server:
    """`pynq-kv serve` (model backend, admin token set, UDP off) on free loopback ports;
    rows: the table's rows per way (None: serve's default geometry)."""

    def __init__(self, *extra: str, rows: Optional[int] = None) -> None:
        self.resp_port, self.admin_port = free_port(), free_port()
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pynq_kv", "--backend", "model",
             *(["--rows", str(rows)] if rows else []), "serve", "--bind", HOST,
             "--resp-port", str(self.resp_port), "--admin-port", str(self.admin_port),
             "--disable", "udp", "--admin-token", TOKEN, "--log-level", "warning", *extra],
            env=env, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pynq-kv serve exited with {self.proc.returncode} at start")
            try:
                if self.http("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("pynq-kv serve did not come up")
            time.sleep(0.05)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def http(self, method: str, path: str, body: Optional[dict] = None,
             headers: Optional[dict] = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(HOST, self.admin_port, timeout=IO_TIMEOUT)
        try:
            return request(conn, method, path, body, headers)
        finally:
            conn.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(IO_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(IO_TIMEOUT)


@contextmanager
def serving(*extra: str, rows: Optional[int] = None) -> Iterator[Server]:
    server = Server(*extra, rows=rows)
    try:
        yield server
    finally:
        server.stop()


def request(conn: http.client.HTTPConnection, method: str, path: str,
            body: Optional[dict] = None, headers: Optional[dict] = None) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    sent = dict(headers or {})
    if data is not None:
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    return response.status, response.read()


class Resp:
    """A minimal blocking RESP2 client: one command, one reply."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
        self.file = self.sock.makefile("rb")

    def call(self, *args: bytes | str) -> Any:
        parts = [b"*%d\r\n" % len(args)]
        for arg in args:
            data = arg.encode() if isinstance(arg, str) else arg
            parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
        self.sock.sendall(b"".join(parts))
        return self._reply()

    def _reply(self) -> Any:
        line = self.file.readline()
        if not line:
            raise ConnectionError("server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            return None if size < 0 else self.file.read(size + 2)[:-2]
        if kind == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise ConnectionError(f"unexpected reply {line!r}")

    def close(self) -> None:
        self.file.close()
        self.sock.close()


class Stalls:
    """A control client in its own process (so the load generator's threads do not delay it):
    the slowest answer it got, in ms, and how many failed. kind: "healthz" or "ping"."""

    def __init__(self, kind: str, port: int, period: float = 0.01) -> None:
        self.args = [sys.executable, __file__, "--poll", kind, str(port), str(period)]
        self.worst_ms = 0.0
        self.failures = 0

    def __enter__(self) -> "Stalls":
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != b"polling":
            raise RuntimeError("the control poller did not start")
        return self

    def __exit__(self, *exc: Any) -> None:
        out, _ = self.proc.communicate(b"", timeout=IO_TIMEOUT)  # EOF on stdin: stop
        found = json.loads(out)
        self.worst_ms, self.failures = found["worst_ms"], found["failures"]


def _poll(kind: str, port: int, period: float) -> None:
    """The control poller's process: probe until stdin closes, then print the figures."""
    if kind == "healthz":
        conn = http.client.HTTPConnection(HOST, port, timeout=IO_TIMEOUT)
        probe = lambda: request(conn, "GET", "/healthz")[0] == 200  # noqa: E731
    else:
        client = Resp(port)
        probe = lambda: client.call("PING") == "PONG"  # noqa: E731
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    worst, failures = 0.0, 0
    print("polling", flush=True)
    while not stop.is_set():
        began = time.perf_counter()
        try:
            ok = probe()
        except OSError:
            ok = False
        worst = max(worst, time.perf_counter() - began)
        failures += not ok
        stop.wait(period)
    print(json.dumps({"worst_ms": round(worst * 1e3, 1), "failures": failures}), flush=True)


def run_reload_race(seconds: float, *, rest_writers: int = 2, resp_writers: int = 1,
                    delete_keys: int = 3000, rows: int = 32768) -> dict[str, Any]:
    """Writers and a deleter against a reload loop for `seconds`; what was acknowledged and lost.

    rows (per way, 4 ways) leaves room for every write of a 30 s run; each reload copies the
    whole table, so a bigger one makes reloads (and the loop's stall during them) longer.

    keys_lost: acknowledged PUTs/SETs absent (or with another value) afterwards;
    keys_resurrected: keys answered 204 on DELETE that are present afterwards.
    """
    with serving(rows=rows) as server:
        seed = Resp(server.resp_port)
        for start in range(0, delete_keys, 500):
            args = []
            for i in range(start, min(start + 500, delete_keys)):
                args += [f"del-{i}", "x"]
            seed.call("MSET", *args)
        stop = threading.Event()
        written: dict[str, str] = {}  # acknowledged key -> value
        deleted: list[str] = []
        errors: list[str] = []
        reloads = [0, 0]  # answered 200, answered otherwise
        full = [0]  # PUTs refused with 507: the table is full

        def rest_writer(n: int) -> None:
            conn = http.client.HTTPConnection(HOST, server.admin_port, timeout=IO_TIMEOUT)
            i = 0
            while not stop.is_set():
                key, value = f"rest-{n}-{i}", f"v{n}.{i}"
                status, body = request(conn, "PUT", f"/v1/entries/{key}", {"value": value}, AUTH)
                if status in (200, 201):
                    written[key] = value
                elif status == 507:
                    full[0] += 1
                elif status >= 500:
                    errors.append(f"PUT {key}: {status} {body[:200]!r}")
                i += 1

        def resp_writer(n: int) -> None:
            client = Resp(server.resp_port)
            i = 0
            while not stop.is_set():
                key, value = f"resp-{n}-{i}", f"r{n}.{i}"
                if client.call("SET", key, value) == "OK":
                    written[key] = value
                i += 1
            client.close()

        def deleter() -> None:
            conn = http.client.HTTPConnection(HOST, server.admin_port, timeout=IO_TIMEOUT)
            for i in range(delete_keys):
                if stop.is_set():
                    break
                status, body = request(conn, "DELETE", f"/v1/entries/del-{i}", None, AUTH)
                if status == 204:
                    deleted.append(f"del-{i}")
                elif status >= 500:
                    errors.append(f"DELETE del-{i}: {status} {body[:200]!r}")

        def reloader() -> None:
            conn = http.client.HTTPConnection(HOST, server.admin_port, timeout=IO_TIMEOUT)
            while not stop.is_set():
                status, _ = request(conn, "POST", "/v1/overlay/reload", None, AUTH)
                reloads[status != 200] += 1

        workers = ([threading.Thread(target=rest_writer, args=(n,)) for n in range(rest_writers)]
                   + [threading.Thread(target=resp_writer, args=(n,)) for n in range(resp_writers)]
                   + [threading.Thread(target=deleter), threading.Thread(target=reloader)])
        failed: list[BaseException] = []

        def guarded(target: Any) -> Any:
            def run() -> None:
                try:
                    target()
                except BaseException as exc:  # a dead connection is a finding, not a hang
                    failed.append(exc)
            return run

        for worker in workers:
            worker.run = guarded(worker.run)  # type: ignore[method-assign]
        with Stalls("healthz", server.admin_port) as stalls:
            for worker in workers:
                worker.start()
            time.sleep(seconds)
            stop.set()
            for worker in workers:
                worker.join(IO_TIMEOUT)
        crashed = not server.alive
        lost = resurrected = -1
        if not crashed:
            keys = list(written)
            found = []
            for start in range(0, len(keys), 1000):
                found += seed.call("MGET", *keys[start:start + 1000])
            lost = sum(got != written[key].encode() for key, got in zip(keys, found))
            resurrected = sum(seed.call("EXISTS", key) for key in deleted)
        seed.close()
        return {
            "seconds": seconds,
            "acknowledged_writes": len(written),
            "acknowledged_deletes": len(deleted),
            "keys_lost": lost,
            "keys_resurrected": resurrected,
            "reloads": reloads[0],
            "reloads_refused": reloads[1],
            "writes_refused_full": full[0],
            "server_errors": len(errors) + len(failed),
            "first_errors": (errors + [repr(exc) for exc in failed])[:3],
            "max_control_stall_ms": round(stalls.worst_ms, 1),
            "control_failures": stalls.failures,
            "crashes": int(crashed),
        }


def _stream_put(port: int, path: str, size: int, *, authorized: bool, chunked: bool,
                chunk: int = 1 << 16) -> tuple[int, int]:
    """PUT a body of `size` bytes from a generator; (status, bytes sent before the answer).

    The answer is looked for before every chunk, so a server that refuses early is seen at once
    and the client stops sending (as a well-behaved client would after an early 413/401).
    """
    sock = socket.create_connection((HOST, port), timeout=IO_TIMEOUT)
    head = [f"PUT {path} HTTP/1.1", f"Host: {HOST}:{port}", "Content-Type: application/json"]
    head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}")
    if authorized:
        head.append(f"Authorization: Bearer {TOKEN}")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    block = b'{"value": "' + b"a" * chunk
    sent = 0
    try:
        try:
            while sent < size:
                if select.select([sock], [], [], 0)[0]:
                    break
                piece = block[:min(chunk, size - sent)]
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed: its answer may still be queued here
        sock.settimeout(IO_TIMEOUT)
        try:
            status_line = sock.makefile("rb").readline()
        except ConnectionResetError:
            status_line = b""
    finally:
        sock.close()
    parts = status_line.split()
    return (int(parts[1]) if len(parts) > 1 else 0), sent


def run_big_body(size_bytes: int, *, authorized: bool = False, chunked: bool = False
                 ) -> dict[str, Any]:
    """One PUT with a body of size_bytes against a fresh server; its memory and the loop's stall.

    peak_rss_mb is the server's VmHWM after the request, idle_rss_mb its VmRSS before;
    key_stored: whether the PUT's key is in the table afterwards.
    """
    with serving() as server:
        time.sleep(0.2)
        idle = rss_mb(server.proc.pid)
        with Stalls("ping", server.resp_port) as stalls:
            began = time.perf_counter()
            status, sent = _stream_put(server.admin_port, "/v1/entries/big", size_bytes,
                                       authorized=authorized, chunked=chunked)
            took = time.perf_counter() - began
            time.sleep(0.1)
        crashed = not server.alive
        peak = rss_mb(server.proc.pid, "VmHWM") if not crashed else -1.0
        health = -1 if crashed else json.loads(server.http("GET", "/healthz")[1]).get("status")
        stored = not crashed and server.http("GET", "/v1/entries/big")[0] == 200
        return {
            "size_bytes": size_bytes,
            "authorized": authorized,
            "chunked": chunked,
            "status": status,
            "bytes_sent_before_answer": sent,
            "seconds": round(took, 3),
            "idle_rss_mb": round(idle, 1),
            "peak_rss_mb": round(peak, 1),
            "max_control_stall_ms": round(stalls.worst_ms, 1),
            "control_failures": stalls.failures,
            "healthz_after": health,
            "key_stored": stored,
            "crashes": int(crashed),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--size", type=int, default=500_000_000)
    parser.add_argument("--poll", nargs=3, metavar=("KIND", "PORT", "PERIOD"),
                        help=argparse.SUPPRESS)  # the control poller's own process
    args = parser.parse_args()
    if args.poll:
        _poll(args.poll[0], int(args.poll[1]), float(args.poll[2]))
        return
    out = {"reload_race": run_reload_race(args.seconds),
           "big_body": [run_big_body(args.size, authorized=auth, chunked=chunked)
                        for auth in (False, True) for chunked in (False, True)]}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
