"""pynq_kv.load(): each path it can take, and every bad input it must refuse before loading.

No board and no Alveo card were available: the PYNQ path runs PYNQ's own driver binding and
MMIO code on the simulated PYNQ device (pynq_kv.pynq_driver.SimulatedDevice) behind a stand-in
of pynq.Overlay, and the XRT path runs against a stand-in `pyxrt` module that records every
call. Both stand-ins answer register reads from a register-level double of the engine
(tests/csr_double.py) or the Verilated kv_top.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import pynq_kv
from csr_double import CsrDouble
from pynq_kv import manifest as mf
from pynq_kv import overlay as ovl
from pynq_kv import regmap as rm
from pynq_kv.errors import (
    DriverUnavailable,
    ManifestError,
    OverlayError,
    OverlayNotBuilt,
    UnknownBoard,
)
from pynq_kv.geometry import Geometry

REPO = Path(__file__).resolve().parents[1]

SMALL = Geometry(key_width=288, value_width=32, ways=2, rows=64, stash=2, rules=8)
# the geometry of the cached kv_top build tests/test_net_board.py and test_serve.py use
BOARD_GEOMETRY = Geometry(key_width=288, value_width=256, ways=4, rows=1024, stash=8, rules=16)
HWH_KR260 = '<EDKSYSTEM><SYSTEMINFO ARCH="zynquplus" DEVICE="xck26" PACKAGE="sfvc784" SPEEDGRADE="-2LV"/></EDKSYSTEM>'


@pytest.fixture(autouse=True)
def _nothing_present(monkeypatch):
    """No PYNQ device, no XRT, no board named by the environment, unless a test says so."""
    monkeypatch.setattr(ovl, "pynq_device_present", lambda: False)
    monkeypatch.setattr(ovl, "xrt_present", lambda: False)
    for name in ("BOARD", ovl.BOARD_ENV, mf.OVERLAYS_ENV):
        monkeypatch.delenv(name, raising=False)


def overlays(tmp_path: Path, board: str, geometry: Geometry = SMALL, files: tuple[str, ...] = (),
             **changes: Any) -> Path:
    """A copy of overlays/<board>/manifest.json under tmp_path with the geometry (and any other
    keys) changed, and the named build outputs present; returns the overlays folder."""
    root = tmp_path / "overlays"
    folder = root / board
    folder.mkdir(parents=True)
    manifest = json.loads(mf.manifest_path(board, REPO / "overlays").read_text())
    manifest["geometry"] = mf.geometry_params(geometry)
    manifest.update(changes)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    for name in files:
        (folder / name).write_text(HWH_KR260 if name.endswith(".hwh") else "not a real bitstream")
    return root


# -- nothing present: the simulated overlay -----------------------------------------------------


def test_nothing_present_opens_the_model_and_says_so_in_one_line(caplog):
    with caplog.at_level(logging.INFO, logger="pynq_kv.overlay"):
        ov = pynq_kv.load(rows=64, ways=2, value_kind="int")
    with ov:
        assert isinstance(ov, pynq_kv.KVOverlay)
        assert (ov.kind, ov.source, ov.board) == ("simulated", "simulation (model)", "sim")
        assert ov.frontend is None and ov.engine.backend.name == "model"
        assert ov.engine.geometry.rows == 64 and ov.engine.value_kind == "int"
        assert ov.manifest["clock"] == {"mhz": 300.0, "assumed": True,
                                        "source": ov.manifest["clock"]["source"]}
        assert ov.manifest["geometry"]["ROWS"] == 64 and ov.manifest["regmap_version"] == "1.1"
        ov.engine.set(b"k", 7)
        assert ov.engine.get(b"k") == 7 and ov.engine.stats()["inserts"] == 1
        info = ov.info()
        assert info["kind"] == "simulated" and info["frontend"] is None
        json.dumps(info)  # what pynq-kv info --json and /v1/overlay print
    lines = [r.getMessage() for r in caplog.records if r.name == "pynq_kv.overlay"]
    assert len(lines) == 1 and "simulated" in lines[0] and "model" in lines[0]
    assert "300 MHz (assumed)" in lines[0]


def test_the_rtl_backend_is_the_verilated_kv_top_with_its_front_end():
    from pynq_kv import sim

    try:
        sim.verilator_env()
    except sim.SimBuildError as exc:
        pytest.skip(f"no usable Verilator: {exc}")
    g = BOARD_GEOMETRY
    with pynq_kv.load(backend="rtl", geometry=g) as ov:
        assert ov.kind == "simulated" and ov.source == "simulation (Verilated kv_top)"
        assert ov.engine.backend.name == "rtl" and ov.engine.geometry == g
        assert ov.manifest["top"] == "kv_top" and ov.manifest["geometry"]["WAYS"] == 4
        fe = ov.frontend
        assert fe.settings() == {"mac": "02:00:00:00:00:01", "ip": "10.0.0.1",
                                 "udp_port": 11211, "data_w": 64}
        fe.ip, fe.mac, fe.udp_port = "192.168.7.9", "02:aa:bb:cc:dd:ee", 12000
        assert (fe.ip, fe.mac, fe.udp_port) == ("192.168.7.9", "02:aa:bb:cc:dd:ee", 12000)
        assert set(fe.counters()) == set(rm.FE_COUNTER_NAMES)
        ov.engine.set(b"key", b"value")
        assert ov.engine.get(b"key") == b"value"


# -- a PYNQ board: the simulated PYNQ device behind a stand-in of pynq.Overlay ------------------


class MacRegisters:
    """The xxv_ethernet register window: a dict of words (tx/rx enable clear after reset)."""

    def __init__(self) -> None:
        self.words = {ovl.XXV_CONFIGURATION_TX_REG1: 0x2, ovl.XXV_CONFIGURATION_RX_REG1: 0x0}

    def read32(self, offset: int) -> int:
        return self.words.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        self.words[offset] = value


@pytest.fixture
def pynq_board(monkeypatch):
    """pynq.Overlay replaced by a stand-in: it records its calls and holds the engine IP bound
    by PYNQ's own driver assignment (open_simulated_ip) over `regs`, and the MAC window."""
    if importlib.util.find_spec("pynq") is None:
        pytest.skip("pynq is not installed (pip install 'pynq-kv[pynq]')")
    from pynq_kv.pynq_driver import SimulatedDevice, open_simulated_ip

    import pynq

    state: dict[str, Any] = {"calls": [], "regs": None, "mac": MacRegisters()}

    class StandInOverlay:
        def __init__(self, bitfile_name: str, **kwargs: Any) -> None:
            state["calls"].append(("Overlay", bitfile_name, kwargs))
            if state["regs"] is None:  # what PYNQ raises for a .hwh it cannot parse
                raise RuntimeError("no IP found in the hardware handoff file")
            self.kv_engine_top_0 = open_simulated_ip(state["regs"])
            self.device = SimulatedDevice(state["mac"], base_addr=0xA001_0000, length=0x1_0000)

    monkeypatch.setattr(pynq, "Overlay", StandInOverlay)
    monkeypatch.setattr(ovl, "pynq_device_present", lambda: True)
    return state


