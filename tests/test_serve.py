"""`pynq-kv serve` as a user runs it: one process, three front-ends, one engine, graceful stop.

The process is started on 127.0.0.1 with port 0 everywhere (the banner names the real ports),
spoken to with raw bytes (RESP, memcached binary over UDP, HTTP), and stopped with SIGTERM and
SIGINT; a state file carries the tables across a restart.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

BANNER = re.compile(r"(Redis|memcached|admin)\b.*? (?:on|API on) (tcp|udp|http)://([\d.]+):(\d+)")
STARTUP_TIMEOUT = 60.0


class Served:
    """A running `pynq-kv serve` and the ports it printed."""

    def __init__(self, args: list[str], env: dict[str, str],
                 startup_timeout: float = STARTUP_TIMEOUT) -> None:
        cmd = [sys.executable, "-m", "pynq_kv", *args]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        self.lines: list[str] = []
        self.ports: dict[str, int] = {}
        deadline = time.monotonic() + startup_timeout
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.lines.append(line)
            match = BANNER.search(line)
            if match:
                self.ports[{"tcp": "resp", "udp": "udp", "http": "admin"}[match[2]]] = int(match[4])
            if "no state file" in line or "state file " in line:
                return
        self.proc.kill()
        raise AssertionError("serve did not start:\n" + "".join(self.lines))

    def stop(self, sig: int = signal.SIGTERM) -> str:
        self.proc.send_signal(sig)
        out, _ = self.proc.communicate(timeout=30)
        self.lines.append(out)
        return "".join(self.lines)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("PYNQ_KV_ADMIN_TOKEN", "PYNQ_KV_REQUIREPASS", "PYNQ_KV_CONFIG", "PYNQ_KV_STATE"):
        env.pop(name, None)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    return env


@pytest.fixture
def served(env: dict[str, str], tmp_path: Path) -> Iterator[Served]:
    server = Served(["--rows", "256", "--rules", "16", "--state", str(tmp_path / "kv.npz"),
                     "serve", "--no-store", "--resp-port", "0", "--udp-port", "0", "--admin-port", "0",
                     "--admin-token", "t0k"], env)
    yield server
    if server.proc.poll() is None:
        server.proc.kill()
        server.proc.wait()


def resp(port: int, payload: bytes, expect_lines: int = 1) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        data = b""
        while data.count(b"\r\n") < expect_lines:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def memcached_udp(port: int, opcode: int, key: bytes = b"", extras: bytes = b"",
                  value: bytes = b"") -> bytes:
    """One binary request in one datagram; returns the reply datagram's first response."""
    body = extras + key + value
    header = struct.pack(">BBHBBHIIQ", 0x80, opcode, len(key), len(extras), 0, 0, len(body),
                         0x1234, 0)
    frame = struct.pack(">HHHH", 7, 0, 1, 0) + header + body
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(5)
        sock.sendto(frame, ("127.0.0.1", port))
        reply, _ = sock.recvfrom(65536)
    assert struct.unpack(">HHHH", reply[:8])[0] == 7  # request id echoed
    return reply[8:]


