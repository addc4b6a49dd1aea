"""The PYNQ driver of the engine IP, run by PYNQ 4.0's own DefaultIP/MMIO code on a simulated device.

Path under test: KVEngineIP.read32/write32 -> DefaultIP.read/write -> pynq.MMIO (REGISTER_RW)
-> SimulatedDevice.read_registers/write_registers -> a register double's read32/write32.
No board, no bitstream, no BOARD variable.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("pynq") is None:
    pytest.skip("pynq is not installed (pip install 'pynq-kv[pynq]')", allow_module_level=True)

# pynq_kv.pynq_driver first: it imports pynq without letting pynq's import-time warnings out
# (pytest -W error would otherwise turn them into a collection error).
from pynq_kv.pynq_driver import (  # noqa: E402
    KV_ENGINE_VLNV,
    SIM_PHYS_ADDR,
    KVEngineIP,
    SimulatedDevice,
    ip_description,
    open_simulated_ip,
    simulated_active_device,
)

import pynq  # noqa: E402
from pynq.pl_server.device import DeviceMeta  # noqa: E402

from pynq_kv import regmap as rm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class DictRegisters:
    """A register double: a dict of 32-bit words, 0 where never written, every access logged.

    It insists on what real registers get from the driver: word-aligned offsets inside the 4 KiB
    map and plain Python ints of 32 bits.
    """

    def __init__(self, preset: dict[int, int] | None = None) -> None:
        self.words: dict[int, int] = dict(preset or {})
        self.log: list[tuple[str, int, int]] = []

    def read32(self, offset: int) -> int:
        assert type(offset) is int and offset % 4 == 0 and 0 <= offset < rm.ADDR_SPAN, offset
        value = self.words.get(offset, 0)
        self.log.append(("r", offset, value))
        return value

    def write32(self, offset: int, value: int) -> None:
        assert type(offset) is int and offset % 4 == 0 and 0 <= offset < rm.ADDR_SPAN, offset
        assert type(value) is int and 0 <= value <= 0xFFFFFFFF, value
        self.log.append(("w", offset, value))
        self.words[offset] = value


class SpyDevice(SimulatedDevice):
    """Records the calls PYNQ's MMIO makes on the device, then forwards them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple] = []

    def read_registers(self, address, length):
        data = super().read_registers(address, length)
        self.calls.append(("read_registers", address, length, data))
        return data

    def write_registers(self, address, data):
        self.calls.append(("write_registers", address, bytes(data)))
        super().write_registers(address, data)


def spy_ip(regs: DictRegisters, phys_addr: int = SIM_PHYS_ADDR) -> KVEngineIP:
    device = SpyDevice(regs, base_addr=phys_addr)
    return KVEngineIP(ip_description(device, phys_addr=phys_addr))


@pytest.fixture(autouse=True)
def _no_board(monkeypatch):
    for name in ("BOARD", "XILINX_XRT", "PYNQ_REMOTE_DEVICES"):
        monkeypatch.delenv(name, raising=False)


# -- registration with PYNQ ------------------------------------------------------------------

def test_driver_is_bound_to_the_engine_vlnv():
    from pynq.overlay import _ip_drivers

    assert KV_ENGINE_VLNV.count(":") == 3
    assert issubclass(KVEngineIP, pynq.DefaultIP)
    assert _ip_drivers[KV_ENGINE_VLNV] is KVEngineIP
    # the version-less key, used by Overlay(..., ignore_version=True)
    assert _ip_drivers[KV_ENGINE_VLNV.rpartition(":")[0]] is KVEngineIP


def test_simulated_device_stays_out_of_pynq_device_discovery():
    # Only Device subclasses with _probe_ join the probe list; ours must never be enumerated
    # (on a board, pynq.Device.devices must stay what PYNQ finds).
    assert "_probe_" not in SimulatedDevice.__dict__
    assert SimulatedDevice not in DeviceMeta._subclasses.values()
    assert all(not issubclass(cls, SimulatedDevice) for cls in DeviceMeta._subclasses.values())


def test_open_simulated_ip_binds_like_an_overlay():
    regs = DictRegisters()
    ip = open_simulated_ip(regs)
    assert type(ip) is KVEngineIP
    assert isinstance(ip.device, SimulatedDevice) and ip.device.regs is regs
    assert ip.device.has_capability("REGISTER_RW")
    assert not ip.device.has_capability("MEMORY_MAPPED")
    assert ip.mmio.device is ip.device
    assert ip.mmio.base_addr == SIM_PHYS_ADDR and ip.mmio.length == rm.ADDR_SPAN
    assert ip.fullpath == "kv_engine_top_0"
    assert regs.log == []  # building the driver touches no register