def test_pynq_board_loads_kv_bit_through_pynq_overlay_and_the_bound_driver(tmp_path, pynq_board):
    from pynq_kv.pynq_driver import KVEngineIP

    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"))
    pynq_board["regs"] = regs = CsrDouble(SMALL)
    with pynq_kv.load(overlays=root) as ov:  # auto: the only vivado board of this folder
        assert ov.kind == "pynq" and ov.board == "kr260"
        assert ov.source == str(root / "kr260" / "kv.bit")
        assert pynq_board["calls"] == [("Overlay", ov.source, {})]
        assert ov.manifest["part"] == "xck26-sfvc784-2LV-c" and ov.manifest["clock"]["mhz"] == 156.25
        assert ov.engine.backend.name == "pynq" and ov.engine.geometry == SMALL
        assert isinstance(ov.frontend.regs, KVEngineIP)
        before = regs.commands
        ov.engine.set(b"k", b"v1")
        assert ov.engine.get(b"k") == b"v1" and regs.commands == before + 2
        ov.frontend.udp_port = 4242
        assert regs.regs[rm.REG_FE_UDP_PORT] == 4242 and ov.frontend.udp_port == 4242
        # the MAC was enabled through its registers, the other bits kept
        assert pynq_board["mac"].words == {ovl.XXV_CONFIGURATION_TX_REG1: 0x3,
                                           ovl.XXV_CONFIGURATION_RX_REG1: 0x1}


