"""The Vivado/Vitis overlay flow: board manifests -> Tcl configuration -> Vivado / v++.

Vivado's Tcl has no JSON reader, so the scripts under hw/vivado/ never read the manifests
themselves: this module writes everything they need (part, parameters, VLNV, file lists, output
paths) into one generated Tcl file, `config.tcl`, which every script sources first. Each fact
keeps one home: the board in overlays/<board>/manifest.json, the VLNV in
pynq_kv/pynq_driver.py (KV_ENGINE_VLNV), the register offsets in hw/regmap/kv_regs.json.

    python hw/vivado/flow.py config BOARD OUT.tcl       # the Tcl configuration of BOARD
    python hw/vivado/flow.py kernel-xml BOARD OUT.xml   # Vitis kernel.xml (register offsets)
    python hw/vivado/flow.py plan BOARD                 # what `overlay` runs, without running it
    python hw/vivado/flow.py overlay BOARD              # build overlays/BOARD/ (needs Vivado)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

VIVADO_DIR = Path(__file__).resolve().parent
HW_DIR = VIVADO_DIR.parent
REPO_DIR = HW_DIR.parent
RTL_DIR = HW_DIR / "rtl"
OVERLAYS_DIR = REPO_DIR / "overlays"
REGMAP_JSON = HW_DIR / "regmap" / "kv_regs.json"
DRIVER_PY = REPO_DIR / "pynq_kv" / "pynq_driver.py"
BUILD_ROOT = HW_DIR / "build" / "vivado"

# Run as a script (make -C hw overlay) without pynq-kv installed, the package comes from this checkout.
sys.path.append(str(REPO_DIR))
from pynq_kv import manifest as manifests  # noqa: E402
from pynq_kv.errors import OverlayError  # noqa: E402

# Verilog sized literal in a manifest (parameters wider than 32 bits): 64'h70796E712D6B7631
_SIZED_RE = re.compile(r"^(\d+)'[hH]([0-9a-fA-F_]+)$")


class FlowError(Exception):
    """A bad board name, manifest or missing tool: the message says what to do."""


def boards() -> list[str]:
    """Boards with a manifest under overlays/ (the list `make -C hw overlay` accepts)."""
    return manifests.boards(OVERLAYS_DIR)


def load_manifest(board: str) -> dict:
    """overlays/<board>/manifest.json, read and checked by pynq_kv.manifest (the one reader,
    shared with pynq_kv.load()); a FlowError naming the boards there are."""
    if not board:
        raise FlowError(f"no board given: BOARD=<board> with one of {', '.join(boards())}")
    try:
        return manifests.load_manifest(board, OVERLAYS_DIR)
    except OverlayError as exc:
        raise FlowError(str(exc)) from None


def driver_vlnv() -> str:
    """KV_ENGINE_VLNV of pynq_kv/pynq_driver.py, read without importing PYNQ."""
    tree = ast.parse(DRIVER_PY.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "KV_ENGINE_VLNV" for t in node.targets):
            return ast.literal_eval(node.value)
    raise FlowError(f"{DRIVER_PY} defines no KV_ENGINE_VLNV")


def ip_vlnv(manifest: dict) -> tuple[str, str, str, str]:
    """(vendor, library, name, version) of the packaged IP.

    The Zynq IP is the one PYNQ binds the driver to (KV_ENGINE_VLNV exactly); an Alveo kernel
    keeps its vendor, library and version and is named after its top module (the kernel name).
    """
    vendor, library, name, version = driver_vlnv().split(":")
    if manifest["flow"] == "vitis":
        name = manifest["ip"]["module"]
    return vendor, library, name, version


def hdl_parameters(manifest: dict) -> list[tuple[str, int, int | None]]:
    """(name, value, bit width or None) of every top parameter, geometry first.

    Integers are plain Verilog integer parameters; sized literals ("48'h020000000001") are
    the vector parameters Vivado must package as bit strings of that width.
    """
    out: list[tuple[str, int, int | None]] = []
    for name, raw in list(manifest["geometry"].items()) + list(manifest["parameters"].items()):
        if isinstance(raw, int):
            out.append((name, raw, None))
            continue
        m = _SIZED_RE.match(str(raw))
        if not m:
            raise FlowError(f"parameter {name}: {raw!r} is neither an integer nor a sized hex literal")
        width, value = int(m.group(1)), int(m.group(2).replace("_", ""), 16)
        if value >= 1 << width:
            raise FlowError(f"parameter {name}: {raw!r} does not fit in {width} bits")
        out.append((name, value, width))
    return out


def rtl_files(manifest: dict) -> list[Path]:
    """The sources the IP packages: every module and header of hw/rtl, the wrapper."""
    files = sorted(RTL_DIR.glob("*.v")) + sorted(RTL_DIR.glob("*.vh"))
    if manifest["flow"] == "vitis":
        files.append(VIVADO_DIR / manifest["board"] / f"{manifest['ip']['module']}.v")
    return files


def build_dir(board: str) -> Path:
    return BUILD_ROOT / board


def _tcl(value: object) -> str:
    """A Tcl word for a string/number/path (braced: no substitution inside)."""
    text = str(value)
    if any(c in text for c in "{}\\"):
        raise FlowError(f"cannot quote {text!r} for Tcl")
    return "{" + text + "}"


def config_tcl(board: str, out: Path | None = None) -> str:
    """The generated Tcl configuration every script of the flow sources first.

    `out` is the build directory the scripts work in (default hw/build/vivado/<board>).
    """
    m = load_manifest(board)
    regmap = json.loads(REGMAP_JSON.read_text())
    vendor, library, name, version = ip_vlnv(m)
    out = build_dir(board) if out is None else out
    cfg: dict[str, object] = {
        "board": board, "flow": m["flow"], "part": m["part"],
        "board_part": m.get("board_part", ""), "platform": m.get("platform", ""),
        "repo_dir": REPO_DIR, "vivado_dir": VIVADO_DIR, "build_dir": out,
        "ip_dir": out / "ip", "overlay_dir": OVERLAYS_DIR / board,
        "top": m["ip"]["module"], "instance": m["instance"],
        "axil": m["ip"]["axil"], "clock": m["ip"]["clock"], "reset": m["ip"]["reset"],
        "reset_polarity": m["ip"]["reset_polarity"],
        "vendor": vendor, "library": library, "name": name, "version": version,
        "clock_mhz": m["clock"]["mhz"], "addr_range": 1 << regmap["addr_bits"],
    }
    if m["flow"] == "vitis":
        cfg.update(kernel_xml=out / "kernel.xml", xo=out / f"{m['ip']['module']}.xo")
    if str(m["address"]["base"]).startswith("0x"):
        cfg["addr_base"] = m["address"]["base"]
    if "regs" in m["ethernet"]:
        cfg["mac_base"] = m["ethernet"]["regs"]["base"]
        cfg["mac_range"] = m["ethernet"]["regs"]["range"]
    lines = [f"# generated by hw/vivado/flow.py from overlays/{board}/manifest.json: do not edit",
             "array set cfg {}"]
    lines += [f"set cfg({k}) {_tcl(v)}" for k, v in cfg.items()]
    conns = m.get("board_connections", {})
    lines.append("set cfg(board_connections) [list " + " ".join(
        f"{_tcl(k)} {_tcl(v)}" for k, v in conns.items()) + "]")
    lines.append("set cfg(sources) [list " + " ".join(_tcl(p) for p in rtl_files(m)) + "]")
    # name value width(0 = integer parameter) triples
    lines.append("set cfg(params) [list " + " ".join(
        f"{n} {v if w is None else format(v, 'X')} {w or 0}" for n, v, w in hdl_parameters(m)) + "]")
    return "\n".join(lines) + "\n"


def register_words(reg: dict) -> int:
    """32-bit words a register (or register array) spans in the address map."""
    return int(reg.get("array", 1))


def kernel_xml(board: str) -> str:
    """The Vitis kernel.xml of a user-managed RTL kernel, one <arg> per register of kv_regs.json.

    Offsets and sizes come from the register map source; XRT (xrt::ip read_register /
    write_register) reaches the same addresses the PYNQ driver does on a Zynq.
    """
    m = load_manifest(board)
    if m["flow"] != "vitis":
        raise FlowError(f"board {board} is a {m['flow']} overlay: kernel.xml is for Vitis kernels")
    regmap = json.loads(REGMAP_JSON.read_text())
    vendor, library, name, version = ip_vlnv(m)
    root = ET.Element("root", versionMajor="1", versionMinor="6")
    kernel = ET.SubElement(root, "kernel", name=name, language="ip_c",
                           vlnv=f"{vendor}:{library}:{name}:{version}", attributes="",
                           preferredWorkGroupSizeMultiple="0", workGroupSize="1",
                           interrupt="false", hwControlProtocol="user_managed")
    ports = ET.SubElement(kernel, "ports")
    span = 1 << regmap["addr_bits"]
    axil = m["ip"]["axil"]
    ET.SubElement(ports, "port", name=axil, mode="slave", range=f"0x{span:X}",
                  dataWidth=str(8 * regmap["word_bytes"]), portType="addressable", base="0x0")
    data_w = str(m["parameters"]["DATA_W"])
    ET.SubElement(ports, "port", name="s_axis_rx", mode="read_only", dataWidth=data_w, portType="stream")
    ET.SubElement(ports, "port", name="m_axis_tx", mode="write_only", dataWidth=data_w, portType="stream")
    args = ET.SubElement(kernel, "args")
    word = regmap["word_bytes"]
    arg_id = 0
    for reg in regmap["registers"]:
        size = word * register_words(reg)
        ET.SubElement(args, "arg", name=reg["name"], addressQualifier="0", id=str(arg_id), port=axil,
                      size=f"0x{size:X}", offset=f"0x{int(reg['offset'], 16):03X}", type="uint",
                      hostOffset="0x0", hostSize=f"0x{size:X}")
        arg_id += 1
    for port_name in ("s_axis_rx", "m_axis_tx"):
        ET.SubElement(args, "arg", name=port_name, addressQualifier="4", id=str(arg_id), port=port_name,
                      size="0x0", offset="0x0", type="stream<ap_axiu<%s,0,0,0>>&" % data_w,
                      hostOffset="0x0", hostSize="0x0", memSize="0")
        arg_id += 1
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def plan(board: str) -> dict:
    """The tools, commands and outputs of `overlay BOARD` (nothing is run)."""
    m = load_manifest(board)
    out = build_dir(board)
    cfg = out / "config.tcl"

    def vivado(script: Path) -> list[str]:
        return ["vivado", "-mode", "batch", "-nojournal", "-log", str(out / f"{script.stem}.log"),
                "-source", str(script), "-tclargs", str(cfg)]

    steps: list[list[str]] = [vivado(VIVADO_DIR / "package_ip.tcl")]
    overlay_dir = OVERLAYS_DIR / board
    if m["flow"] == "vivado":
        tools = ["vivado"]
        steps.append(vivado(VIVADO_DIR / board / "build.tcl"))
    else:
        tools = ["vivado", "v++"]
        steps.append(vivado(VIVADO_DIR / board / "package_xo.tcl"))
        steps.append(["v++", "--link", "--target", "hw", "--platform", m["platform"],
                      "--kernel_frequency", f"{m['clock']['mhz']:g}",
                      "--config", str(VIVADO_DIR / board / "link.cfg"), "--temp_dir", str(out / "vpp"),
                      "-o", str(overlay_dir / "kv.xclbin"), str(out / f"{m['ip']['module']}.xo"),
                      "$CMAC_XO"])
    return {"board": board, "tools": tools, "config": str(cfg), "steps": steps,
            "outputs": [str(overlay_dir / o) for o in m["outputs"]]}


def write_inputs(board: str) -> None:
    """Write config.tcl (and kernel.xml for a Vitis board) under hw/build/vivado/<board>/."""
    out = build_dir(board)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.tcl").write_text(config_tcl(board))
    if load_manifest(board)["flow"] == "vitis":
        (out / "kernel.xml").write_text(kernel_xml(board))


def overlay(board: str) -> None:
    """Build overlays/<board>/ with Vivado (and v++), or stop saying what it would have built."""
    p = plan(board)
    missing = [f"{t} (not on PATH)" for t in p["tools"] if shutil.which(t) is None]
    if any("$CMAC_XO" in step for step in p["steps"]) and not os.environ.get("CMAC_XO"):
        missing.append("CMAC_XO (environment: the cmac_0 .xo built by Xilinx/xup_vitis_network_example)")
    if missing:
        lines = [f"make overlay BOARD={board}: nothing was built, missing: {'; '.join(missing)}.",
                 "With them, the flow would run:"]
        lines += ["  " + " ".join(s) for s in p["steps"]]
        lines += ["and write:"] + ["  " + o for o in p["outputs"]]
        lines.append("Vivado is not installed on the machines this repository is tested on; the Tcl scripts were "
                     "checked without it by tests/test_vivado.py (docs/vivado.md).")
        raise FlowError("\n".join(lines))
    write_inputs(board)
    env = dict(os.environ)
    for step in p["steps"]:
        cmd = [env["CMAC_XO"] if s == "$CMAC_XO" else s for s in step]
        print("+", " ".join(cmd), flush=True)
        if subprocess.run(cmd, cwd=build_dir(board), check=False).returncode != 0:
            raise FlowError(f"{cmd[0]} failed: see the logs in {build_dir(board)}")
    for out in p["outputs"]:
        if not Path(out).is_file():
            raise FlowError(f"the flow finished but {out} is missing: see the logs in {build_dir(board)}")
    print("built " + ", ".join(p["outputs"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name in ("config", "kernel-xml"):
        sp = sub.add_parser(name)
        sp.add_argument("board")
        sp.add_argument("out", type=Path)
    sub.choices["config"].add_argument("--build-dir", type=Path, default=None,
                                       help="build directory of the scripts (default hw/build/vivado/BOARD)")
    for name in ("plan", "overlay"):
        sub.add_parser(name).add_argument("board")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "config":
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(config_tcl(args.board, args.build_dir))
        elif args.cmd == "kernel-xml":
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(kernel_xml(args.board))
        elif args.cmd == "plan":
            print(json.dumps(plan(args.board), indent=2))
        else:
            overlay(args.board)
    except FlowError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