def test_version_mismatch_is_not_bound_silently():
    other_version = KV_ENGINE_VLNV.rpartition(":")[0] + ":9.9"
    with pytest.warns(UserWarning, match="ignore_version"), pytest.raises(TypeError):
        open_simulated_ip(DictRegisters(), vlnv=other_version)
    ip = open_simulated_ip(DictRegisters(), vlnv=other_version, ignore_version=True)
    assert type(ip) is KVEngineIP


def test_too_small_address_range_is_an_unsupported_configuration():
    device = SimulatedDevice(DictRegisters(), length=0x100)
    with pytest.raises(pynq.UnsupportedConfiguration):
        KVEngineIP(ip_description(device, addr_range=0x100))


ENTRY_POINT = "pynq_kv = pynq_kv.pynq_driver"  # pyproject.toml: [project.entry-points."pynq.lib"]


def test_pynq_lib_entry_point_makes_overlay_import_the_driver(tmp_path):
    # What Overlay.__init__ does before binding drivers (pynq/overlay.py _register_drivers):
    # import every module registered in the `pynq.lib` entry-point group. A distribution
    # declaring ENTRY_POINT must get pynq_kv.pynq_driver imported and KVEngineIP bound.
    dist = tmp_path / "pynq_kv_entry_point-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pynq-kv-entry-point\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[pynq.lib]\n{ENTRY_POINT}\n")
    script = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("ignore")
        import pynq
        from pynq.overlay import _ip_drivers
        assert "pynq_kv.pynq_driver" not in sys.modules
        pynq.Overlay._register_drivers(None)  # self is not used
        from pynq_kv.pynq_driver import KV_ENGINE_VLNV, KVEngineIP
        assert _ip_drivers[KV_ENGINE_VLNV] is KVEngineIP
        print("bound")
    """)
    env = {k: v for k, v in os.environ.items() if k != "BOARD"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "bound"


def test_installed_pynq_kv_declares_the_pynq_lib_entry_point():
    from importlib.metadata import entry_points

    ours = [ep for ep in entry_points(group="pynq.lib") if ep.value.startswith("pynq_kv")]
    if not ours:
        pytest.skip("the installed pynq-kv declares no `pynq.lib` entry point (pyproject.toml)")
    assert [(ep.name, ep.value) for ep in ours] == [("pynq_kv", "pynq_kv.pynq_driver")]


# -- the access path -------------------------------------------------------------------------

@pytest.mark.parametrize("offset, value", [
    (rm.REG_REQ_OP, 0x12345678),
    (rm.REG_CTRL, rm.CTRL_GO),
    (rm.REG_REQ_KEY + 4 * 63, 0xFFFFFFFF),
    (rm.REG_REQ_VALUE, 0),
])
def test_write32_goes_through_mmio_and_the_device(offset, value):
    regs = DictRegisters()
    ip = spy_ip(regs)
    ip.write32(offset, value)
    assert ip.device.calls == [
        ("write_registers", SIM_PHYS_ADDR + offset, value.to_bytes(4, "little")),
    ]
    assert regs.log == [("w", offset, value)]


@pytest.mark.parametrize("offset, value", [
    (rm.REG_ID, rm.ID_MAGIC),
    (rm.REG_STATUS, rm.STATUS_DONE | rm.STATUS_ERR_BAD_ADDR),
    (rm.REG_COUNTER + 8 * 63 + 4, 0xFFFFFFFF),
    (rm.REG_RSP_TAG, 0),
])
def test_read32_goes_through_mmio_and_the_device(offset, value):
    regs = DictRegisters({offset: value})
    ip = spy_ip(regs)
    got = ip.read32(offset)
    assert got == value and type(got) is int
    assert ip.device.calls == [
        ("read_registers", SIM_PHYS_ADDR + offset, 4, value.to_bytes(4, "little")),
    ]
    assert regs.log == [("r", offset, value)]


def test_base_address_is_the_description_s_phys_addr():
    regs = DictRegisters({rm.REG_VERSION: rm.VERSION})
    ip = spy_ip(regs, phys_addr=0x4_0000_0000)  # a 64-bit address, as on the HPM0 high window
    assert ip.read32(rm.REG_VERSION) == rm.VERSION
    ip.write32(rm.REG_REQ_PRIO, 7)
    assert [call[1] for call in ip.device.calls] == [0x4_0000_0000 + rm.REG_VERSION,
                                                     0x4_0000_0000 + rm.REG_REQ_PRIO]


def test_numpy_and_other_integer_values_reach_the_registers_as_int():
    regs = DictRegisters()
    ip = open_simulated_ip(regs)
    ip.write32(np.int64(rm.REG_REQ_BANK), np.uint32(3))
    ip.write32(rm.REG_REQ_FLAG, True)
    assert regs.log == [("w", rm.REG_REQ_BANK, 3), ("w", rm.REG_REQ_FLAG, 1)]


@pytest.mark.parametrize("offset, value, error", [
    (0x81, 0, ValueError),  # unaligned
    (-4, 0, ValueError),
    (rm.ADDR_SPAN, 0, ValueError),  # past the register map
    (rm.REG_REQ_OP, 1 << 32, ValueError),
    (rm.REG_REQ_OP, -1, ValueError),
    (rm.REG_REQ_OP, 1.0, TypeError),
    ("0x80", 0, TypeError),
])
def test_bad_accesses_are_refused_before_reaching_the_bus(offset, value, error):
    regs = DictRegisters()
    ip = spy_ip(regs)
    with pytest.raises(error):
        ip.write32(offset, value)
    if error is ValueError and type(offset) is int and value == 0:
        with pytest.raises(error):
            ip.read32(offset)
    assert ip.device.calls == [] and regs.log == []


def test_multiword_mmio_accesses_are_split_into_words():
    # The plain pynq MMIO API of the IP works too: a bytes write and an 8-byte read.
    regs = DictRegisters({rm.REG_RSP_DATA_LO: 0x89ABCDEF, rm.REG_RSP_DATA_HI: 0x01234567})
    ip = open_simulated_ip(regs)
    key = (0x0000_0003_0000_0002_0000_0001).to_bytes(12, "little")
    ip.write(rm.REG_REQ_KEY, key)
    assert regs.log == [("w", rm.REG_REQ_KEY, 1), ("w", rm.REG_REQ_KEY + 4, 2),
                        ("w", rm.REG_REQ_KEY + 8, 3)]
    assert ip.mmio.read(rm.REG_RSP_DATA_LO, 8) == 0x01234567_89ABCDEF
    assert ip.mmio.array[rm.REG_ID // 4] == 0


def test_device_rejects_accesses_outside_its_window_and_bad_register_values():
    device = SimulatedDevice(DictRegisters({0: 1 << 32}))
    with pytest.raises(ValueError, match="window"):
        device.read_registers(SIM_PHYS_ADDR - 4, 4)
    with pytest.raises(ValueError, match="window"):
        device.write_registers(SIM_PHYS_ADDR + rm.ADDR_SPAN, b"\0\0\0\0")
    with pytest.raises(ValueError, match="window"):
        device.write_registers(SIM_PHYS_ADDR, b"\0\0")
    with pytest.raises(ValueError, match="register double returned"):
        device.read_registers(SIM_PHYS_ADDR, 4)


def test_active_device_for_code_that_names_no_device():
    regs = DictRegisters({rm.REG_ID: rm.ID_MAGIC})
    device = SimulatedDevice(regs)
    had_active = "_active_device" in pynq.Device.__dict__
    with simulated_active_device(device):
        assert pynq.Device.active_device is device
        mmio = pynq.MMIO(SIM_PHYS_ADDR, rm.ADDR_SPAN)  # device=None: the active device
        assert mmio.read(rm.REG_ID) == rm.ID_MAGIC
        description = ip_description(device)
        del description["device"]
        assert KVEngineIP(description).read32(rm.REG_ID) == rm.ID_MAGIC
    assert ("_active_device" in pynq.Device.__dict__) == had_active


def test_no_warning_once_pynq_is_imported():
    regs = DictRegisters({rm.REG_ID: rm.ID_MAGIC})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ip = open_simulated_ip(regs)
        ip.write32(rm.REG_REQ_OP, rm.OP_GET)
        assert ip.read32(rm.REG_ID) == rm.ID_MAGIC


def test_runs_with_warnings_as_errors_and_no_board_in_a_fresh_interpreter():
    # A fresh interpreter, so `import pynq` itself (its "CPU Architecture" ResourceWarning,
    # pkg_resources) happens under -W error, through the driver; BOARD is unset, and nothing
    # probes the platform. pynqutils is imported after the driver: with newer setuptools its own
    # `import pkg_resources` warns, which the driver's import filters and a bare import would not.
    script = textwrap.dedent("""
        from pynq_kv.pynq_driver import open_simulated_ip
        import pynqutils

        class Regs:
            def __init__(self):
                self.words = {}
            def read32(self, offset):
                return self.words.get(offset, 0)
            def write32(self, offset, value):
                self.words[offset] = value

        regs = Regs()
        ip = open_simulated_ip(regs)
        ip.write32(0x80, 0xDEADBEEF)
        assert ip.read32(0x80) == 0xDEADBEEF and regs.words == {0x80: 0xDEADBEEF}
        try:
            pynqutils.setup_utils.get_platform()
        except Exception as exc:
            print("no platform:", type(exc).__name__)
        print("ok")
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("BOARD", "XILINX_XRT", "PYNQ_REMOTE_DEVICES")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    run = subprocess.run([sys.executable, "-W", "error", "-c", script], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["no platform: UnsupportedPlatform", "ok"]
    assert run.stderr == ""


# -- the mailbox driver over PYNQ ------------------------------------------------------------

def test_mailbox_backend_reads_the_geometry_through_pynq():
    from pynq_kv.geometry import Geometry

    g = Geometry(key_width=144, value_width=32, ways=2, rows=16, stash=2, rules=4, prio_width=4,
                 hash_seed=0x0123_4567_89AB_CDEF)
    regs = DictRegisters({
        rm.REG_ID: rm.ID_MAGIC, rm.REG_VERSION: rm.VERSION, rm.REG_KEY_W: g.key_width,
        rm.REG_VALUE_W: g.value_width, rm.REG_WAYS: g.ways, rm.REG_ROWS: g.rows,
        rm.REG_STASH: g.stash, rm.REG_RULES: g.rules, rm.REG_PRIO_W: g.prio_width,
        rm.REG_HASH_SEED_LO: g.hash_seed & 0xFFFFFFFF, rm.REG_HASH_SEED_HI: g.hash_seed >> 32,
    })
    backend = open_simulated_ip(regs).backend()
    assert backend.geometry == g and backend.name == "pynq"
    assert all(kind == "r" for kind, _, _ in regs.log)


def test_engine_end_to_end_over_pynq_mmio_and_the_csr_double():
    csr_double = pytest.importorskip("csr_double", reason="tests/csr_double.py is not there")
    from pynq_kv import Geometry, KVEngine

    g = Geometry(key_width=144, value_width=64, ways=2, rows=16, stash=2, rules=4, prio_width=4)
    double = csr_double.CsrDouble(g)
    board = KVEngine(open_simulated_ip(double).backend())
    model = KVEngine("model", g)
    for engine in (board, model):
        engine.set(b"alpha", b"one")
        engine.set(b"beta", b"two")
        engine.delete(b"alpha")
    got = {key: board.get(key) for key in (b"alpha", b"beta", b"gamma")}
    assert got == {key: model.get(key) for key in got}
    assert got[b"beta"] == b"two" and got[b"alpha"] is None
    assert board.backend.counters() == model.backend.counters()
    assert double.commands > 0


# -- the driver on Verilated RTL -------------------------------------------------------------

def test_driver_on_the_verilated_register_file():
    # The same KVEngineIP/MMIO path on real RTL: hw/sim/test/kv_sim_regfile.v (ID at word 0,
    # read/write words 1.., SLVERR elsewhere) through pynq_kv.sim's AXI4-Lite harness. The
    # build is the one tests/test_sim.py uses (same parameters, so the cache is shared).
    sim = pytest.importorskip("pynq_kv.sim", reason="pynq_kv.sim is not there")
    try:
        sim.verilator_env()
    except sim.SimBuildError as exc:
        pytest.skip(f"no usable Verilator: {exc}")
    regfile = ROOT / "hw" / "sim" / "test" / "kv_sim_regfile.v"
    if not regfile.exists():
        pytest.skip("hw/sim/test/kv_sim_regfile.v is not there")
    library = sim.build_library("kv_sim_regfile", [regfile],
                                {"ID": 0xC0DE_0042, "REGS": 8, "READ_DELAY": 2})
    with sim.SimDevice(library) as rtl:
        ip = open_simulated_ip(rtl)
        assert ip.read32(0) == 0xC0DE_0042
        ip.write32(4, 0xA5A5_5A5A)
        ip.write32(8, 0xFFFF_FFFF)
        assert [ip.read32(4), ip.read32(8)] == [0xA5A5_5A5A, 0xFFFF_FFFF]
        assert ip.mmio.read(4, 8) == 0xFFFF_FFFF_A5A5_5A5A
        with pytest.raises(sim.SimBusError):  # SLVERR of the RTL reaches the driver's caller
            ip.write32(0, 1)
