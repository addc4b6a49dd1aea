"""`pynq_kv.load()`: open the overlay this machine has -- a Zynq board through PYNQ, an Alveo
card through XRT, or the simulated overlay -- and hand back a `KVOverlay` (docs/overlay.md).

    ov = pynq_kv.load()                  # whatever is here; one log line says which
    ov.engine.set(b"k", b"v")            # the KVEngine every front-end uses
    ov.kind, ov.source, ov.board         # "pynq" | "xrt" | "simulated", file or simulation, board
    ov.manifest["clock"]["mhz"]          # the build description (simulated: derived, clock assumed)
    ov.frontend                          # the RTL Ethernet front-end (None on the model)

Everything that can be checked is checked before anything is loaded (board name, files,
manifest part / platform / register-map version); what can only be checked on the hardware
(its ID, register-map version and geometry against the manifest) is checked right after, and a
failure then closes what was opened. Importing this module imports neither PYNQ, XRT nor the
Verilator harness: each path imports its own stack when it is taken.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Mapping, Optional

from . import manifest as mf
from . import regmap as rm
from .backend import available_backends
from .engine import KVEngine
from .errors import DriverUnavailable, ManifestError, OverlayError, OverlayNotBuilt
from .frontend import Frontend
from .geometry import Geometry
from .mailbox import MailboxBackend
from .options import GEOMETRY_KEYS, EngineOptions

log = logging.getLogger("pynq_kv.overlay")

AUTO = "auto"
#: load()'s backends that are boards, and the manifest flow each loads.
BOARD_FLOWS = {"pynq": "vivado", "xrt": "vitis"}
#: The bitstream file of each flow, in overlays/<board>/.
BITSTREAMS = {"vivado": "kv.bit", "vitis": "kv.xclbin"}
BOARD_ENV = "PYNQ_KV_BOARD"
#: What PYNQ's embedded device probes for (pynq/pl_server/embedded_device.py BS_FPGA_MAN): a
#: Zynq with a PL that Linux can program. Checked without importing pynq (seconds to import).
FPGA_MANAGER = Path("/sys/class/fpga_manager/fpga0/firmware")
#: xxv_ethernet (AMD PG210) configuration registers: bit 0 of each is ctl_tx_enable /
#: ctl_rx_enable, 0 after reset (the MAC neither sends nor receives until they are set).
XXV_CONFIGURATION_TX_REG1 = 0x000C
XXV_CONFIGURATION_RX_REG1 = 0x0014


def backends() -> list[str]:
    """Every name load(backend=...) accepts: auto, the boards, and KVEngine's backends."""
    return [AUTO, *BOARD_FLOWS, *available_backends()]


class KVOverlay:
    """A loaded overlay: its engine, its Ethernet front-end, its manifest and where it came from.

    kind: "pynq", "xrt" or "simulated"; source: the bitstream / xclbin path, or
    "simulation (model)" / "simulation (Verilated kv_top)"; frontend: None on the model, which
    has no RTL front-end (`pynq-kv serve` answers memcached in software there).
    """

    def __init__(self, engine: KVEngine, *, kind: str, source: str, board: str,
                 manifest: dict[str, Any], frontend: Optional[Frontend]) -> None:
        self.engine = engine
        self.kind = kind
        self.source = source
        self.board = board
        self.manifest = manifest
        self.frontend = frontend

    def describe(self) -> str:
        """One line for a log: kind, board, source, geometry and clock."""
        g = self.engine.geometry
        clock = self.manifest["clock"]
        mhz = f"{clock['mhz']:g} MHz" + (" (assumed)" if clock.get("assumed") else "")
        return (f"{self.kind} overlay {self.board} from {self.source}: "
                f"{g.key_width}-bit keys, {g.value_width}-bit values, {g.ways} x {g.rows} rows, "
                f"{g.rules} rules, {mhz}, front-end "
                + ("none (model)" if self.frontend is None else "in the RTL"))

    def info(self) -> dict[str, Any]:
        """What is loaded, for `pynq-kv info` and the admin service's /v1/overlay."""
        frontend = None
        if self.frontend is not None:
            frontend = {**self.frontend.settings(), "counters": self.frontend.counters()}
        return {"kind": self.kind, "source": self.source, "board": self.board,
                "manifest": self.manifest, "frontend": frontend}

    def close(self) -> None:
        self.engine.close()

    def __enter__(self) -> "KVOverlay":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<KVOverlay {self.kind} {self.board} from {self.source}>"


# -- what is present -----------------------------------------------------------------------


