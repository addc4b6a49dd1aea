"""Real Redis tools against pynq-kv's RESP server: redis-cli as a client (one-shot, RESP3,
AUTH, commands from stdin, --pipe mass insertion), redis-benchmark with no errors (also against
the whole appliance, `pynq-kv serve`), and a benchmark run while 1,000 idle clients are
connected (served, memory bounded)."""

from __future__ import annotations

import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pynq_kv import Geometry
from pynq_kv.serve.resp import RespConfig
from resp_helpers import HOST, PynqServer, RawClient, encode_command, rss_bytes

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not (shutil.which("redis-cli") and shutil.which("redis-benchmark")),
                       reason="needs redis-cli and redis-benchmark (Debian: redis-tools)"),
]
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def server():
    srv = PynqServer(geometry=Geometry(rows=4096))
    yield srv
    srv.stop()


def cli(port: int, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(port), *args], input=stdin,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_redis_cli_one_shot_commands(server):
    port = server.port
    assert cli(port, "FLUSHALL") == "OK\n"
    assert cli(port, "PING") == "PONG\n"
    assert cli(port, "SET", "user:1", "alice") == "OK\n"
    assert cli(port, "GET", "user:1") == "alice\n"
    assert cli(port, "GET", "nope") == "\n"  # redis-cli prints nil as an empty line when piped
    assert cli(port, "MGET", "user:1", "nope") == "alice\n\n"
    assert cli(port, "DBSIZE") == "1\n"
    assert cli(port, "GET", "k" * 40).startswith("ERR key too long")
    # (redis-cli prints this error followed by an empty line, for redis-server too)
    assert cli(port, "NOSUCH") == "ERR unknown command 'NOSUCH', with args beginning with: \n\n"
    assert cli(port, "KV.RULE.ADD", "PRIORITY", "1", "VALUE", "guest", "PREFIX", "user:") == "1\n"
    assert cli(port, "KV.MATCH", "user:2") == "rule\nguest\n1\n"
    assert cli(port, "-3", "KV.MATCH", "user:1") == "kind exact\nvalue alice\nrule_id \n"
    assert cli(port, "--json", "KV.MATCH", "user:2") == '{"kind":"rule","value":"guest","rule_id":1}\n'
    info = cli(port, "INFO", "engine")
    assert "# Engine" in info and "backend:model" in info and "rules_installed:1" in info
    assert re.search(r"^used:1\r?$", info, re.M)


def test_redis_cli_reads_commands_from_stdin(server):
    out = cli(server.port, stdin="FLUSHDB\nSET a 1\nGET a\nDEL a\nEXISTS a\n")
    assert out == "OK\nOK\n1\n1\n0\n"


def test_redis_cli_tty_style_output(server):
    cli(server.port, "SET", "x", "1")
    done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(server.port), "--no-raw", "MGET", "x", "y"],
                          capture_output=True, text=True, timeout=30)
    assert done.stdout == '1) "1"\n2) (nil)\n'


def test_redis_cli_pipe_mass_insertion(server):
    cli(server.port, "FLUSHALL")
    payload = b"".join(encode_command("SET", f"mass:{i}", f"v{i}") for i in range(5000))
    done = subprocess.run(["redis-cli", "-h", HOST, "-p", str(server.port), "--pipe"], input=payload,
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"errors: 0, replies: 5000" in done.stdout
    assert cli(server.port, "DBSIZE") == "5000\n"
    assert cli(server.port, "GET", "mass:4999") == "v4999\n"


def test_redis_cli_auth():
    srv = PynqServer(RespConfig(requirepass="sesame"))
    try:
        denied = subprocess.run(["redis-cli", "-h", HOST, "-p", str(srv.port), "GET", "a"],
                                capture_output=True, text=True, timeout=30)
        assert "NOAUTH Authentication required." in denied.stdout + denied.stderr
        assert cli(srv.port, "-a", "sesame", "--no-auth-warning", "SET", "a", "1") == "OK\n"
        assert cli(srv.port, "--user", "default", "--pass", "sesame", "--no-auth-warning", "GET", "a") == "1\n"
    finally:
        srv.stop()


def run_benchmark(port: int, requests: int, clients: int = 50, pipeline: int = 1) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["redis-benchmark", "-h", HOST, "-p", str(port), "-t", "ping,set,get,mset", "-n", str(requests),
         "-c", str(clients), "-r", "1000", "-P", str(pipeline), "--csv"],
        capture_output=True, text=True, timeout=120)