def test_pynq_board_on_the_verilated_kv_top(tmp_path, pynq_board):
    from pynq_kv import sim

    try:
        sim.verilator_env()
    except sim.SimBuildError as exc:
        pytest.skip(f"no usable Verilator: {exc}")
    from pynq_kv.board import VirtualBoard

    root = overlays(tmp_path, "kr260", BOARD_GEOMETRY, files=("kv.bit", "kv.hwh"))
    virtual = VirtualBoard(BOARD_GEOMETRY)
    pynq_board["regs"] = virtual.device
    try:
        with pynq_kv.load("kr260", "pynq", overlays=root) as ov:
            assert ov.engine.geometry == BOARD_GEOMETRY
            assert ov.frontend.settings()["mac"] == "02:00:00:00:00:01"
            ov.engine.set(b"on the rtl", b"through pynq mmio")
            assert ov.engine.get(b"on the rtl") == b"through pynq mmio"
            assert ov.engine.stats()["inserts"] == 1
    finally:
        virtual.close()


@pytest.mark.parametrize("missing", ["kv.bit", "kv.hwh"])
def test_pynq_missing_bitstream_names_the_file_and_how_to_build_it(tmp_path, pynq_board, missing):
    files = tuple(f for f in ("kv.bit", "kv.hwh") if f != missing)
    root = overlays(tmp_path, "kr260", files=files)
    with pytest.raises(OverlayNotBuilt) as err:
        pynq_kv.load("kr260", overlays=root)
    assert str(root / "kr260" / missing) in str(err.value)
    assert "make -C hw overlay BOARD=kr260" in str(err.value)
    assert pynq_board["calls"] == []  # nothing was loaded


def test_pynq_wrong_part_is_refused_before_loading(tmp_path, pynq_board):
    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"), part="xczu7ev-ffvc1156-2-e")
    with pytest.raises(ManifestError) as err:
        pynq_kv.load("kr260", overlays=root)
    assert "was built for part xck26-sfvc784-2lv" in str(err.value)
    assert "xczu7ev-ffvc1156-2-e" in str(err.value) and str(root / "kr260" / "kv.hwh") in str(err.value)
    assert pynq_board["calls"] == []


def test_pynq_wrong_register_map_version_is_refused_before_loading(tmp_path, pynq_board):
    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"), regmap_version="2.0")
    with pytest.raises(ManifestError) as err:
        pynq_kv.load("kr260", overlays=root)
    assert str(root / "kr260" / "manifest.json") in str(err.value)
    assert "2.0" in str(err.value) and "1.1" in str(err.value)
    assert pynq_board["calls"] == []


def test_pynq_bitstream_that_is_not_the_manifest_s_is_refused_and_no_engine_made(tmp_path, pynq_board):
    root = overlays(tmp_path, "kr260", Geometry(key_width=288, value_width=32, ways=2, rows=128,
                                                 stash=2, rules=8), files=("kv.bit", "kv.hwh"))
    pynq_board["regs"] = regs = CsrDouble(SMALL)  # the hardware has 64 rows, the manifest 128
    with pytest.raises(ManifestError) as err:
        pynq_kv.load("kr260", overlays=root)
    assert "ROWS=64 (manifest: 128)" in str(err.value) and "kv.bit" in str(err.value)
    assert regs.commands == 0  # no engine was made: nothing was written to the tables
    assert pynq_board["mac"].words[ovl.XXV_CONFIGURATION_RX_REG1] == 0  # MAC left disabled


def test_pynq_failing_to_load_the_bitstream_is_an_overlay_error(tmp_path, pynq_board):
    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"))
    with pytest.raises(OverlayError, match="PYNQ could not load .*kv.bit: no IP found") as err:
        pynq_kv.load("kr260", overlays=root)
    assert "make -C hw overlay BOARD=kr260" in str(err.value)