def pynq_device_present() -> bool:
    """pynq installed and a PL Linux can program: the test PYNQ's own device probe makes."""
    return importlib.util.find_spec("pynq") is not None and FPGA_MANAGER.exists()


def xrt_present() -> bool:
    """XRT's Python bindings can be imported."""
    if "pyxrt" in sys.modules:
        return sys.modules["pyxrt"] is not None
    return importlib.util.find_spec("pyxrt") is not None


#: What each board backend needs on this machine (said when it is asked for without it).
BOARD_RUNTIMES = {"pynq": "a PYNQ board (pynq installed and a PL that Linux can program)",
                  "xrt": "an XRT install (its Python bindings, pyxrt)"}


def backends_here() -> list[str]:
    """The names load(backend=...) can open on this machine, for --backend and serve's settings:
    auto, a board backend whose runtime is present, and KVEngine's backends."""
    present = {"pynq": pynq_device_present, "xrt": xrt_present}
    return [AUTO, *(name for name in BOARD_FLOWS if present[name]()), *available_backends()]


def unavailable_here(name: str) -> Optional[str]:
    """Why backend `name` cannot be opened on this machine, or None if it can."""
    here = backends_here()
    if name in here:
        return None
    if name in BOARD_RUNTIMES:
        return (f"backend {name!r} needs {BOARD_RUNTIMES[name]}, which this machine does not "
                f"have; available here: {', '.join(here)}")
    return f"{name!r} is not an available backend; available here: {', '.join(here)}"


def _default_board(backend: str, overlays: Optional[mf.PathLike]) -> str:
    """The board of a PYNQ or XRT host when none was named: $BOARD on a PYNQ image if it names
    an overlay, else the only board of that flow; otherwise the caller must name one."""
    flow = BOARD_FLOWS[backend]
    if backend == "pynq":
        env = os.environ.get("BOARD", "").lower()
        if env in mf.boards(overlays) and mf.load_manifest(env, overlays)["flow"] == flow:
            return env
    found = [b for b in mf.boards(overlays) if mf.load_manifest(b, overlays)["flow"] == flow]
    if len(found) == 1:
        return found[0]
    raise OverlayError(
        f"{backend} is present but {'no' if not found else 'more than one'} {flow} board has a "
        f"manifest under {mf.overlays_dir(overlays)} ({', '.join(found) or 'none'}): name one "
        f"with load(board=...), --board or ${BOARD_ENV}")


def _engine_options(options: Mapping[str, Any]) -> tuple[EngineOptions, dict[str, Any]]:
    """load()'s keywords: geometry (a Geometry, a mapping and/or flat fields), value_kind,
    relocation."""
    opts = dict(options)
    given = opts.pop("geometry", None) or {}
    geometry = dict(given.as_dict() if isinstance(given, Geometry) else given)
    geometry.update({k: opts.pop(k) for k in list(opts) if k in GEOMETRY_KEYS})
    value_kind = opts.pop("value_kind", None)
    engine_kw = {k: opts.pop(k) for k in ("relocation",) if k in opts}
    if opts:
        raise TypeError(f"load() got unknown option(s) {', '.join(sorted(opts))} (known: geometry, "
                        f"{', '.join(GEOMETRY_KEYS)}, value_kind, relocation)")
    return EngineOptions("model", geometry, value_kind), engine_kw


def load(board: Optional[str] = None, backend: Optional[str] = None, *,
         overlays: Optional[mf.PathLike] = None, device: int = 0, **options: Any) -> KVOverlay:
    """Open the overlay: a board through PYNQ or XRT, else the simulated overlay.

    board: a directory of overlays/ (default $PYNQ_KV_BOARD; else found from the host).
    backend: None/"auto" (a PYNQ board if pynq and a PL are here, else an Alveo card if pyxrt
    imports, else the model), "pynq", "xrt", or a KVEngine backend for the simulated overlay
    ("model"; "rtl" is the Verilated kv_top with its Ethernet port).
    overlays: the folder holding overlays/<board>/ (default: see pynq_kv.manifest).
    device: the XRT device index of the card.
    options: geometry (a Geometry, a mapping, or fields such as rows=1024), value_kind,
    relocation. On a board the geometry is the hardware's: given fields must match it.
    """
    backend = AUTO if backend is None else backend
    if backend not in backends():
        raise OverlayError(f"unknown backend {backend!r}; load() accepts {', '.join(backends())}")
    engine_options, engine_kw = _engine_options(options)
    if backend not in (AUTO, *BOARD_FLOWS):
        if board:
            raise OverlayError(f"backend {backend!r} is the simulated overlay, which has no board; "
                               f"drop board={board!r} or load it with backend='auto'")
        overlay = _open_simulated(backend, engine_options, engine_kw)
    else:
        board = board or os.environ.get(BOARD_ENV) or None
        if board is None and backend == AUTO:
            backend = "pynq" if pynq_device_present() else "xrt" if xrt_present() else "model"
        if backend == "model":
            overlay = _open_simulated(backend, engine_options, engine_kw)
        else:
            overlay = _open_board(board or _default_board(backend, overlays), backend, overlays,
                                  engine_options, engine_kw, device)
    log.info("%s", overlay.describe())
    return overlay


