"""redis-benchmark against `pynq-kv serve` (model backend) and redis-server, side by side.

Two parts, each with both servers in this one run, on loopback, each in its own process, every
test run against both in alternation (redis-server, then pynq-kv) for several rounds, so load
from other work on these noisy 2-core machines falls on both alike; each figure is the best of
its rounds. redis-benchmark 7 exits non-zero at the first error reply, which stops this script.

- "host_tier" (issue 15): redis-benchmark's whole default suite (every test it runs without -t,
  tests/redis_benchmark.py), 50 clients, -P 1 and -P 16, against `pynq-kv serve --store private
  --appendfsync P` (the engine in front of its private redis-server) and against a plain
  redis-server with the same AOF setting (`--appendonly yes --appendfsync P`), both on TCP
  loopback. Its `ratios` (also at the top of the JSON) map each test and depth ("GET/P1",
  "MSET/P16", ...) to pynq-kv's requests/s over redis-server's. Afterwards both must report no
  error replies (INFO stats). With --relay a bare byte relay in front of that redis-server
  (benchmarks/_relay.py) runs in the same rounds too, and `relay_ratios` give the scale: what
  an extra hop with no work in it reaches. With --tracking-bound a second plain redis-server
  with the same AOF setting, which one connection tracks in broadcast mode as pynq-kv's
  coherence needs (`CLIENT TRACKING on BCAST`), runs in the same rounds with redis-benchmark
  straight into it, and `tracking_bound_ratios` give the ceiling: what a front-end costing
  nothing would reach with the bookkeeping that tracking asks of Redis.
- "memory_only": the figures this script measured before the host tier: GET and SET against
  `pynq-kv serve` memory-only (its default, `--no-store`, every front-end running) and a
  redis-server without persistence. Afterwards both servers must report no error replies, hold
  (nearly) all KEYSPACE keys (DBSIZE) and return a 3-byte value (redis-benchmark's -d 3) for
  every one of them (MGET); its "checks" shows what was found.

Prints one JSON object.

    python benchmarks/resp.py                     # both parts, full size (about 5 minutes)
    python benchmarks/resp.py --quick             # fewer requests, one round: a smoke test
    python benchmarks/resp.py --part host_tier --suite-requests 5000
    python benchmarks/resp.py --event-loop asyncio  # pynq-kv serve on asyncio's own loop
    python benchmarks/resp.py --part host_tier --relay  # and a bare relay beside them
    python benchmarks/resp.py --part host_tier --tracking-bound  # and the tracked ceiling
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
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
TESTS_DIR = ROOT / "tests"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from crash_support import Served  # noqa: E402  (tests/crash_support.py)
from pynq_kv.serve.eventloop import EVENT_LOOPS  # noqa: E402
from redis_benchmark import DEFAULT_SUITE, run_suite  # noqa: E402  (tests/redis_benchmark.py)

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


def start_redis(tmp: Path, appendfsync: str = "") -> tuple[subprocess.Popen, int]:
    """A plain redis-server on a free loopback port: no persistence, or AOF with appendfsync."""
    port = free_port()
    aof = ["--appendonly", "yes", "--appendfsync", appendfsync] if appendfsync else \
        ["--appendonly", "no"]
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", *aof,
         "--dir", str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(port)
    return proc, port


def start_pynq_kv(event_loop: str) -> tuple[subprocess.Popen, int]:
    """`pynq-kv serve` memory-only (model backend, default geometry), on free ports."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pynq_kv", "serve", "--no-store", "--resp-port", str(port),
         "--udp-port", str(free_port()), "--admin-port", str(free_port()),
         "--log-level", "warning", "--event-loop", event_loop],
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


def error_replies(port: int) -> int:
    """INFO stats' total_error_replies (SystemExit if the server does not count them)."""
    count = info_fields(port, "stats").get("total_error_replies")
    if count is None:
        raise SystemExit(f"server on port {port} reports no total_error_replies")
    return int(count)


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