def test_geometry_options_on_a_board_must_match_the_hardware(tmp_path, pynq_board):
    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"))
    pynq_board["regs"] = CsrDouble(SMALL)
    with pytest.raises(OverlayError, match="rows=64, asked for rows=1024"):
        pynq_kv.load("kr260", overlays=root, rows=1024)


# -- an Alveo card: a stand-in pyxrt that records the calls -------------------------------------


def fake_pyxrt(regs: Any, platform: str, kernels: tuple[str, ...] = ("kv_krnl",),
               binding: str = "ip") -> types.ModuleType:
    """A pyxrt stand-in: xclbin/device/ip (or the older kernel.read_register binding, or
    neither) recording every call in .calls; register reads answered by `regs`."""
    module = types.ModuleType("pyxrt")
    calls: list[tuple] = []
    module.calls = calls

    class Named:
        def __init__(self, name: str) -> None:
            self.name = name

        def get_name(self) -> str:
            return self.name

    class xclbin:
        def __init__(self, path: str) -> None:
            calls.append(("xclbin", path))
            if Path(path).read_text() == "corrupt":
                raise RuntimeError("Invalid xclbin")  # what XRT raises for a file it cannot read
            self.path = path

        def get_xsa_name(self) -> str:
            return platform

        def get_kernels(self) -> list:
            return [Named(k) for k in kernels]

    class device:
        def __init__(self, index: int) -> None:
            calls.append(("device", index))

        def load_xclbin(self, xb: xclbin) -> str:
            calls.append(("load_xclbin", xb.path))
            return "uuid-1"

    class Registers:
        def read_register(self, offset: int) -> int:
            calls.append(("read_register", offset))
            return regs.read32(offset)

        def write_register(self, offset: int, value: int) -> None:
            calls.append(("write_register", offset, value))
            regs.write32(offset, value)

    class ip(Registers):
        def __init__(self, dev: device, uuid: str, name: str) -> None:
            calls.append(("ip", uuid, name))

    class kernel(Registers if binding == "kernel" else object):
        cu_access_mode = types.SimpleNamespace(exclusive="exclusive")

        def __init__(self, dev: device, uuid: str, name: str, mode: str) -> None:
            calls.append(("kernel", uuid, name, mode))

    module.xclbin, module.device, module.kernel = xclbin, device, kernel
    if binding == "ip":
        module.ip = ip
    return module


@pytest.fixture
def alveo(monkeypatch):
    """Install a stand-in pyxrt: returns a function (regs, **fake_pyxrt options) -> module."""
    def install(regs: Any, platform: str = "xilinx_u55c_gen3x16_xdma_3_202210_1",
                **kwargs: Any) -> types.ModuleType:
        module = fake_pyxrt(regs, platform, **kwargs)
        monkeypatch.setitem(sys.modules, "pyxrt", module)
        monkeypatch.setattr(ovl, "xrt_present", lambda: True)
        return module
    return install


@pytest.fixture
def closed(monkeypatch):
    """Records every XrtRegisters.close() (the card's handles released)."""
    from pynq_kv import xrt_driver

    seen: list[str] = []
    original = xrt_driver.XrtRegisters.close

    def spy(self) -> None:
        seen.append(self.name)
        original(self)

    monkeypatch.setattr(xrt_driver.XrtRegisters, "close", spy)
    return seen


def test_alveo_loads_the_xclbin_through_pyxrt_and_drives_the_registers(tmp_path, alveo, closed):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    regs = CsrDouble(SMALL)
    fake = alveo(regs)
    xclbin = str(root / "u55c" / "kv.xclbin")
    ov = pynq_kv.load(overlays=root)  # auto: pyxrt imports, the only vitis board
    assert (ov.kind, ov.board, ov.source) == ("xrt", "u55c", xclbin)
    assert fake.calls[:4] == [("xclbin", xclbin), ("device", 0), ("load_xclbin", xclbin),
                              ("ip", "uuid-1", "kv_krnl:{kv_krnl_1}")]
    assert ("read_register", rm.REG_ID) in fake.calls
    assert ov.manifest["platform"] == "xilinx_u55c_gen3x16_xdma_3_202210_1"
    assert ov.engine.backend.name == "xrt" and ov.engine.geometry == SMALL
    fake.calls.clear()
    ov.engine.set(b"card", b"v")
    assert ("write_register", rm.REG_CTRL, rm.CTRL_GO) in fake.calls
    assert ov.engine.get(b"card") == b"v"
    ov.frontend.ip = "10.1.2.3"
    assert ("write_register", rm.REG_FE_IP, 0x0A010203) in fake.calls
    ov.close()
    assert closed == ["kv_krnl:{kv_krnl_1}"]


