"""Crash safety at scale: `pynq-kv serve --store private` killed under write load, restarted, checked.

The harness is tests/crash_support.py (the same one `make test` runs small): redis-py threads
write SET, INCR, LPUSH, MSET and HSET through serve's RESP port, each write recorded only once
acknowledged; at a random moment the appliance is killed with SIGKILL, restarted on the same
data dir, and every acknowledged write of every cycle so far is looked up in Redis, every string
key read through pynq-kv, and every engine entry compared with Redis. Kills alternate between
the two kinds docs/hosttier.md ("Crash safety") defines: "serve" (SIGKILL of serve alone; its
redis-server must die with it, shutting down cleanly) and "group" (SIGKILL of redis-server and
serve together: Redis flushes nothing).

For each --appendfsync policy (default: always, then everysec) at least --kills kills and
--writes acknowledged writes. Prints one JSON object: `kills`, `acknowledged` (totals),
`lost_always` (acknowledged writes missing after the `always` runs: must be 0; likewise
`lost_everysec`, `lost_no`),
`max_loss_window_s` (everysec: how long before the kill the oldest lost acknowledged write was
acknowledged) against `loss_bound_s`, and per policy the details. Exits 1 when a figure is out
of bounds, a redis-server outlived serve, or any check failed.

    python benchmarks/crash.py                       # >= 20 kills, >= 100,000 writes per policy
    python benchmarks/crash.py --kills 4 --writes 5000 --appendfsync everysec
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

from crash_support import KILLS, VIRTUAL_BOARD, run_crashes  # noqa: E402  (tests/crash_support.py)

# everysec: Redis documents "you may lose 1 second of data"; while an fsync is still running
# it postpones writing the AOF buffer for up to 2 more seconds (aof.c), acknowledging meanwhile.
LOSS_BOUND_S = 2.0
# The virtual board: a SET the RTL acknowledged reaches Redis when the host drains the change log
# (every 2 ms when idle); a kill loses what was not drained yet. The bound the tests hold it to.
BOARD_LOSS_BOUND_S = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--appendfsync", nargs="+", choices=("always", "everysec", "no"),
                        default=["always", "everysec"])
    parser.add_argument("--kills", type=int, default=20, help="kills per policy (default 20)")
    parser.add_argument("--writes", type=int, default=100_000,
                        help="acknowledged writes per policy, at least (default 100000)")
    parser.add_argument("--threads", type=int, default=6, help="load threads (default 6)")
    parser.add_argument("--kill", choices=(*KILLS, "both"), default="both",
                        help="which kind of kill (default: alternate serve and group)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tmp", type=Path, default=None,
                        help="where the data dirs go (default: the system's temporary folder; "
                             "use a real disk: fsync on tmpfs costs nothing)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--virtual-board", action="store_true",
                        help="also a run of memcached SETs on the virtual board (--backend rtl), "
                             "drained into Redis through the change log, at appendfsync always")
    args = parser.parse_args()
    if args.kills < 1 or args.writes < 1 or args.threads < 1:
        parser.error("--kills, --writes and --threads must be at least 1")
    kinds = KILLS if args.kill == "both" else (args.kill,)

    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    runs = {}
    for policy in args.appendfsync:
        with tempfile.TemporaryDirectory(prefix="pynq-kv-crash-", dir=args.tmp) as tmp:
            log(f"== appendfsync {policy}")
            report = run_crashes(Path(tmp) / "data", appendfsync=policy, kills=args.kills,
                                 min_acknowledged=args.writes, threads=args.threads, kinds=kinds,
                                 seed=args.seed, log=log)
        runs[policy] = asdict(report)
        runs[policy]["acknowledged_per_s_under_load"] = round(report.acknowledged
                                                              / report.load_seconds)
    if args.virtual_board:
        with tempfile.TemporaryDirectory(prefix="pynq-kv-crash-", dir=args.tmp) as tmp:
            log("== virtual board (change log), appendfsync always")
            report = run_crashes(Path(tmp) / "data", appendfsync="always", kills=args.kills,
                                 min_acknowledged=max(1, args.writes // 10),
                                 threads=args.threads, kinds=kinds, seed=args.seed, log=log,
                                 writers=("UDP SET",), global_args=VIRTUAL_BOARD)
        board = asdict(report)
    result: dict[str, object] = {
        "benchmark": "pynq-kv serve --store private (model backend) SIGKILLed under redis-py "
                     "write load, restarted on the same data dir",
        "kills": sum(sum(r["kills"].values()) for r in runs.values()),
        "acknowledged": sum(r["acknowledged"] for r in runs.values()),
    }
    failed = [f"{policy}: {f}" for policy, r in runs.items() for f in r["orphans"] + r["errors"]]
    for policy, run in runs.items():  # lost_always, lost_everysec, lost_no
        result[f"lost_{policy}"] = sum(run["lost"].values())
    if "always" in runs:
        if result["lost_always"]:
            failed.append(f"appendfsync always lost {result['lost_always']} acknowledged writes")
    if "everysec" in runs:
        result["max_loss_window_s"] = round(max(runs["everysec"]["max_loss_window_s"].values()), 3)
        result["loss_bound_s"] = LOSS_BOUND_S
        if result["max_loss_window_s"] > LOSS_BOUND_S:
            failed.append(f"everysec lost writes {result['max_loss_window_s']} s old, over the "
                          f"bound of {LOSS_BOUND_S} s")
    if args.virtual_board:
        result["board_kills"] = sum(board["kills"].values())
        result["board_acknowledged"] = board["acknowledged"]
        result["board_lost"] = sum(board["lost"].values())
        result["board_max_loss_window_s"] = round(max(board["max_loss_window_s"].values()), 4)
        result["board_loss_bound_s"] = BOARD_LOSS_BOUND_S
        failed += [f"virtual board: {f}" for f in board["orphans"] + board["errors"]]
        if result["board_max_loss_window_s"] > BOARD_LOSS_BOUND_S:
            failed.append("virtual board: lost writes older than the drain's bound")
        runs["virtual_board"] = board
    result.update(
        threads=args.threads, kill_kinds=list(kinds), runs=runs, failures=failed,
        data_dir_filesystem=_filesystem(args.tmp or Path(tempfile.gettempdir())),
        date=time.strftime("%Y-%m-%d %H:%M:%S %z"),
        machine={"python": platform.python_version(), "cpus": os.cpu_count(),
                 "load_average_at_end": [round(x, 2) for x in os.getloadavg()]})
    print(json.dumps(result, indent=2))
    sys.exit(1 if failed else 0)


def _filesystem(path: Path) -> str:
    """The type of the file system holding path (/proc/mounts' longest matching mount)."""
    best, kind = "", "unknown"
    target = str(path.resolve())
    with open("/proc/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            mount = fields[1]
            if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
                best, kind = mount, fields[2]
    return kind


if __name__ == "__main__":
    main()
