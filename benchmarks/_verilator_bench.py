"""Build a toplevel with Verilator and run one cocotb benchmark module in it (rtl_*.py share it).

The cocotb module reads its settings from KV_BENCH_CFG (JSON) and writes its measurements to
KV_BENCH_OUT; the caller turns them into the one JSON object it prints. The runner and the
simulator write to stdout, so it is pointed at stderr while they run: stdout carries only that
object.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
HW_DIR = REPO_DIR / "hw"
for _p in (REPO_DIR, HW_DIR):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import tools  # noqa: E402  (hw/tools.py)

# cocotb builds with --public-flat-rw; at RULES 256 the rule matcher's RULES x KEY_W/5 shift
# registers then make Verilator's default 20000-operation C++ functions need ~10 GB of GCC
# memory per job: smaller functions keep the build within a small machine.
SPLIT_CFUNCS = "1000"


@dataclass
class BenchRun:
    result: Optional[dict[str, Any]]  # what the cocotb module measured; None if it failed
    failures: int
    build_s: float
    sim_s: float


def run_bench(name: str, toplevel: str, modules: list[str], parameters: dict[str, Any],
              test_module: str, cfg: dict[str, Any], seed: int) -> BenchRun:
    """Build toplevel from hw/rtl modules in hw/build/<name>/ and run test_module there."""
    tools.setup_env()
    from cocotb_tools.runner import get_results, get_runner

    build_dir = tools.BUILD_DIR / name
    out_file = build_dir / "result.json"
    if out_file.exists():
        out_file.unlink()
    runner = get_runner("verilator")
    saved_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        t0 = time.perf_counter()
        runner.build(sources=tools.rtl_sources(*modules), includes=[tools.RTL_DIR],
                     hdl_toplevel=toplevel, parameters=parameters, build_dir=build_dir,
                     build_args=["-Wno-fatal", "--output-split-cfuncs", SPLIT_CFUNCS],
                     always=True, timescale=("1ns", "1ps"))
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        results_xml = runner.test(
            hdl_toplevel=toplevel, test_module=test_module, test_dir=build_dir,
            build_dir=build_dir, seed=seed,
            extra_env={"KV_BENCH_CFG": json.dumps(cfg), "KV_BENCH_OUT": str(out_file),
                       "PYTHONPATH": os.pathsep.join([str(BENCH_DIR), str(REPO_DIR), str(HW_DIR),
                                                      os.environ.get("PYTHONPATH", "")])})
        sim_s = time.perf_counter() - t0
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
    _, failures = get_results(results_xml)
    result = json.loads(out_file.read_text()) if not failures and out_file.exists() else None
    return BenchRun(result, failures, build_s, sim_s)