def test_alveo_with_the_older_kernel_register_binding(tmp_path, alveo):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    fake = alveo(CsrDouble(SMALL), binding="kernel")
    with pynq_kv.load("u55c", "xrt", overlays=root, device=1) as ov:
        assert ("device", 1) in fake.calls
        assert ("kernel", "uuid-1", "kv_krnl", "exclusive") in fake.calls
        ov.engine.set(b"a", b"b")
        assert ov.engine.get(b"a") == b"b"


def test_alveo_bindings_without_register_access_are_refused_and_released(tmp_path, alveo):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    alveo(CsrDouble(SMALL), binding="none")
    with pytest.raises(DriverUnavailable, match="neither xrt::ip nor kernel.read_register"):
        pynq_kv.load("u55c", overlays=root)


def test_xrt_present_without_the_xclbin_names_the_file_and_opens_nothing(tmp_path, alveo):
    root = overlays(tmp_path, "u55c")
    fake = alveo(CsrDouble(SMALL))
    with pytest.raises(OverlayNotBuilt) as err:
        pynq_kv.load(overlays=root)
    assert str(root / "u55c" / "kv.xclbin") in str(err.value)
    assert "make -C hw overlay BOARD=u55c" in str(err.value) and "backend='model'" in str(err.value)
    assert fake.calls == []


def test_xclbin_for_another_platform_is_refused_before_the_card_is_opened(tmp_path, alveo):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    fake = alveo(CsrDouble(SMALL), platform="xilinx_u250_gen3x16_xdma_4_1_202210_1")
    with pytest.raises(ManifestError, match="u250") as err:
        pynq_kv.load("u55c", overlays=root)
    assert str(root / "u55c" / "kv.xclbin") in str(err.value)
    assert [c[0] for c in fake.calls] == ["xclbin"]


def test_unreadable_xclbin_is_refused_before_the_card_is_opened(tmp_path, alveo):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    (root / "u55c" / "kv.xclbin").write_text("corrupt")
    fake = alveo(CsrDouble(SMALL))
    with pytest.raises(ManifestError, match="XRT cannot read .*kv.xclbin: Invalid xclbin"):
        pynq_kv.load("u55c", overlays=root)
    assert [c[0] for c in fake.calls] == ["xclbin"]


def test_xclbin_without_the_kernel_is_refused_before_the_card_is_opened(tmp_path, alveo):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    fake = alveo(CsrDouble(SMALL), kernels=("vadd",))
    with pytest.raises(ManifestError, match="vadd, not kv_krnl"):
        pynq_kv.load("u55c", overlays=root)
    assert [c[0] for c in fake.calls] == ["xclbin"]


def test_hardware_register_map_version_mismatch_closes_the_card(tmp_path, alveo, closed):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    regs = CsrDouble(SMALL)
    regs.regs[rm.REG_VERSION] = 0x0001_0007  # 1.7: the mailbox speaks it, the manifest says 1.1
    alveo(regs)
    with pytest.raises(ManifestError, match="register map 1.7, its manifest says 1.1"):
        pynq_kv.load("u55c", overlays=root)
    assert closed == ["kv_krnl:{kv_krnl_1}"] and regs.commands == 0


def test_not_an_engine_at_the_kernel_closes_the_card(tmp_path, alveo, closed):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    regs = CsrDouble(SMALL)
    regs.regs[rm.REG_ID] = 0
    alveo(regs)
    with pytest.raises(pynq_kv.KVError, match="no pynq-kv engine here"):
        pynq_kv.load("u55c", overlays=root)
    assert closed == ["kv_krnl:{kv_krnl_1}"]


