"""Dry-run checks of the Vivado/Vitis overlay flow (hw/vivado/), on machines without Vivado.

Every Tcl script of the flow runs under plain `tclsh` with the Vivado commands stubbed
(hw/vivado/stub/run.tcl records each call); these tests read what the script would have created
-- IP interfaces and parameters, block-design cells and connections, files read, outputs -- and
hold it against the sources it must agree with, each read from its own home:

- ports and parameters of the top: the Verilog, read by Yosys (never typed here);
- the VLNV, base address and instance name: pynq_kv.pynq_driver;
- register offsets: hw/regmap/kv_regs.json and the generated pynq_kv.regmap;
- the geometry: hw/tools.py SYNTH_REFERENCE (the configuration `make -C hw synth` estimates).

What a dry run cannot show (IP configuration names of AMD's cores, timing, the bitstream) is
listed as not verified in each overlays/<board>/manifest.json and in docs/vivado.md.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HW = REPO / "hw"
VIVADO = HW / "vivado"
RUN_TCL = VIVADO / "stub" / "run.tcl"
BOARDS = ["kr260", "u55c"]

sys.path.insert(0, str(HW))
import tools  # noqa: E402  (hw/tools.py: SYNTH_REFERENCE)

_spec = importlib.util.spec_from_file_location("kv_vivado_flow", VIVADO / "flow.py")
flow = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(flow)

if shutil.which("tclsh") is None or shutil.which("yosys") is None:  # pragma: no cover
    pytest.fail("tclsh and yosys are needed: apt-get install -y $(cat hw/apt-packages.txt)",
                pytrace=False)


# --- reading the RTL with Yosys -------------------------------------------------------------

_RTL_CACHE: dict[Path, dict] = {}


def rtl_module(path: Path, top: str) -> dict:
    """Ports {name: (direction, width)} and parameters {name: (default, width)} of `top`, as
    Yosys reads them from `path` (default parameters; submodules are not elaborated)."""
    if path not in _RTL_CACHE:
        out = Path(os.environ.get("TMPDIR", "/tmp")) / f"kv_vivado_{os.getpid()}_{path.stem}.json"
        subprocess.run(["yosys", "-q", "-p", f"read_verilog -I {HW / 'rtl'} {path}; proc; write_json {out}"],
                       check=True, capture_output=True, text=True)
        mod = json.loads(out.read_text())["modules"][top]
        out.unlink()
        _RTL_CACHE[path] = {
            "ports": {n: (p["direction"], len(p["bits"])) for n, p in mod["ports"].items()},
            "params": {n: (int(v, 2), len(v)) for n, v in mod["parameter_default_values"].items()},
        }
    return _RTL_CACHE[path]


def top_rtl(board: str) -> dict:
    """The packaged top of a board: kv_top (Zynq) or the Vitis wrapper kv_krnl (Alveo)."""
    module = flow.load_manifest(board)["ip"]["module"]
    path = HW / "rtl" / f"{module}.v"
    if not path.exists():
        path = VIVADO / board / f"{module}.v"
    return rtl_module(path, module)


KV_TOP = HW / "rtl" / "kv_top.v"


def driver_constant(name: str):
    """A module-level constant of pynq_kv/pynq_driver.py, read without importing PYNQ (which
    the test extra installs only where its wheels exist)."""
    tree = ast.parse((REPO / "pynq_kv" / "pynq_driver.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"pynq_kv/pynq_driver.py defines no {name}")


# --- running a script under the stub ----------------------------------------------------------

class Events(list):
    """The calls a script made under the stub, with views of what they created."""

    def calls(self, cmd: str) -> list[list[str]]:
        return [e["args"] for e in self if e["cmd"] == cmd]

    def props(self, kind: str) -> dict[str, dict[str, str]]:
        """set_property calls on objects of one kind: {object name: {property: value}}."""
        out: dict[str, dict[str, str]] = {}
        for args in self.calls("set_property"):
            if args[0] == "-dict":
                pairs, objs = args[1].split(), args[2:]
            else:
                pairs, objs = args[0:2], args[2:]
            for obj in objs:
                for o in obj.split():
                    if o.startswith(kind + ":"):
                        d = out.setdefault(o[len(kind) + 1:], {})
                        d.update(dict(zip(pairs[0::2], pairs[1::2])))
        return out


def run_stub(script: Path, *args: str, tmp: Path, expect_ok: bool = True) -> Events:
    events_file = tmp / f"{script.stem}.events.jsonl"
    proc = subprocess.run(["tclsh", str(RUN_TCL), str(events_file), str(script), *args],
                          capture_output=True, text=True, cwd=tmp, timeout=60)
    events = Events(json.loads(line) for line in events_file.read_text().splitlines())
    end = events[-1]
    assert end["cmd"] == "__end__"
    if expect_ok:
        assert proc.returncode == 0 and end["args"] == ["0"], proc.stderr
    return events


def board_config(board: str, tmp: Path) -> Path:
    """config.tcl of `board` with its build directory under tmp (flow.py config)."""
    cfg = tmp / f"{board}.config.tcl"
    assert flow.main(["config", board, str(cfg), "--build-dir", str(tmp / board)]) == 0
    return cfg


def positional(args: list[str], flags: set[str]) -> list[str]:
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a.startswith("-") and a not in flags:
            skip = True
        elif not a.startswith("-"):
            out.append(a)
    return out


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


# --- the packaged IP --------------------------------------------------------------------------

def packaged(board: str, tmp: Path, script: Path = VIVADO / "package_ip.tcl") -> dict:
    """What package_ip.tcl would package for `board`: interfaces, port maps, parameters, VLNV."""
    ev = run_stub(script, str(board_config(board, tmp)), tmp=tmp)
    bifs = {a[0] for a in ev.calls("ipx::add_bus_interface")}
    portmaps: dict[str, dict[str, str]] = {b: {} for b in bifs}
    for obj, props in ev.props("port_map").items():
        bif, logical = obj.split("/")
        portmaps[bif][logical] = props["physical_name"]
    pkg = ev.calls("ipx::package_project")[0]
    core = ev.props("core")["current"]
    files = [f for a in ev.calls("add_files") for w in positional(a, {"-norecurse"}) for f in w.split()]
    return {
        "events": ev, "interfaces": bifs, "portmaps": portmaps,
        "bif_props": ev.props("bus_interface"), "bus_params": ev.props("bus_parameter"),
        "user_params": ev.props("user_parameter"), "hdl_params": ev.props("hdl_parameter"),
        "vlnv": ":".join([option(pkg, "-vendor"), option(pkg, "-library"), core["name"], core["version"]]),
        "files": files, "core": core,
        "address_blocks": ev.props("address_block"),
    }


def port_check(pkg: dict, rtl: dict) -> list[str]:
    """Differences between the packaged port maps and the RTL ports (empty when they agree)."""
    mapped = Counter(p for m in pkg["portmaps"].values() for p in m.values())
    problems = [f"{p} is in {n} interfaces" for p, n in mapped.items() if n > 1]
    problems += [f"RTL port {p} is in no interface" for p in sorted(set(rtl["ports"]) - set(mapped))]
    problems += [f"packaged port {p} is not a port of the RTL" for p in sorted(set(mapped) - set(rtl["ports"]))]
    return problems


@pytest.fixture(scope="module")
def pkg(tmp_path_factory) -> dict[str, dict]:
    return {b: packaged(b, tmp_path_factory.mktemp(f"pkg_{b}")) for b in BOARDS}


@pytest.mark.parametrize("board", BOARDS)
def test_packaged_ports_are_the_rtl_ports(pkg, board):
    """Every port of the top is in exactly one declared interface, and nothing else is."""
    assert port_check(pkg[board], top_rtl(board)) == []


@pytest.mark.parametrize("board", BOARDS)
def test_packaged_interfaces(pkg, board):
    """AXI4-Lite slave, stream slave/master, clock and reset: modes agree with port directions."""
    p, rtl, ip = pkg[board], top_rtl(board)["ports"], flow.load_manifest(board)["ip"]
    assert p["interfaces"] == {ip["axil"], "s_axis_rx", "m_axis_tx", ip["clock"], ip["reset"]}
    kinds = {ip["axil"]: "aximm", "s_axis_rx": "axis", "m_axis_tx": "axis",
             ip["clock"]: "clock", ip["reset"]: "reset"}
    # (logical signal, direction it has on a slave)
    probe = {"aximm": ("AWVALID", "input"), "axis": ("TVALID", "input"),
             "clock": ("CLK", "input"), "reset": ("RST", "input")}
    for bif, kind in kinds.items():
        props = p["bif_props"][bif]
        assert kind in props["bus_type_vlnv"]
        logical, slave_dir = probe[kind]
        physical = p["portmaps"][bif][logical]
        want = slave_dir if props["interface_mode"] == "slave" else "output"
        assert rtl[physical][0] == want, f"{bif}.{logical} -> {physical}"
    assert p["bif_props"]["m_axis_tx"]["interface_mode"] == "master"
    assert p["bus_params"][f"{ip['axil']}/PROTOCOL"]["value"] == "AXI4LITE"
    assert p["bus_params"][f"{ip['reset']}/POLARITY"]["value"] == ip["reset_polarity"]
    assert p["bus_params"][f"{ip['clock']}/ASSOCIATED_RESET"]["value"] == ip["reset"]
    assoc = {(option(a, "-busif"), option(a, "-clock")) for a in p["events"].calls("ipx::associate_bus_interfaces")}
    assert assoc == {(b, ip["clock"]) for b in (ip["axil"], "s_axis_rx", "m_axis_tx")}
    regmap = json.loads(flow.REGMAP_JSON.read_text())
    assert int(p["address_blocks"]["regs"]["range"]) == 1 << regmap["addr_bits"]


@pytest.mark.parametrize("board", BOARDS)
def test_packaged_parameters_are_the_rtl_parameters(pkg, board):
    """Every HDL parameter is a user parameter with the board's value; wide ones as bit strings."""
    p, rtl = pkg[board], top_rtl(board)["params"]
    assert set(p["user_params"]) == set(rtl)
    assert set(p["hdl_params"]) == set(rtl)
    for name, value, width in flow.hdl_parameters(flow.load_manifest(board)):
        for props in (p["user_params"][name], p["hdl_params"][name]):
            if rtl[name][1] > 32:
                assert props["value_format"] == "bitString", name
                assert int(props["value_bit_string_length"]) == rtl[name][1], name
                assert int(props["value"], 16) == value, name
            else:
                assert int(props["value"], 16 if props["value_format"] == "bitString" else 10) == value, name


