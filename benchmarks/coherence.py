"""How long the engine may answer a value another Redis client has already replaced.

`pynq-kv serve --store private` runs as a subprocess (loopback, free port). A key is written
through pynq-kv and read until the engine holds it (INFO hosttier counts the fill); then a
second client, connected straight to the private redis-server's unix socket, overwrites it, and
a pynq-kv client reads it in a tight loop until it sees the new value: that time is the
invalidation window for a change made behind pynq-kv's back (docs/hosttier.md, "Coherence").
Writes through pynq-kv itself have no window: their keys leave the engine before the reply.
Prints JSON: samples, p50/p99/max window in ms, and the reads that saw the old value.

    python benchmarks/coherence.py            # 2,000 samples
    python benchmarks/coherence.py --quick    # 200 samples
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_serve(data_dir: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pynq_kv", "serve", "--store", "private", "--data-dir", data_dir,
         "--resp-port", str(port), "--disable", "admin", "--disable", "udp"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if redis.Redis(port=port, socket_timeout=1).ping():
                return proc
        except redis.ConnectionError:
            if proc.poll() is not None:
                raise SystemExit(f"serve exited: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("serve did not start in 60 s")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="200 samples")
    args = parser.parse_args()
    samples = 200 if args.quick else args.samples
    with tempfile.TemporaryDirectory(prefix="pynq-kv-coherence-") as data_dir:
        port = free_port()
        proc = start_serve(data_dir, port)
        try:
            mine = redis.Redis(port=port)
            other = redis.Redis(unix_socket_path=os.path.join(data_dir, "redis.sock"))
            windows: list[float] = []
            stale_reads = 0
            for i in range(samples):
                key = f"c:{i % 64}"
                before = mine.info("hosttier")["hosttier_fills_applied"]
                mine.set(key, f"old{i}")
                while mine.info("hosttier")["hosttier_fills_applied"] == before:
                    pass  # the SET's fill is in the engine once it is counted
                new = f"new{i}".encode()
                other.set(key, new)
                start = time.perf_counter()
                while mine.get(key) != new:
                    stale_reads += 1
                windows.append(time.perf_counter() - start)
            info = mine.info("hosttier")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
    print(json.dumps({
        "samples": samples,
        "window_ms": {"p50": round(percentile(windows, 0.5) * 1000, 3),
                      "p99": round(percentile(windows, 0.99) * 1000, 3),
                      "max": round(max(windows) * 1000, 3)},
        "stale_reads": stale_reads,
        "invalidation_messages": info["hosttier_invalidation_messages"],
        "method": "write via a second client on the private redis' unix socket, then read "
                  "through pynq-kv (RESP, loopback) until the new value; the window includes "
                  "one pynq-kv round trip",
    }, indent=2))


if __name__ == "__main__":
    main()
