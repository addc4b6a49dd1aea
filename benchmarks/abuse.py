"""The fault and abuse suite at full scale (issue 16): every scenario against a real
`pynq-kv serve` (model backend) on loopback, one server per scenario.

Prints one JSON object: for each scenario the inputs sent, crashes, known keys lost or
resurrected, the worst stall of a control client (PING over RESP, GET /healthz over the admin
API, every ~10 ms) in ms, with and without the time the server waited for a CPU, idle and peak
RSS, and whatever the scenario measured; then a summary
of the targets each missed ("passed": false if any did; like benchmarks/resp.py, the exit status
stays 0 then, so `make bench` goes on to the other benchmarks).

The scenarios and their registry are tests/abuse_scenarios.py (tests/test_abuse.py runs the
same ones at small scale); the frame (server, known keys, control client, RSS) is
tests/abuse_support.py.

    python benchmarks/abuse.py                   # full scale (several minutes)
    python benchmarks/abuse.py --small           # the scale of make test
    python benchmarks/abuse.py --only resp_fuzz --only corrupt_files
    python benchmarks/abuse.py --server-stall    # on a machine other work shares

The 100 ms stall target is held against max_control_stall_ms, what the control client saw, as
issue 16 states it; on a machine whose CPUs other work shares, --server-stall holds it against
max_server_stall_ms instead (the stall less the time the server or the probe waited for a CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from abuse_scenarios import REGISTRY  # noqa: E402  (tests/abuse_scenarios.py)
from abuse_support import STALL_TARGET_MS, run_scenario  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", action="store_true", help="the small scale of make test")
    parser.add_argument("--server-stall", action="store_true",
                        help="hold the stall target against max_server_stall_ms (CPU waits left "
                             "out) instead of max_control_stall_ms")
    parser.add_argument("--only", action="append", choices=sorted(REGISTRY), metavar="NAME",
                        help=f"run only this scenario (repeatable): {', '.join(REGISTRY)}")
    args = parser.parse_args()
    names = args.only or list(REGISTRY)
    stall = "max_server_stall_ms" if args.server_stall else "max_control_stall_ms"
    results = {}
    with tempfile.TemporaryDirectory(prefix="pynq-kv-abuse-") as tmp:
        for name in names:
            results[name] = run_scenario(REGISTRY[name], args.small, Path(tmp) / name, stall)
            print(f"{name}: {'ok' if not results[name]['failures'] else 'FAILED'} "
                  f"({results[name]['seconds']} s)", file=sys.stderr)
    failed = {name: r["failures"] for name, r in results.items() if r["failures"]}
    summary = {
        "passed": not failed,
        "failed": failed,
        "targets": {"keys_lost": 0, "keys_resurrected": 0, "crashes": 0,
                    stall: STALL_TARGET_MS,
                    "peak_rss_mb": "<= 2 x idle_rss_mb + client_memory_mb (the server's "
                                   "maxmemory_clients; client_memory_limit says whence)",
                    "amplification_max": "<= amplification_bound"},
        "amplification_max": max((r["amplification_max"] for r in results.values()
                                  if "amplification_max" in r), default=None),
        "max_control_stall_ms": max((r["max_control_stall_ms"] for r in results.values()
                                     if "max_control_stall_ms" in r), default=None),
        "max_server_stall_ms": max((r["max_server_stall_ms"] for r in results.values()
                                    if "max_server_stall_ms" in r), default=None),
    }
    print(json.dumps({
        "benchmark": "fault and abuse suite, pynq-kv serve (model backend) on 127.0.0.1",
        "scale": "small" if args.small else "full",
        "scenarios": results,
        "summary": summary,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
    }, indent=2))


if __name__ == "__main__":
    main()