def test_backend_xrt_without_pyxrt_says_where_it_comes_from(tmp_path, monkeypatch):
    root = overlays(tmp_path, "u55c", files=("kv.xclbin",))
    monkeypatch.setitem(sys.modules, "pyxrt", None)  # import pyxrt raises ImportError
    with pytest.raises(DriverUnavailable, match="/opt/xilinx/xrt/setup.sh"):
        pynq_kv.load("u55c", "xrt", overlays=root)


# -- names and manifests ------------------------------------------------------------------------


def test_unknown_board_lists_the_boards():
    with pytest.raises(UnknownBoard) as err:
        pynq_kv.load("zcu999")
    assert "'zcu999'" in str(err.value) and "kr260, u55c" in str(err.value)


def test_board_names_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(ovl.BOARD_ENV, "nope")
    with pytest.raises(UnknownBoard, match="'nope'"):
        pynq_kv.load()
    with pynq_kv.load(backend="model", rows=64) as ov:  # the simulated overlay names no board
        assert ov.kind == "simulated"


def test_board_and_backend_that_do_not_go_together():
    with pytest.raises(OverlayError, match="simulated overlay, which has no board"):
        pynq_kv.load("kr260", "model")
    with pytest.raises(OverlayError, match="it loads with backend='xrt'"):
        pynq_kv.load("u55c", "pynq")
    with pytest.raises(OverlayError, match="unknown backend 'fpga'"):
        pynq_kv.load(backend="fpga")
    with pytest.raises(TypeError, match="unknown option"):
        pynq_kv.load(colour="blue")


def test_unreadable_manifest_names_its_file(tmp_path):
    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"))
    path = root / "kr260" / "manifest.json"
    path.write_text("{not json")
    with pytest.raises(ManifestError) as err:
        pynq_kv.load("kr260", overlays=root)
    assert str(path) in str(err.value)


def test_a_pynq_host_with_two_zynq_boards_must_name_one(tmp_path, monkeypatch):
    root = overlays(tmp_path, "kr260")
    shutil.copytree(root / "kr260", root / "kv260")
    text = (root / "kv260" / "manifest.json").read_text().replace('"board": "kr260"', '"board": "kv260"')
    (root / "kv260" / "manifest.json").write_text(text)
    monkeypatch.setattr(ovl, "pynq_device_present", lambda: True)
    with pytest.raises(OverlayError, match="more than one vivado board.*kr260, kv260"):
        pynq_kv.load(overlays=root)
    monkeypatch.setenv("BOARD", "KV260")  # what a PYNQ image sets
    with pytest.raises(OverlayNotBuilt, match="kv260/kv.bit"):
        pynq_kv.load(overlays=root)


