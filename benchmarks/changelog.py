"""Drain rate of the change log (docs/engine.md §10) on the simulated backends. Prints one JSON
object on stdout.

- `model`: records/s of KVEngine.drain_changes on the reference model (records made by the
  model's data-plane port; decoding included).
- `board`: the virtual board (Verilated kv_top, pynq_kv.board): the log filled to its depth by
  memcached SETs sent as Ethernet frames (and then overfilled, to show the drop count), then
  drained through the CL_* registers by KVEngine.drain_changes: records/s of this simulation
  (host wall clock), register accesses per record (counted), and simulated clock cycles per
  record (the harness issues AXI4-Lite transactions back to back, so this is the register
  block's own bound: records/s at a clock = clock / cycles_per_record).

A board's rate is its MMIO access rate divided by `accesses_per_record` (SET records; a DELETE
record skips the value words): e.g. at an assumed 1 µs per AXI4-Lite access, 1e6 / 14 ≈ 71,000
records/s for 288-bit keys and 32-bit values. No board was measured.

    .venv/bin/python benchmarks/changelog.py            # 288-bit keys, 256-bit values, depth 512
    .venv/bin/python benchmarks/changelog.py --records 2000
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pynq_kv import Geometry, KVEngine  # noqa: E402
from pynq_kv.board import board_engine  # noqa: E402
from pynq_kv.changelog import MAX_DEPTH, ChangeOp, register_accesses  # noqa: E402
from pynq_kv.model import ModelBackend  # noqa: E402
from pynq_kv.net import codec  # noqa: E402

HEADER = struct.pack(">HHHH", 1, 0, 1, 0)
SETX = struct.pack(">II", 0, 0)
PER_DATAGRAM = 30


class CountingRegs:
    """A register accessor that counts the accesses it passes on."""

    def __init__(self, regs) -> None:
        self.regs = regs
        self.accesses = 0

    def read32(self, offset: int) -> int:
        self.accesses += 1
        return self.regs.read32(offset)

    def write32(self, offset: int, value: int) -> None:
        self.accesses += 1
        self.regs.write32(offset, value)


def model_rate(geometry: Geometry, records: int) -> dict:
    """Drain `records` records of SETs (1,000 keys set again and again: every SET is logged)."""
    engine = KVEngine(ModelBackend(geometry, changelog_depth=MAX_DEPTH), relocation=False)
    keys = [b"m%d" % (i % 1000) for i in range(records)]
    engine.data_plane().set_batch(keys, [b"v"] * records)
    t0 = time.perf_counter()
    drained = engine.drain_changes(records)
    seconds = time.perf_counter() - t0
    assert len(drained) == records
    return {"records": records, "records_per_s": round(records / seconds)}


def board_rate(geometry: Geometry, overfill: int) -> dict:
    engine = board_engine(geometry, relocation=False)
    try:
        board = engine.backend.board
        depth = engine.changelog_stats().depth
        total = depth + overfill
        for start in range(0, total, PER_DATAGRAM):
            body = b"".join(codec.Request(codec.Opcode.SETQ, key=b"b%d" % i, extras=SETX, value=b"x").encode()
                            for i in range(start, min(start + PER_DATAGRAM, total)))
            board.exchange(HEADER + body, 40000)
        full = engine.changelog_stats()
        regs = CountingRegs(engine.backend.regs)
        engine.backend.regs = regs
        cycles0 = board.device.cycles
        t0 = time.perf_counter()
        drained = engine.drain_changes(depth + 1)
        seconds = time.perf_counter() - t0
        cycles = board.device.cycles - cycles0
        assert len(drained) == depth and [c.seq for c in drained] == list(range(depth))
        # the last read found the log empty: one CL_STATUS read beyond the records
        per_record = (regs.accesses - 1) / depth
        assert per_record == register_accesses(geometry.key_width, geometry.value_width, ChangeOp.SET)
        return {
            "depth": depth,
            "mutations_sent": total,
            "level_when_full": full.level,
            "dropped": full.dropped,
            "overflowed": full.overflowed,
            "records_per_s_simulated": round(depth / seconds),
            "accesses_per_record": per_record,
            "accesses_per_delete_record": register_accesses(geometry.key_width, geometry.value_width,
                                                             ChangeOp.DELETE),
            "cycles_per_record": round(cycles / depth, 1),
            "cycles_per_access": round(cycles / regs.accesses, 2),
            "records_per_s_at_300mhz_register_bound": round(300e6 * depth / cycles),
        }
    finally:
        engine.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=MAX_DEPTH, help="records drained on the model (<= 65536)")
    parser.add_argument("--overfill", type=int, default=40, help="mutations beyond the board's depth")
    args = parser.parse_args()
    geometry = Geometry(key_width=288, value_width=256, ways=4, rows=1024, stash=8, rules=16)
    out = {"geometry": geometry.as_dict(), "model": model_rate(geometry, args.records),
           "board": board_rate(geometry, args.overfill)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