def test_packaged_vlnv_is_the_driver_vlnv(pkg):
    """PYNQ binds KVEngineIP to the VLNV the KR260 IP is packaged with."""
    vlnv = driver_constant("KV_ENGINE_VLNV")
    assert pkg["kr260"]["vlnv"] == vlnv
    vendor, library, _, version = vlnv.split(":")
    assert pkg["u55c"]["vlnv"] == f"{vendor}:{library}:kv_krnl:{version}"


@pytest.mark.parametrize("board", BOARDS)
def test_packaged_files_exist(pkg, board):
    files = pkg[board]["files"]
    assert files and all(Path(f).is_file() for f in files), [f for f in files if not Path(f).is_file()]
    assert str(KV_TOP) in files


def test_vitis_kernel_properties(pkg):
    core = pkg["u55c"]["core"]
    assert core["sdx_kernel"] == "true" and core["sdx_kernel_type"] == "rtl"
    assert "user_managed" in core["vitis_drc"]
    assert "sdx_kernel" not in pkg["kr260"]["core"]


def test_typo_in_a_port_map_is_caught(tmp_path):
    """Mutation check of the port test: a misspelt stream port must show up as a difference."""
    script = tmp_path / "package_ip.tcl"
    script.write_text((VIVADO / "package_ip.tcl").read_text().replace(
        "foreach {name mode} {s_axis_rx slave", "foreach {name mode} {s_axis_rxx slave"))
    problems = port_check(packaged("kr260", tmp_path, script), top_rtl("kr260"))
    assert "RTL port s_axis_rx_tdata is in no interface" in problems
    assert "packaged port s_axis_rxx_tdata is not a port of the RTL" in problems