def _open_board(board: str, backend: str, overlays: Optional[mf.PathLike],
                options: EngineOptions, engine_kw: dict[str, Any], device: int) -> KVOverlay:
    """A board's overlay, after the checks that need no hardware (manifest, flow, version)."""
    manifest = mf.load_manifest(board, overlays)
    flow = manifest["flow"]
    kind = next((k for k, f in BOARD_FLOWS.items() if f == flow), None)
    if kind is None or backend not in (AUTO, kind):
        raise OverlayError(f"board {board} is a {flow} overlay, which backend {backend!r} "
                           f"cannot load" + (f" (it loads with backend={kind!r})" if kind else ""))
    folder = mf.overlays_dir(overlays) / board
    mf.check_regmap_version(manifest, folder / "manifest.json")
    opener = _open_pynq if kind == "pynq" else _open_xrt
    return opener(board, manifest, folder, options, engine_kw, device)


# -- the simulated overlay ---------------------------------------------------------------


def _open_simulated(backend: str, options: EngineOptions, engine_kw: dict[str, Any]) -> KVOverlay:
    geometry = options.make_geometry()
    value_kind = options.value_kind or "bytes"
    if backend == "rtl":
        from .board import TOP, VirtualBoard

        virtual = VirtualBoard(geometry)
        try:
            engine = KVEngine(virtual.backend(), value_kind=value_kind, **engine_kw)
        except BaseException:
            virtual.close()
            raise
        return KVOverlay(engine, kind="simulated", source=f"simulation (Verilated {TOP})",
                         board="sim", manifest=mf.simulated_manifest(geometry, backend, TOP),
                         frontend=Frontend(virtual.device))
    engine = KVEngine(backend, geometry, value_kind=value_kind, **engine_kw)
    return KVOverlay(engine, kind="simulated", source=f"simulation ({backend})", board="sim",
                     manifest=mf.simulated_manifest(geometry, backend, None), frontend=None)


# -- boards --------------------------------------------------------------------------------


def _bitstream(board: str, manifest: dict[str, Any], folder: Path) -> Path:
    """The board's bitstream (and, for PYNQ, its .hwh), or OverlayNotBuilt saying how to build it."""
    flow = manifest["flow"]
    path = folder / BITSTREAMS[flow]
    needed = [path] + ([path.with_suffix(".hwh")] if flow == "vivado" else [])
    for file in needed:
        if not file.is_file():
            tool = "Vivado" if flow == "vivado" else "Vitis (v++)"
            raise OverlayNotBuilt(
                f"{file} does not exist: build the {board} overlay with "
                f"`make -C hw overlay BOARD={board}` (needs {tool}) or copy a built {file.name} "
                f"there; without the board, backend='model' (pynq-kv --backend model) opens the "
                f"simulated overlay")
    return path


def _hwh_part(hwh: Path) -> Optional[str]:
    """The part a .hwh was built for ("xck26-sfvc784-2LV"), from its SYSTEMINFO element."""
    try:
        root = ET.parse(hwh).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ManifestError(f"{hwh}: cannot read the hardware handoff file: {exc}") from exc
    info = root.find(".//SYSTEMINFO")
    if info is None or not info.get("DEVICE"):
        return None
    return f"{info.get('DEVICE')}-{info.get('PACKAGE', '')}{info.get('SPEEDGRADE', '')}".lower()


def _check_part(hwh: Path, manifest: dict[str, Any]) -> None:
    part = _hwh_part(hwh)
    if part is None:
        raise ManifestError(f"{hwh} names no part (no SYSTEMINFO DEVICE): it is not the "
                            f"handoff file of a Vivado build; rebuild with make -C hw overlay "
                            f"BOARD={manifest['board']}")
    if not str(manifest["part"]).lower().startswith(part):
        raise ManifestError(
            f"{hwh} was built for part {part}, its manifest names {manifest['part']}: the "
            f"bitstream is not this board's; rebuild it with make -C hw overlay "
            f"BOARD={manifest['board']}")