def http(port: int, path: str, method: str = "GET", body: dict | None = None,
         token: str | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_banner_names_every_front_end_and_backend(served: Served) -> None:
    text = "".join(served.lines)
    assert "backend=model" in text and "rows=256" in text
    assert set(served.ports) == {"resp", "udp", "admin"}
    assert all(port > 0 for port in served.ports.values())


def test_front_ends_share_one_engine(served: Served) -> None:
    assert resp(served.ports["resp"], b"PING\r\n") == b"+PONG\r\n"
    assert resp(served.ports["resp"], b"*3\r\n$3\r\nSET\r\n$5\r\nalpha\r\n$3\r\none\r\n") == b"+OK\r\n"
    # the same entry through memcached binary GET over UDP ...
    reply = memcached_udp(served.ports["udp"], 0x00, b"alpha")
    magic, opcode, _, extlen, _, status, total = struct.unpack(">BBHBBHI", reply[:12])
    assert (magic, opcode, status) == (0x81, 0x00, 0)
    assert reply[24 + extlen:24 + total] == b"one"
    # ... and through the admin API; a REST write is visible to RESP
    status, body = http(served.ports["admin"], "/v1/entries/alpha")
    assert status == 200 and body["value"] == "one"
    status, _ = http(served.ports["admin"], "/v1/entries/beta", "PUT", {"value": "two"}, token="t0k")
    assert status in (200, 201)
    assert resp(served.ports["resp"], b"GET beta\r\n", 2) == b"$3\r\ntwo\r\n"
    status, _ = http(served.ports["admin"], "/v1/entries/gamma", "PUT", {"value": "x"})
    assert status == 401  # mutating routes need the token
    status, health = http(served.ports["admin"], "/healthz")
    assert status == 200


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_graceful_stop_saves_and_restart_restores(served: Served, env: dict[str, str],
                                                  tmp_path: Path, sig: int) -> None:
    assert resp(served.ports["resp"], b"SET keep me\r\n") == b"+OK\r\n"
    log = served.stop(sig)
    assert served.proc.returncode == 0, log
    assert "shutting down" in log and "saved 1 entries" in log and "stopped" in log
    again = Served(["--state", str(tmp_path / "kv.npz"), "serve", "--no-store", "--resp-port", "0",
                    "--disable", "udp", "--disable", "admin"], env)
    try:
        assert "1 entries loaded" in "".join(again.lines)
        assert resp(again.ports["resp"], b"GET keep\r\n", 2) == b"$2\r\nme\r\n"
    finally:
        assert again.stop() and again.proc.returncode == 0


def test_busy_port_is_a_clear_start_up_error(env: dict[str, str]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "pynq_kv", "--rows", "64", "serve", "--no-store", "--disable", "udp",
             "--disable", "resp", "--admin-port", str(port)],
            capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert "cannot start" in proc.stderr and "in use" in proc.stderr


def test_non_loopback_bind_without_secrets_is_refused(env: dict[str, str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "pynq_kv", "serve", "--no-store", "--bind", "0.0.0.0"],
                          capture_output=True, text=True, timeout=60, env=env,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert "refusing to serve the admin API on 0.0.0.0" in proc.stderr


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_non_loopback_bind_without_udp_allow_list_starts_with_udp_off(
        env: dict[str, str]) -> None:
    """Issue 16: 0.0.0.0 with RESP's password, no --udp-allow: RESP served, UDP off and said."""
    port = free_udp_port()
    server = Served(["--rows", "64", "serve", "--no-store", "--bind", "0.0.0.0", "--requirepass", "pw",
                     "--resp-port", "0", "--udp-port", str(port), "--disable", "admin"], env)
    try:
        text = "".join(server.lines)
        assert set(server.ports) == {"resp"}
        assert "memcached/UDP is OFF: 0.0.0.0 is not loopback" in text
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.settimeout(0.5)
            probe.sendto(struct.pack(">HHHH", 1, 0, 1, 0) + b"version\r\n", ("127.0.0.1", port))
            with pytest.raises(OSError):  # refused (ICMP port unreachable) or silence
                probe.recvfrom(100)
    finally:
        assert server.stop() and server.proc.returncode == 0


def test_udp_admission_options_are_applied(env: dict[str, str]) -> None:
    """--udp-deny 127.0.0.2 --udp-allow 127.0.0.1: one loopback source answered, one dropped."""
    server = Served(["--rows", "64", "serve", "--no-store", "--resp-port", "0", "--udp-port", "0",
                     "--disable", "admin", "--udp-allow", "127.0.0.1/32",
                     "--udp-deny", "127.0.0.2"], env)
    try:
        text = "".join(server.lines)
        assert ("UDP admission (first match): deny 127.0.0.2/32, allow 127.0.0.1/32 x2, "
                "else deny") in text
        version = struct.pack(">HHHH", 5, 0, 1, 0) + b"version\r\n"
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as denied, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as allowed:
            denied.bind(("127.0.0.2", 0))
            denied.sendto(version, ("127.0.0.1", server.ports["udp"]))
            allowed.settimeout(10)
            allowed.sendto(version, ("127.0.0.1", server.ports["udp"]))
            reply = allowed.recvfrom(100)[0]
            # datagrams are answered in arrival order: a reply to 127.0.0.2 would be here now
            denied.setblocking(False)
            with pytest.raises(BlockingIOError):
                denied.recvfrom(100)
        assert reply == struct.pack(">HHHH", 5, 0, 1, 0) + b"VERSION pynq-kv-1\r\n"
    finally:
        assert server.stop() and server.proc.returncode == 0


def test_resp_limits_from_flags_and_config_file(env: dict[str, str], tmp_path: Path) -> None:
    """--maxclients caps clients with Redis' error; the file's [resp] table sets the others."""
    config = tmp_path / "serve.toml"
    config.write_text("[resp]\nmax_bulk_len = 16\n")
    server = Served(["--rows", "64", "serve", "--no-store", "--config", str(config), "--maxclients", "2",
                     "--resp-port", "0", "--disable", "udp", "--disable", "admin"], env)
    try:
        port = server.ports["resp"]
        first = socket.create_connection(("127.0.0.1", port), timeout=10)
        second = socket.create_connection(("127.0.0.1", port), timeout=10)
        with first, second:
            first.sendall(b"PING\r\n")
            assert first.recv(100) == b"+PONG\r\n"  # both accepted before the third knocks
            second.sendall(b"PING\r\n")
            assert second.recv(100) == b"+PONG\r\n"
            assert resp(port, b"PING\r\n") == b"-ERR max number of clients reached\r\n"
        set_k = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n"
        assert resp(port, set_k % (17, b"v" * 17)) == b"-ERR Protocol error: invalid bulk length\r\n"
        assert resp(port, set_k % (16, b"v" * 16)) == b"+OK\r\n"
    finally:
        assert server.stop() and server.proc.returncode == 0


# the virtual board's geometry of tests/test_net_board.py: its Verilated kv_top is then cached
BOARD_ARGS = ["--key-width", "288", "--value-width", "256", "--ways", "4", "--rows", "1024",
              "--stash", "8", "--rules", "16"]


def test_rtl_backend_with_udp_serves_the_virtual_board(env: dict[str, str], tmp_path: Path) -> None:
    """`serve --backend rtl --udp-port P`: UDP datagrams reach the Verilated kv_top's Ethernet
    port, and RESP writes go through its AXI4-Lite mailbox into the same RTL tables."""
    from pynq_kv.geometry import Geometry
    from pynq_kv.board import board_library

    board_library(Geometry(key_width=288, value_width=256, ways=4, rows=1024, stash=8, rules=16))
    server = Served(["--backend", "rtl", *BOARD_ARGS, "--state", str(tmp_path / "rtl.npz"),
                     "serve", "--no-store", "--resp-port", "0", "--udp-port", "0", "--disable", "admin"],
                    env, startup_timeout=300)
    try:
        text = "".join(server.lines)
        assert "backend=rtl" in text and "virtual board" in text
        assert resp(server.ports["resp"], b"SET alpha one\r\n") == b"+OK\r\n"
        reply = memcached_udp(server.ports["udp"], 0x00, b"alpha")
        _, opcode, _, extlen, _, status, total = struct.unpack(">BBHBBHI", reply[:12])
        assert (opcode, status) == (0x00, 0) and reply[24 + extlen:24 + total] == b"one"
        reply = memcached_udp(server.ports["udp"], 0x01, b"beta", struct.pack(">II", 0, 0), b"two")
        assert struct.unpack(">BBHBBH", reply[:8])[5] == 0  # SET stored by the RTL front-end
        assert resp(server.ports["resp"], b"GET beta\r\n", 2) == b"$3\r\ntwo\r\n"
        reply = memcached_udp(server.ports["udp"], 0x00, b"missing")
        assert struct.unpack(">BBHBBH", reply[:8])[5] == 1  # key not found
    finally:
        log = server.stop()
    assert server.proc.returncode == 0, log