def test_stub_rejects_commands_vivado_does_not_have(tmp_path):
    """A misspelt Vivado command stops the dry run (the stub defines only real commands)."""
    script = tmp_path / "bad.tcl"
    script.write_text("create_bd_cell -type ip -vlnv a:b:c:1.0 x\nconnect_bd_intf_nets a b\n")
    ev = run_stub(script, tmp=tmp_path, expect_ok=False)
    assert ev[-1]["args"] == ["1"] and "connect_bd_intf_nets" in ev[-1]["result"]


# --- the Vitis wrapper ------------------------------------------------------------------------

def test_kv_krnl_parameters_are_kv_tops():
    """kv_krnl redeclares kv_top's parameters (Verilog needs it): same names, same defaults."""
    assert rtl_module(VIVADO / "u55c" / "kv_krnl.v", "kv_krnl")["params"] == rtl_module(KV_TOP, "kv_top")["params"]


@pytest.mark.parametrize("data_w", [64, 512])
def test_kv_krnl_compiles_with_kv_top(data_w):
    proc = subprocess.run(["iverilog", "-g2005", "-Wall", "-o", os.devnull, "-y", str(HW / "rtl"),
                           "-I", str(HW / "rtl"), "-s", "kv_krnl", f"-Pkv_krnl.DATA_W={data_w}",
                           str(VIVADO / "u55c" / "kv_krnl.v")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_kv_krnl_verilator_lint():
    """The wrapper meets the project's RTL bar: Verilator --lint-only -Wall, as hw/Makefile lints hw/rtl."""
    root = tools.verilator_root()
    proc = subprocess.run([str(root / "bin" / "verilator"), "--lint-only", "-Wall", "--quiet",
                           "-y", str(HW / "rtl"), "--top-module", "kv_krnl", "-GDATA_W=512",
                           str(VIVADO / "u55c" / "kv_krnl.v")],
                          env=tools.verilator_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# --- manifests --------------------------------------------------------------------------------

@pytest.mark.parametrize("board", BOARDS)
def test_manifest(board):
    m = flow.load_manifest(board)
    assert m["geometry"] == tools.SYNTH_REFERENCE
    rtl = rtl_module(KV_TOP, "kv_top")["params"]
    assert set(m["geometry"]) | set(m["parameters"]) == set(rtl)
    for name, _value, width in flow.hdl_parameters(m):
        if rtl[name][1] > 32 or width is not None:
            assert width == rtl[name][1], f"{name}: {width} bits in the manifest, {rtl[name][1]} in the RTL"
    regmap = json.loads(flow.REGMAP_JSON.read_text())
    assert m["regmap_version"] == f"{regmap['version']['major']}.{regmap['version']['minor']}"
    assert m["parameters"]["DATA_W"] == m["ethernet"]["data_w"]
    assert m["clock"]["mhz"] > 0 and m["part"] and m["verified"] and m["not_verified"]
    assert m["instance"] and m["ip"]["module"]


@pytest.mark.parametrize("board", BOARDS)
def test_overlay_outputs_are_ignored_by_git(board):
    """Bitstreams are build outputs: git must ignore every file the flow writes to overlays/."""
    outs = [f"overlays/{board}/{o}" for o in flow.load_manifest(board)["outputs"]]
    proc = subprocess.run(["git", "check-ignore", *outs], cwd=REPO, capture_output=True, text=True)
    assert sorted(proc.stdout.split()) == sorted(outs)


def test_parts():
    assert flow.load_manifest("kr260")["part"] == "xck26-sfvc784-2LV-c"
    assert flow.load_manifest("u55c")["part"] == "xcu55c-fsvh2892-2L-e"


# --- KR260 block design -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def kr260(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("kr260")
    ev = run_stub(VIVADO / "kr260" / "build.tcl", str(board_config("kr260", tmp)), tmp=tmp)
    xdc = run_stub(VIVADO / "kr260" / "kv_kr260.xdc", tmp=tmp)
    return {"events": ev, "xdc": xdc, "tmp": tmp}


def _endpoint(handle: str) -> tuple[str, str, str]:
    """('pin'|'intf_pin'|'port'|'intf_port', cell or '', name) of a connection endpoint."""
    kind, path = handle.split(":", 1)
    if kind in ("bd_pin", "bd_intf_pin"):
        cell, name = path.split("/", 1)
        return kind[3:], cell, name
    return kind[3:], "", path


def test_kr260_project(kr260):
    ev, m = kr260["events"], flow.load_manifest("kr260")
    proj = ev.calls("create_project")[0]
    assert option(proj, "-part") == m["part"]
    project = ev.props("project")["current"]
    assert project["board_part"] == m["board_part"]
    assert project["ip_repo_paths"] == str(kr260["tmp"] / "kr260" / "ip")
    read = [f for a in ev.calls("add_files") for f in positional(a, {"-norecurse"})
            if not f.startswith("STUB_DIR")]
    assert read and all(Path(f).is_file() for f in read)
    assert str(VIVADO / "kr260" / "kv_kr260.xdc") in read


def test_kr260_cells_and_connections(kr260, pkg):
    """Every connection names a created cell or port; the ones on kv name its packaged
    interfaces and ports; the MAC streams, clock and reset reach kv."""
    ev, m = kr260["events"], flow.load_manifest("kr260")
    cells = {positional(a, set())[0]: option(a, "-vlnv") for a in ev.calls("create_bd_cell")}
    assert cells[m["instance"]] == driver_constant("KV_ENGINE_VLNV")
    assert m["instance"] == driver_constant("SIM_IP_NAME")
    assert cells["xxv_ethernet_0"].startswith("xilinx.com:ip:xxv_ethernet:")
    assert cells["zynq_ultra_ps_e_0"].startswith("xilinx.com:ip:zynq_ultra_ps_e:")
    ports = {positional(a, set())[0] for a in ev.calls("create_bd_port")}
    intf_ports = {positional(a, set())[0] for a in ev.calls("create_bd_intf_port")}
    kv_ifs, kv_ports = pkg["kr260"]["interfaces"], set(top_rtl("kr260")["ports"])
    nets = [[_endpoint(h) for h in a] for a in ev.calls("connect_bd_net") + ev.calls("connect_bd_intf_net")]
    for net in nets:
        for kind, cell, name in net:
            if kind == "port":
                assert name in ports, name
            elif kind == "intf_port":
                assert name in intf_ports, name
            else:
                assert cell in cells, cell
            if cell == m["instance"]:
                assert name in (kv_ifs if kind == "intf_pin" else kv_ports), f"{cell}/{name}"
    def net_of(cell: str, name: str) -> set:
        found = [set((c, n) for _, c, n in net) for net in nets if (cell, name) in {(c, n) for _, c, n in net}]
        assert len(found) == 1, f"{cell}/{name} is on {len(found)} nets"
        return found[0]
    kv = m["instance"]
    assert ("xxv_ethernet_0", "axis_rx_0") in net_of(kv, "s_axis_rx")
    assert ("xxv_ethernet_0", "axis_tx_0") in net_of(kv, "m_axis_tx")
    assert ("xxv_ethernet_0", "tx_clk_out_0") in net_of(kv, m["ip"]["clock"])
    assert any(cells.get(c, "").startswith("xilinx.com:ip:smartconnect:") for c, _ in net_of(kv, m["ip"]["axil"]))
    assert any(cells.get(c, "").startswith("xilinx.com:ip:proc_sys_reset:") and n == "peripheral_reset"
               for c, n in net_of(kv, m["ip"]["reset"]))
    # every kv interface and port is connected
    on_kv = {n for net in nets for _, c, n in net if c == kv}
    assert on_kv == kv_ifs


def test_kr260_address(kr260, pkg):
    m = flow.load_manifest("kr260")
    block = next(iter(pkg["kr260"]["address_blocks"]))
    seg = kr260["events"].props("bd_addr_seg")[f"zynq_ultra_ps_e_0/Data/SEG_{m['instance']}_{block}"]
    assert int(seg["offset"], 16) == int(m["address"]["base"], 16) == driver_constant("SIM_PHYS_ADDR")
    assert int(seg["range"]) == m["address"]["range"]
    mac = kr260["events"].props("bd_addr_seg")["zynq_ultra_ps_e_0/Data/SEG_xxv_ethernet_0_Reg"]
    assert int(mac["offset"], 16) == int(m["ethernet"]["regs"]["base"], 16)
    assert int(mac["range"]) == m["ethernet"]["regs"]["range"]
    # the two windows do not overlap
    kv_end = int(seg["offset"], 16) + int(seg["range"])
    assert kv_end <= int(mac["offset"], 16) or int(mac["offset"], 16) + int(mac["range"]) <= int(seg["offset"], 16)


def test_kr260_constraints_name_block_design_ports(kr260):
    """The XDC places exactly the board-level ports the block design creates."""
    ev = kr260["events"]
    expected = set()
    for a in ev.calls("create_bd_port"):
        expected.add(positional(a, set())[0])
    for a in ev.calls("create_bd_intf_port"):
        name, vlnv = positional(a, set())[0], option(a, "-vlnv")
        if "diff_clock_rtl" in vlnv:
            expected |= {f"{name}_clk_p", f"{name}_clk_n"}
        elif "gt_rtl" in vlnv:
            expected |= {f"{name}_{s}[0]" for s in ("grx_p", "grx_n", "gtx_p", "gtx_n")}
        else:  # pragma: no cover - a new kind of board port needs its expansion here
            pytest.fail(f"no port expansion known for {vlnv}")
    placed = {n for a in kr260["xdc"].calls("get_ports") for n in a}
    assert placed == expected
    pins = kr260["xdc"].props("port")
    with_pin = {n for n, p in pins.items() if "PACKAGE_PIN" in p}
    assert with_pin == expected


def test_kr260_outputs(kr260):
    """build.tcl copies the bitstream and the .hwh to overlays/kr260/ under one base name."""
    m = flow.load_manifest("kr260")
    dests = {Path(positional(a, {"-force"})[1]) for a in kr260["events"].calls("file copy")}
    assert dests == {REPO / "overlays" / "kr260" / o for o in m["outputs"]}
    run = kr260["events"].calls("launch_runs")[0]
    assert option(run, "-to_step") == "write_bitstream"


# --- U55C kernel ------------------------------------------------------------------------------

def kernel_offsets(xml_text: str) -> dict[str, tuple[int, int]]:
    root = ET.fromstring(xml_text)
    return {a.get("name"): (int(a.get("offset"), 16), int(a.get("size"), 16))
            for a in root.iter("arg") if a.get("addressQualifier") == "0"}


def test_kernel_xml_offsets_are_the_register_map():
    from pynq_kv import regmap
    regs = json.loads(flow.REGMAP_JSON.read_text())["registers"]
    got = kernel_offsets(flow.kernel_xml("u55c"))
    assert set(got) == {r["name"] for r in regs}
    for r in regs:
        assert got[r["name"]][0] == int(r["offset"], 16) == getattr(regmap, f"REG_{r['name']}"), r["name"]
        assert got[r["name"]][1] == 4 * r.get("array", 1)


def test_kernel_xml_follows_the_register_map(tmp_path, monkeypatch):
    """Mutation check: a register moved in kv_regs.json moves in kernel.xml (generated, not typed)."""
    src = json.loads(flow.REGMAP_JSON.read_text())
    status = next(r for r in src["registers"] if r["name"] == "STATUS")
    status["offset"] = "0x04C"
    moved = tmp_path / "kv_regs.json"
    moved.write_text(json.dumps(src))
    monkeypatch.setattr(flow, "REGMAP_JSON", moved)
    from pynq_kv import regmap
    assert kernel_offsets(flow.kernel_xml("u55c"))["STATUS"][0] == 0x04C != regmap.REG_STATUS


def test_kernel_xml_ports_are_packaged_interfaces(pkg):
    root = ET.fromstring(flow.kernel_xml("u55c"))
    m = flow.load_manifest("u55c")
    kernel = root.find("kernel")
    assert kernel.get("name") == pkg["u55c"]["core"]["name"]
    assert kernel.get("vlnv") == pkg["u55c"]["vlnv"]
    ports = {p.get("name"): p for p in root.iter("port")}
    assert set(ports) == pkg["u55c"]["interfaces"] - {m["ip"]["clock"], m["ip"]["reset"]}
    assert ports[m["ip"]["axil"]].get("portType") == "addressable"
    assert {int(ports[s].get("dataWidth")) for s in ("s_axis_rx", "m_axis_tx")} == {m["parameters"]["DATA_W"]} == {512}


def test_package_xo(tmp_path, pkg):
    cfg = board_config("u55c", tmp_path)
    xml = tmp_path / "u55c" / "kernel.xml"
    xml.parent.mkdir(parents=True)
    assert flow.main(["kernel-xml", "u55c", str(xml)]) == 0
    ev = run_stub(VIVADO / "u55c" / "package_xo.tcl", str(cfg), tmp=tmp_path)
    xo = ev.calls("package_xo")[0]
    assert option(xo, "-kernel_xml") == str(xml)
    assert option(xo, "-kernel_name") == pkg["u55c"]["core"]["name"]
    assert option(xo, "-ip_directory") == str(tmp_path / "u55c" / "ip")
    assert option(xo, "-xo_path") == str(tmp_path / "u55c" / "kv_krnl.xo")


def test_package_xo_needs_kernel_xml(tmp_path):
    ev = run_stub(VIVADO / "u55c" / "package_xo.tcl", str(board_config("u55c", tmp_path)), tmp=tmp_path,
                  expect_ok=False)
    assert ev[-1]["args"] == ["1"] and "kernel-xml" in ev[-1]["result"]
    assert not ev.calls("package_xo")


def test_link_cfg_streams_the_cmac_through_kv(pkg):
    m = flow.load_manifest("u55c")
    lines = [ln.strip() for ln in (VIVADO / "u55c" / "link.cfg").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines[0] == "[connectivity]"
    entries = [ln.split("=", 1) for ln in lines[1:]]
    nk = {v.split(":")[2]: v.split(":")[0] for k, v in entries if k == "nk"}
    assert nk[m["instance"]] == pkg["u55c"]["core"]["name"]
    streams = [tuple(v.split(":")[:2]) for k, v in entries if k in ("stream_connect", "sc")]
    kv = m["instance"]
    assert sorted(streams) == sorted([("cmac_0.M_AXIS", f"{kv}.s_axis_rx"), (f"{kv}.m_axis_tx", "cmac_0.S_AXIS")])
    for src, dst in streams:
        for end in (src, dst):
            cu, port = end.split(".")
            assert cu in nk
            if cu == kv:
                assert port in pkg["u55c"]["interfaces"]
    assert "cmac_0" in nk and nk["cmac_0"] == "cmac_0"


# --- make -C hw overlay without Vivado ---------------------------------------------------------

def _make_overlay(board: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-C", str(HW), "overlay", f"BOARD={board}"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("board, scripts", [
    ("kr260", ["package_ip.tcl", "kr260/build.tcl"]),
    ("u55c", ["package_ip.tcl", "u55c/package_xo.tcl", "u55c/link.cfg", "v++ --link"]),
])
def test_make_overlay_without_vivado_says_what_it_would_build(board, scripts):
    if shutil.which("vivado"):  # pragma: no cover - never on the machines this runs on
        pytest.skip("Vivado is installed: `make overlay` would really build")
    proc = _make_overlay(board)
    assert proc.returncode != 0
    assert "nothing was built" in proc.stderr and "vivado (not on PATH)" in proc.stderr
    for s in scripts:
        assert s in proc.stderr, s
    for out in flow.load_manifest(board)["outputs"]:
        assert str(REPO / "overlays" / board / out) in proc.stderr
        assert not (REPO / "overlays" / board / out).exists()


def test_make_overlay_unknown_board_lists_boards():
    proc = _make_overlay("zcu999")
    assert proc.returncode != 0
    assert "unknown board 'zcu999'" in proc.stderr
    assert all(b in proc.stderr for b in BOARDS)
    assert flow.boards() == BOARDS