def _check_hardware(manifest: dict[str, Any], backend: MailboxBackend, where: Path,
                    options: EngineOptions) -> None:
    """What only the running hardware can tell: its register-map version and geometry."""
    version = backend.regs.read32(rm.REG_VERSION)
    found = f"{version >> 16}.{version & 0xFFFF}"
    if found != manifest["regmap_version"]:
        raise ManifestError(
            f"{where}: the hardware reports register map {found}, its manifest says "
            f"{manifest['regmap_version']}: the bitstream and manifest.json come from different "
            f"builds; rebuild with make -C hw overlay BOARD={manifest['board']}")
    mf.check_geometry(manifest, backend.geometry, str(where))
    asked = {k: v for k, v in options.geometry.items() if getattr(backend.geometry, k) != v}
    if asked:
        raise OverlayError(
            f"{where} has {', '.join(f'{k}={getattr(backend.geometry, k)}' for k in asked)}, "
            f"asked for {', '.join(f'{k}={v}' for k, v in asked.items())}: a board's geometry is "
            "the bitstream's; drop those options or build an overlay with that geometry")


def _open_pynq(board: str, manifest: dict[str, Any], folder: Path, options: EngineOptions,
               engine_kw: dict[str, Any], device: int) -> KVOverlay:
    bit = _bitstream(board, manifest, folder)
    _check_part(bit.with_suffix(".hwh"), manifest)
    try:
        from . import pynq_driver
    except ImportError as exc:
        raise DriverUnavailable(f"{bit} needs PYNQ: pip install 'pynq-kv[pynq]' on the board "
                                f"({exc})") from exc
    import pynq

    try:
        ol = pynq.Overlay(str(bit))
    except Exception as exc:  # PYNQ raises what its parsers and the FPGA manager raise
        raise OverlayError(f"PYNQ could not load {bit}: {exc}; rebuild it with "
                           f"make -C hw overlay BOARD={board}") from exc
    ip = getattr(ol, manifest["instance"], None)
    if not isinstance(ip, pynq_driver.KVEngineIP):
        raise ManifestError(
            f"{bit}: {manifest['instance']} (manifest 'instance') is "
            f"{type(ip).__name__ if ip is not None else 'not in the design'}, not the pynq-kv "
            f"engine ({pynq_driver.KV_ENGINE_VLNV}): rebuild with make -C hw overlay BOARD={board}")
    backend = ip.backend()
    _check_hardware(manifest, backend, bit, options)
    _enable_mac(pynq, ol, manifest)
    engine = KVEngine(backend, value_kind=options.value_kind or "bytes", **engine_kw)
    return KVOverlay(engine, kind="pynq", source=str(bit), board=board, manifest=manifest,
                     frontend=Frontend(ip))


def _enable_mac(pynq: Any, ol: Any, manifest: dict[str, Any]) -> None:
    """Set ctl_tx_enable / ctl_rx_enable in the MAC's window, when the manifest names one."""
    window = manifest.get("ethernet", {}).get("regs")
    if not window:
        return
    mac = pynq.MMIO(int(str(window["base"]), 0), int(window["range"]), device=ol.device)
    for offset in (XXV_CONFIGURATION_TX_REG1, XXV_CONFIGURATION_RX_REG1):
        mac.write(offset, int(mac.read(offset)) | 1)


def _open_xrt(board: str, manifest: dict[str, Any], folder: Path, options: EngineOptions,
              engine_kw: dict[str, Any], device: int) -> KVOverlay:
    from .xrt_driver import XrtBackend, import_pyxrt, open_registers

    xclbin = _bitstream(board, manifest, folder)
    import_pyxrt()  # DriverUnavailable before anything else when XRT is missing
    regs = open_registers(xclbin, manifest, device)
    try:  # the card is open: any failure from here on closes it (nothing stays half-loaded)
        backend = XrtBackend(regs)
        _check_hardware(manifest, backend, xclbin, options)
        engine = KVEngine(backend, value_kind=options.value_kind or "bytes", **engine_kw)
    except BaseException:
        regs.close()
        raise
    return KVOverlay(engine, kind="xrt", source=str(xclbin), board=board, manifest=manifest,
                     frontend=Frontend(regs))


__all__ = ["AUTO", "KVOverlay", "backends", "load"]