def test_import_pynq_kv_does_not_import_the_overlay_stacks():
    import subprocess

    code = ("import sys, pynq_kv; assert callable(pynq_kv.load); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pynq', 'pyxrt', 'fastapi')"
            " or m == 'pynq_kv.sim'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- pynq-kv info ---------------------------------------------------------------------------------


def _cli(*args: str):
    from click.testing import CliRunner

    from pynq_kv.cli import cli

    try:
        runner = CliRunner(mix_stderr=False)  # click 8.1
    except TypeError:
        runner = CliRunner()
    return runner.invoke(cli, list(args), catch_exceptions=False)


def test_pynq_kv_info_reports_the_overlay_and_its_manifest(tmp_path):
    state = str(tmp_path / "kv.npz")
    text = _cli("--state", state, "--rows", "64", "info").stdout
    assert "overlay:" in text and "simulated sim from simulation (model)" in text
    assert "mhz:" in text and "300.0" in text and "assumed:" in text
    assert "none: the model has no RTL Ethernet front-end" in text
    data = json.loads(_cli("--state", state, "--rows", "64", "info", "--json").stdout)
    overlay = data["overlay"]
    assert (overlay["kind"], overlay["source"], overlay["board"]) == (
        "simulated", "simulation (model)", "sim")
    assert overlay["manifest"]["clock"]["mhz"] == 300.0 and overlay["manifest"]["clock"]["assumed"]
    assert overlay["manifest"]["geometry"]["ROWS"] == 64 and overlay["frontend"] is None


def test_pynq_kv_info_on_a_pynq_board(tmp_path, pynq_board, monkeypatch):
    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"))
    monkeypatch.setenv(mf.OVERLAYS_ENV, str(root))
    pynq_board["regs"] = CsrDouble(SMALL)
    data = json.loads(_cli("--state", str(tmp_path / "kv.npz"), "info", "--json").stdout)
    assert data["overlay"]["kind"] == "pynq" and data["overlay"]["board"] == "kr260"
    assert data["overlay"]["source"] == str(root / "kr260" / "kv.bit")
    assert data["overlay"]["manifest"]["part"] == "xck26-sfvc784-2LV-c"
    assert set(data["overlay"]["frontend"]) == {"mac", "ip", "udp_port", "data_w", "counters"}
    assert data["backend"] == "pynq" and data["geometry"]["rows"] == SMALL.rows


def test_pynq_kv_with_an_unknown_board_is_an_error_naming_the_boards(tmp_path):
    result = _cli("--state", str(tmp_path / "kv.npz"), "--board", "zcu999", "info")
    assert result.exit_code == 1
    assert "unknown board 'zcu999'" in result.stderr and "kr260, u55c" in result.stderr


# -- the admin service and serve open the engine through load() ---------------------------------


def test_admin_overlay_endpoint_reports_the_loaded_overlay_and_reload_reopens_it():
    from api_support import AUTH, client_for
    from pynq_kv.appliance import Appliance

    opened: list[pynq_kv.KVOverlay] = []

    def factory() -> pynq_kv.KVOverlay:
        opened.append(pynq_kv.load(rows=64, rules=16))
        return opened[-1]

    appliance = Appliance(factory)
    appliance.engine.set(b"k", b"v")
    with client_for(appliance) as client:
        o = client.get("/v1/overlay").json()
        assert (o["kind"], o["source"], o["board"]) == ("simulated", "simulation (model)", "sim")
        assert o["manifest"]["clock"] == opened[0].manifest["clock"]
        assert o["manifest"]["geometry"]["ROWS"] == 64 and o["frontend"] is None
        assert o["backend"] == "model" and o["geometry"]["rows"] == 64
        assert client.post("/v1/overlay/reload", headers=AUTH).json()["restored"] == 1
        assert len(opened) == 2 and appliance.overlay is opened[1]
        assert appliance.engine is opened[1].engine and appliance.engine.get(b"k") == b"v"
        assert client.get("/v1/overlay").json()["reloads"] == 1
    appliance.close()


def test_admin_overlay_endpoint_on_a_pynq_board(tmp_path, pynq_board):
    from api_support import client_for
    from pynq_kv.appliance import Appliance

    root = overlays(tmp_path, "kr260", files=("kv.bit", "kv.hwh"))
    pynq_board["regs"] = CsrDouble(SMALL)
    appliance = Appliance(lambda: pynq_kv.load(overlays=root))
    with client_for(appliance) as client:
        o = client.get("/v1/overlay").json()
    assert (o["kind"], o["board"], o["source"]) == ("pynq", "kr260", str(root / "kr260" / "kv.bit"))
    assert o["manifest"]["part"] == "xck26-sfvc784-2LV-c" and o["manifest"]["clock"]["mhz"] == 156.25
    assert o["frontend"]["udp_port"] == 0 and set(o["frontend"]["counters"]) == set(rm.FE_COUNTER_NAMES)
    assert o["backend"] == "pynq"


def test_an_engine_given_directly_reports_no_overlay():
    from api_support import client_for, small_appliance

    with client_for(small_appliance()) as client:
        o = client.get("/v1/overlay").json()
    assert o["kind"] is None and o["manifest"] is None and o["backend"] == "model"


def test_serve_opens_the_engine_through_load(tmp_path):
    from pynq_kv.serve.config import build_config
    from pynq_kv.serve.runner import make_appliance

    config = build_config({"geometry": {"rows": 64}, "layout": "src_ip:ipv4"}, {})
    assert config.backend == "auto"
    appliance = make_appliance(config)
    try:
        assert appliance.overlay.kind == "simulated" and appliance.engine.geometry.rows == 64
        assert appliance.layout is not None and appliance.layout.key_width == 288
    finally:
        appliance.close()
    bad = build_config({"board": "zcu999"}, {})
    with pytest.raises(UnknownBoard, match="kr260, u55c"):
        make_appliance(bad)
