"""redis-benchmark against `pynq-kv serve` (model backend) and redis-server, side by side.

Both servers run in this one run, on loopback, each in its own process — pynq-kv as the whole
appliance (`pynq-kv serve`, every front-end on a free port) — and every test is run against
both in alternation (redis-server, then pynq-kv) for several rounds, so load from other work on
these noisy 2-core machines falls on both alike; each figure is the best of its rounds.
Prints one JSON object: requests/s of both, and pynq-kv / redis-server for GET and SET,
unpipelined (-P 1) and pipelined (-P 16), 50 clients.

The figures only count if the work was done: redis-benchmark (7.x) exits non-zero at the first
error reply, which stops this script; afterwards both servers must report no error replies
(INFO stats), hold (nearly) all KEYSPACE keys (DBSIZE), and return a 3-byte value
(redis-benchmark's -d 3) for every one of them (MGET); the JSON's "checks" shows what was found.

    python benchmarks/resp.py            # full run (about a minute)
    python benchmarks/resp.py --quick    # fewer requests, one round: a smoke test
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYSPACE = 10000  # -r: keys key:000000000000 .. fit the default table (32776 slots) at 31 %
CLIENTS = 50


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on port {port} did not come up")


def start_redis(tmp: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
         "no", "--dir", str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def start_pynq_kv() -> tuple[subprocess.Popen, int]:
    """`pynq-kv serve` with its defaults (model backend, default geometry), on free ports."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pynq_kv", "serve", "--resp-port", str(port),
         "--udp-port", str(free_port()), "--admin-port", str(free_port()),
         "--log-level", "warning"],
        env=env)
    wait_port(port, timeout=60)
    if proc.poll() is not None:
        raise SystemExit(f"pynq-kv serve exited with {proc.returncode}")
    return proc, port


def cli(port: int, *args: str) -> str:
    done = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *args],
                          capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise SystemExit(f"redis-cli {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def info_fields(port: int, section: str) -> dict[str, str]:
    lines = cli(port, "INFO", section).splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line and not line.startswith("#"))


def check(port: int) -> dict[str, object]:
    """What the server holds and counted after the runs; SystemExit if the work was not done."""
    stats = info_fields(port, "stats")
    keys = [f"key:{i:012d}" for i in range(KEYSPACE)]
    values = cli(port, "MGET", *keys).split("\n")[:-1]
    found = {
        "dbsize": int(cli(port, "DBSIZE")),
        "keys_with_3_byte_values": sum(len(v) == 3 for v in values),  # -d 3 (random bytes)
        "total_error_replies": int(stats.get("total_error_replies", -1)),
        "total_commands_processed": int(stats["total_commands_processed"]),
        "keyspace_hits": int(stats["keyspace_hits"]),
        "keyspace_misses": int(stats["keyspace_misses"]),
    }
    # -r picks keys at random: after --quick's 90,000 SETs a key or two may never have been set
    if (found["dbsize"] < 0.999 * KEYSPACE or found["keys_with_3_byte_values"] != found["dbsize"]
            or found["total_error_replies"] != 0):
        raise SystemExit(f"server on port {port} did not do the work: {found}")
    return found


def bench(port: int, test: str, requests: int, pipeline: int) -> tuple[float, str]:
    """requests/s of one redis-benchmark test, and anything it reported besides figures."""
    cmd = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-t", test, "-n", str(requests),
           "-c", str(CLIENTS), "-r", str(KEYSPACE), "-P", str(pipeline), "-d", "3", "--csv"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    rows = list(csv.reader(io.StringIO(done.stdout)))
    figures = [r for r in rows if len(r) >= 2 and r[0] != "test"]
    if done.returncode or not figures:
        raise SystemExit(f"redis-benchmark failed ({done.returncode}): {done.stderr.strip()}")
    return float(figures[0][1]), done.stderr.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise SystemExit("needs redis-server and redis-benchmark (Debian: redis-server, redis-tools)")
    rounds = 1 if args.quick else args.rounds
    scale = 10 if args.quick else 1
    tests = [  # name, redis-benchmark test, requests, pipeline
        ("set_p1", "set", 100_000 // scale, 1),
        ("get_p1", "get", 100_000 // scale, 1),
        ("set_p16", "set", 800_000 // scale, 16),
        ("get_p16", "get", 800_000 // scale, 16),
    ]
    with tempfile.TemporaryDirectory(prefix="pynq-kv-bench-") as tmp:
        redis, redis_port = start_redis(Path(tmp))
        pynq, pynq_port = start_pynq_kv()
        servers = {"redis_server": redis_port, "pynq_kv": pynq_port}
        best: dict[str, dict[str, float]] = {name: {} for name in servers}
        remarks: list[str] = []
        try:
            for _ in range(rounds):
                for name, test, requests, pipeline in tests:
                    for server, port in servers.items():
                        rps, stderr = bench(port, test, requests, pipeline)
                        best[server][name] = max(best[server].get(name, 0.0), rps)
                        if stderr:
                            remarks.append(f"{server} {name}: {stderr}")
            checks = {server: check(port) for server, port in servers.items()}
        finally:
            for proc in (redis, pynq):
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
    result = {
        "benchmark": "redis-benchmark -c 50 -r 10000 -d 3, pynq-kv serve (model backend) vs "
                     "redis-server",
        "clients": CLIENTS,
        "keyspace": KEYSPACE,
        "rounds": rounds,
        "requests": {name: requests for name, _, requests, _ in tests},
        "pynq_kv_rps": {k: round(v) for k, v in best["pynq_kv"].items()},
        "redis_server_rps": {k: round(v) for k, v in best["redis_server"].items()},
    }
    for name, *_ in tests:
        result[f"ratio_{name.split('_')[0]}_{name.split('_')[1]}"] = round(
            best["pynq_kv"][name] / best["redis_server"][name], 3)
    result["target_ratio"] = 0.5
    result["errors"] = remarks
    result["checks"] = checks
    result["date"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