def memory_only(rounds: int, scale: int, event_loop: str) -> dict[str, Any]:
    """GET and SET, -P 1 and -P 16, memory-only pynq-kv against redis-server without AOF."""
    tests = [  # name, redis-benchmark test, requests, pipeline
        ("set_p1", "set", 100_000 // scale, 1),
        ("get_p1", "get", 100_000 // scale, 1),
        ("set_p16", "set", 800_000 // scale, 16),
        ("get_p16", "get", 800_000 // scale, 16),
    ]
    with tempfile.TemporaryDirectory(prefix="pynq-kv-bench-") as tmp:
        redis, redis_port = start_redis(Path(tmp))
        pynq, pynq_port = start_pynq_kv(event_loop)
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
        "benchmark": "redis-benchmark -c 50 -r 10000 -d 3, pynq-kv serve memory-only (model "
                     "backend, --no-store) vs redis-server without persistence",
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
    return result


def start_relay(upstream_port: int) -> tuple[subprocess.Popen, int]:
    """benchmarks/_relay.py in front of upstream_port, on a free loopback port."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_relay.py")),
                             str(port), str(upstream_port)])
    wait_port(port)
    return proc, port


def track_in_broadcast(port: int) -> redis.Redis:
    """One connection of the redis-server on port tracking every key in broadcast mode, as
    pynq-kv's shared connection does (pynq_kv/tier.py), so Redis records each key any client
    writes and builds the invalidation message for it. The invalidations go to a connection
    closed at once: Redis then sends them nowhere (RESP2 tracker, redirect broken), so nothing
    needs reading, and the cost left is Redis' own. pynq-kv's NOLOOP adds a walk over those keys
    to leave out its own, so this is a little cheaper than what pynq-kv's Redis does."""
    target = redis.Redis(port=port, protocol=2, single_connection_client=True)
    tracker = redis.Redis(port=port, protocol=2, single_connection_client=True)
    tracker.client_tracking_on(clientid=target.client_id(), bcast=True)
    target.close()
    return tracker


def tracking_in_effect(tracker: redis.Redis) -> None:
    """SystemExit unless the tracker still tracks in broadcast mode and Redis found its redirect
    gone: it built invalidations (for the writes of the suite) and had nowhere to send them."""
    info = tracker.execute_command("CLIENT", "TRACKINGINFO")
    flags = {bytes(f) for f in info[info.index(b"flags") + 1]}
    if not {b"on", b"bcast", b"broken_redirect"} <= flags:
        raise SystemExit(f"the tracked redis-server's tracking is not what was asked: {info}")


def host_tier(appendfsync: str, rounds: int, requests: int, event_loop: str,
              relay: bool = False, tracking_bound: bool = False) -> dict[str, Any]:
    """redis-benchmark's default suite, -P 1 (requests) and -P 16 (4 x requests), 50 clients:
    `pynq-kv serve --store private` against redis-server, both with AOF appendfsync (and with
    relay, a bare byte relay in front of that redis-server; with tracking_bound, a second
    redis-server tracked in broadcast mode)."""
    depths = {"P1": (1, requests), "P16": (16, 4 * requests)}
    best: dict[str, dict[str, float]] = {"pynq_kv": {}, "redis_server": {}, "relay": {},
                                         "tracked_redis": {}}
    with tempfile.TemporaryDirectory(prefix="pynq-kv-bench-") as tmp:
        plain, redis_port = start_redis(Path(tmp), appendfsync)
        served = relayed = tracked = tracker = None
        try:
            served = Served(Path(tmp) / "pynq-kv-data", appendfsync,
                            extra=("--event-loop", event_loop))
            servers = {"redis_server": redis_port, "pynq_kv": served.resp_port}
            if relay:
                relayed, servers["relay"] = start_relay(redis_port)
            if tracking_bound:
                (Path(tmp) / "tracked").mkdir()
                tracked, servers["tracked_redis"] = start_redis(Path(tmp) / "tracked",
                                                                appendfsync)
                tracker = track_in_broadcast(servers["tracked_redis"])
            # the count before: pynq-kv's INFO is its Redis', whose own connections (redis-py's
            # CLIENT SETINFO, which Redis 7.0 does not know) have error replies already
            before = {server: error_replies(port) for server, port in servers.items()}
            for _ in range(rounds):
                for depth, (pipeline, n) in depths.items():
                    for server, port in servers.items():
                        for test, rps in run_suite(port, requests=n, clients=CLIENTS,
                                                   pipeline=pipeline, keyspace=KEYSPACE).items():
                            name = f"{test}/{depth}"
                            best[server][name] = max(best[server].get(name, 0.0), rps)
            errors = {server: error_replies(port) - before[server]
                      for server, port in servers.items()}
            if any(errors.values()):
                raise SystemExit(f"error replies counted after the suite: {errors}")
            if tracker is not None:
                tracking_in_effect(tracker)
        finally:
            if served is not None:
                served.stop()
            if relayed is not None:
                relayed.kill()
                relayed.wait()
            if tracker is not None:
                tracker.close()
            for proc in (plain, tracked):
                if proc is None:
                    continue
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
    names = [f"{test}/{depth}" for depth in depths for test in DEFAULT_SUITE]
    scales = {}  # the scales asked for: key prefix in the JSON, the server measured
    for prefix, server, wanted in (("relay", "relay", relay),
                                   ("tracking_bound", "tracked_redis", tracking_bound)):
        if wanted:
            found = best[server]
            scales[f"{prefix}_rps"] = {name: round(found[name]) for name in names}
            scales[f"{prefix}_ratios"] = {
                name: round(found[name] / best["redis_server"][name], 3) for name in names}
    return {
        "benchmark": f"redis-benchmark default suite -c {CLIENTS} -r {KEYSPACE} -d 3, pynq-kv "
                     f"serve --store private --appendfsync {appendfsync} (model backend) vs "
                     f"redis-server --appendonly yes --appendfsync {appendfsync}, TCP loopback",
        "appendfsync": appendfsync,
        "rounds": rounds,
        "requests": {depth: n for depth, (_, n) in depths.items()},
        "pynq_kv_rps": {name: round(best["pynq_kv"][name]) for name in names},
        "redis_server_rps": {name: round(best["redis_server"][name]) for name in names},
        "ratios": {name: round(best["pynq_kv"][name] / best["redis_server"][name], 3)
                   for name in names},
        "targets": {"GET": 0.7, "other": 0.5},
        "error_replies": errors,
        **scales,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="memory-only rounds (default 3)")
    parser.add_argument("--part", choices=("both", "host_tier", "memory_only"), default="both")
    parser.add_argument("--appendfsync", choices=("always", "everysec", "no"), default="everysec",
                        help="the AOF policy of both servers in the host-tier part")
    parser.add_argument("--suite-requests", type=int, default=20_000,
                        help="requests per suite test at -P 1 (x4 at -P 16; default 20000)")
    parser.add_argument("--suite-rounds", type=int, default=1)
    parser.add_argument("--event-loop", choices=EVENT_LOOPS, default="auto",
                        help="pynq-kv serve's --event-loop (default auto: uvloop when installed)")
    parser.add_argument("--relay", action="store_true",
                        help="host-tier part: a bare byte relay in the same rounds (relay_ratios)")
    parser.add_argument("--tracking-bound", action="store_true",
                        help="host-tier part: a redis-server tracked in broadcast mode in the same "
                             "rounds (tracking_bound_ratios)")
    args = parser.parse_args()
    if not shutil.which("redis-server") or not shutil.which("redis-benchmark"):
        raise SystemExit("needs redis-server and redis-benchmark (Debian: redis-server, redis-tools)")
    result: dict[str, Any] = {}
    if args.part in ("both", "host_tier"):
        requests = args.suite_requests // 10 if args.quick else args.suite_requests
        result["host_tier"] = host_tier(args.appendfsync, 1 if args.quick else args.suite_rounds,
                                        requests, args.event_loop, args.relay,
                                        args.tracking_bound)
        result["ratios"] = result["host_tier"]["ratios"]
    if args.part in ("both", "memory_only"):
        result["memory_only"] = memory_only(1 if args.quick else args.rounds,
                                            10 if args.quick else 1, args.event_loop)
    result["event_loop"] = args.event_loop
    result["date"] = time.strftime("%Y-%m-%d %H:%M:%S %z")
    result["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                         "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