def test_redis_benchmark_runs_without_errors(server):
    cli(server.port, "FLUSHALL")
    before = server.stats()
    for pipeline in (1, 16):
        done = run_benchmark(server.port, 2000, pipeline=pipeline)
        assert done.returncode == 0, done.stderr
        assert "error" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
        tests = [line.split(",")[0].strip('"') for line in done.stdout.splitlines()[1:]]
        assert tests == ["PING_INLINE", "PING_MBULK", "SET", "GET", "MSET (10 keys)"]
    after = server.stats()
    assert after["total_error_replies"] == before["total_error_replies"]
    assert after["protocol_errors"] == before["protocol_errors"]
    assert after["total_commands_processed"] - before["total_commands_processed"] >= 2 * 5 * 2000
    used = int(cli(server.port, "DBSIZE"))
    assert 500 < used <= 1000  # -r 1000: keys key:000000000000 .. key:000000000999
    keys = [f"key:{i:012d}" for i in range(1000)]
    values = cli(server.port, "MGET", *keys).split("\n")[:-1]
    assert sum(len(v) == 3 for v in values) == used  # every key written holds a 3-byte value (-d 3)


def test_thousand_idle_clients_and_a_benchmark():
    """1,000 idle connections plus a redis-benchmark run: all served, server memory bounded."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"needs 1200 file descriptors, the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(4096, hard if hard > 0 else 4096)), hard))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "pynq_kv.serve.resp", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard)))
    idle: list[socket.socket] = []
    try:
        port = int(proc.stdout.readline().split()[1])
        probe = RawClient(port)
        assert probe.call("PING") == b"PONG"
        start_rss = rss_bytes(proc.pid)
        for _ in range(1000):
            idle.append(socket.create_connection((HOST, port), timeout=10))
        deadline = time.monotonic() + 20
        while int(probe.call("INFO", "clients").split(b"connected_clients:")[1].split(b"\r")[0]) < 1001:
            assert time.monotonic() < deadline, "the server did not accept 1,000 connections"
            time.sleep(0.05)
        done = run_benchmark(port, 5000)
        assert done.returncode == 0 and "error" not in (done.stdout + done.stderr).lower(), done.stderr
        for sock in idle[::50]:  # idle clients are still served
            sock.sendall(b"PING\r\n")
            assert sock.recv(100) == b"+PONG\r\n"
        grown = rss_bytes(proc.pid) - start_rss
        assert grown < 64 * 1024 * 1024, f"server grew by {grown / 2**20:.1f} MiB"
        probe.close()
    finally:
        for sock in idle:
            sock.close()
        proc.terminate()
        proc.wait(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def test_redis_benchmark_against_pynq_kv_serve():
    """The issue's check on the appliance itself: `pynq-kv serve` (model backend, every
    front-end up) takes redis-benchmark -t ping,set,get,mset with no errors."""
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "pynq_kv", "serve", "--no-store", "--resp-port", str(port), "--udp-port",
         str(_free_port()), "--admin-port", str(_free_port()), "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read()
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "pynq-kv serve did not listen"
                time.sleep(0.1)
        for pipeline in (1, 16):
            done = run_benchmark(port, 2000, pipeline=pipeline)
            assert done.returncode == 0, done.stderr
            assert "error" not in (done.stdout + done.stderr).lower(), done.stdout + done.stderr
            tests = [line.split(",")[0].strip('"') for line in done.stdout.splitlines()[1:]]
            assert tests == ["PING_INLINE", "PING_MBULK", "SET", "GET", "MSET (10 keys)"]
        stats = dict(line.strip().split(":", 1) for line in cli(port, "INFO", "stats").splitlines()
                     if ":" in line)
        assert stats["total_error_replies"] == "0" and stats["protocol_errors"] == "0"
        assert int(stats["total_commands_processed"]) >= 2 * 5 * 2000
        used = int(cli(port, "DBSIZE"))
        assert 500 < used <= 1000
        values = cli(port, "MGET", *[f"key:{i:012d}" for i in range(1000)]).split("\n")[:-1]
        assert sum(len(v) == 3 for v in values) == used
    finally:
        proc.terminate()
        assert proc.wait(30) == 0
