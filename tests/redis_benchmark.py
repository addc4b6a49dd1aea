"""redis-benchmark's default suite (every test it runs without -t), with zero errors required.

Used by tests/test_crash.py (a tiny run through `pynq-kv serve --store private`) and
benchmarks/resp.py (the ratios against redis-server). redis-benchmark 7 exits non-zero and writes
"Error from server: ..." at the first error reply; either, or a test of the suite missing from
its output, is a SuiteError.
"""

from __future__ import annotations

import csv
import io
import subprocess

# The tests redis-benchmark 7.0 runs by default, by the first word of its CSV names ("MSET (10
# keys)" is MSET). It also runs a second LPUSH to fill the list LRANGE reads; that row is the
# same command and is left out of the figures.
DEFAULT_SUITE = ("PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "LPUSH", "RPUSH", "LPOP",
                 "RPOP", "SADD", "HSET", "SPOP", "ZADD", "ZPOPMIN", "LRANGE_100", "LRANGE_300",
                 "LRANGE_500", "LRANGE_600", "MSET")
HOST = "127.0.0.1"


class SuiteError(AssertionError):
    """redis-benchmark reported an error, failed, or skipped a test of the suite."""


def run_suite(port: int, *, requests: int, clients: int = 50, pipeline: int = 1,
              keyspace: int = 10000, data_size: int = 3, timeout: float = 1800.0
              ) -> dict[str, float]:
    """Requests/s of every DEFAULT_SUITE test against the server on HOST:port."""
    cmd = ["redis-benchmark", "-h", HOST, "-p", str(port), "-n", str(requests), "-c", str(clients),
           "-P", str(pipeline), "-r", str(keyspace), "-d", str(data_size), "--csv"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    if done.returncode or errors:
        raise SuiteError(f"redis-benchmark -P {pipeline} against port {port} exited "
                         f"{done.returncode}: {(errors or done.stderr.splitlines())[:3]}")
    figures: dict[str, float] = {}
    for row in csv.reader(io.StringIO(done.stdout)):
        if len(row) < 2 or row[0] == "test":
            continue
        figures.setdefault(row[0].split()[0], float(row[1]))
    missing = [test for test in DEFAULT_SUITE if test not in figures]
    if missing:
        raise SuiteError(f"redis-benchmark -P {pipeline} did not report {missing}")
    return {test: figures[test] for test in DEFAULT_SUITE}
