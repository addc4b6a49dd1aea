"""The PYNQ driver of the pynq-kv engine IP, and a simulated PYNQ device to run it without a board.

On a board, `pynq.Overlay("kv.bit")` binds every IP whose VLNV is `KV_ENGINE_VLNV` to
`KVEngineIP` (PYNQ's `DefaultIP` registry, keyed by `bindto`), and the driver reaches the
engine's AXI4-Lite CSR through PYNQ's `MMIO`. The driver offers `read32(offset)` /
`write32(offset, value)`, the register accessor `pynq_kv.mailbox.MailboxBackend` drives.

Without a board, `SimulatedDevice` is a `pynq.Device` with the REGISTER_RW capability: PYNQ's
`MMIO` then sends every access to `read_registers(address, length)` /
`write_registers(address, data)` (pynq/mmio.py, `_AccessHook`), which this device forwards to any
object with `read32`/`write32` (the Verilated RTL, a Python register double). So the very
`KVEngineIP` code -- and PYNQ's own `DefaultIP`/`MMIO` code under it -- runs in CI:

    ip = open_simulated_ip(regs)          # no bitstream, no .hwh, no BOARD
    backend = ip.backend()                # MailboxBackend over PYNQ MMIO

`SimulatedDevice` defines no `_probe_`, so PYNQ's `DeviceMeta` never registers it
(pynq/pl_server/device.py: only classes with `_probe_` join the probe list): it is never
enumerated by `pynq.Device.devices` and never becomes the default device on a real board. It
exists only where it is constructed; `simulated_active_device()` makes one the
`pynq.Device.active_device` for a `with` block, for code that builds `MMIO`s without a device.

Driver discovery from an installed pynq-kv: `Overlay` imports every module registered under the
`pynq.lib` entry-point group before it binds drivers (pynq/overlay.py `_register_drivers`), so
pynq-kv registers this module there (pyproject.toml, `[project.entry-points."pynq.lib"]`).

Needs `pynq` (extra `pynq-kv[pynq]`; the tests run pynq 4.0.0). Importing this module never probes a
platform: it does not call `pynqutils.get_platform()` and does not touch `Device.devices`.
"""

from __future__ import annotations

import operator
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from . import regmap as rm

try:
    with warnings.catch_warnings():
        # `import pynq` on a CPU that is not a Zynq warns from the class body of pynq.GPIO
        # (pynq/gpio.py: ResourceWarning "Pynq does not support the CPU Architecture"), and
        # pynqutils imports pkg_resources, which newer setuptools flag as deprecated. Neither
        # matters to this driver; keep them from failing a `-W error` run. Only this import is
        # affected: the global warning filters are restored on exit.
        warnings.filterwarnings("ignore", message="Pynq does not support the CPU Architecture")
        warnings.filterwarnings("ignore", message=".*pkg_resources is deprecated")
        import pynq
        from pynq.overlay import UnsupportedConfiguration, _assign_drivers, _IPMap
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "pynq_kv.pynq_driver needs PYNQ: pip install 'pynq-kv[pynq]'"
    ) from exc

__all__ = [
    "KV_ENGINE_VLNV",
    "SIM_PHYS_ADDR",
    "KVEngineIP",
    "SimulatedDevice",
    "open_simulated_ip",
    "simulated_active_device",
]

#: Vendor:library:name:version of the packaged engine IP (kv_engine_top). The Vivado IP
#: packaging Tcl must use exactly these four fields (ipx::package_project -vendor pynq-kv.org
#: -library kv -taxonomy ..., name kv_engine_top, version 1.0); PYNQ binds KVEngineIP to this
#: VLNV and, with `Overlay(..., ignore_version=True)`, to any version of pynq-kv.org:kv:kv_engine_top.
KV_ENGINE_VLNV = "pynq-kv.org:kv:kv_engine_top:1.0"

#: Where the simulated IP sits in the simulated address space: 0xA000_0000 is the first address of
#: the Zynq UltraScale+ M_AXI_HPM0_FPD window, where Vivado places the CSR on a KV260/KR260. A
#: non-zero base makes the tests check that the device subtracts it.
SIM_PHYS_ADDR = 0xA000_0000

#: The instance name the simulated IP gets (the name the block design gives the first instance).
SIM_IP_NAME = "kv_engine_top_0"

_MASK32 = 0xFFFF_FFFF


class RegisterAccess(Protocol):
    """32-bit register access at byte offsets from the engine's CSR base (as pynq_kv.mailbox)."""

    def read32(self, offset: int) -> int: ...

    def write32(self, offset: int, value: int) -> None: ...


def _check_offset(offset: Any, span: int) -> int:
    try:
        offset = operator.index(offset)
    except TypeError:
        raise TypeError(f"register offset must be an integer, got {offset!r}") from None
    if offset < 0 or offset % 4 or offset + 4 > span:
        raise ValueError(f"register offset {offset:#x} is not a word-aligned offset below {span:#x}")
    return offset


def _check_word(value: Any) -> int:
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"register value must be an integer, got {value!r}") from None
    if not 0 <= value <= _MASK32:
        raise ValueError(f"register value {value:#x} does not fit 32 bits")
    return value


class KVEngineIP(pynq.DefaultIP):
    """PYNQ driver of kv_engine_top: its 4 KiB AXI4-Lite CSR (docs/registers.md).

    Every access goes through `DefaultIP.read` / `DefaultIP.write`, i.e. PYNQ's MMIO: mmap'd
    /dev/mem on a board, `SimulatedDevice.read_registers/write_registers` in simulation.
    """

    bindto = [KV_ENGINE_VLNV]

    def __init__(self, description: dict) -> None:
        span = description.get("addr_range", 0)
        if span < rm.ADDR_SPAN:
            # Overlay catches this, warns and falls back to DefaultIP (pynq/overlay.py _IPMap).
            raise UnsupportedConfiguration(
                f"kv_engine_top needs an address range of at least {rm.ADDR_SPAN:#x} bytes, "
                f"this instance has {span:#x}")
        super().__init__(description)
        self.fullpath = description.get("fullpath", SIM_IP_NAME)
        # Only the register map's 4 KiB is decoded; a larger window aliases it (upper bits ignored).
        self._span = rm.ADDR_SPAN

    def read32(self, offset: int) -> int:
        """The 32-bit register at byte `offset` from the CSR base."""
        return int(self.read(_check_offset(offset, self._span))) & _MASK32

    def write32(self, offset: int, value: int) -> None:
        """Write the 32-bit `value` to the register at byte `offset` from the CSR base."""
        # MMIO.write accepts only exact `int` (or bytes): numpy integers are converted here.
        self.write(_check_offset(offset, self._span), _check_word(value))

    def backend(self, name: str = "pynq"):
        """A `pynq_kv.mailbox.MailboxBackend` driving this IP (checks ID and version first)."""
        from .mailbox import MailboxBackend

        return MailboxBackend(self, name=name)

    def __repr__(self) -> str:
        return (f"<KVEngineIP {self.fullpath} at {self.mmio.base_addr:#x} "
                f"on {getattr(self.device, 'tag', self.device)!s}>")


class SimulatedDevice(pynq.Device):
    """A PYNQ device whose register reads and writes go to an object with read32/write32.

    It answers one address window, [base_addr, base_addr + length), at `base_addr` + the
    offsets `regs` understands. The REGISTER_RW capability makes `pynq.MMIO` call
    `read_registers(address, length) -> bytes` and `write_registers(address, data: bytes)`
    with absolute addresses and little-endian words (the host byte order of tinynumpy's
    struct "I", which PYNQ uses for MMIO.array in this mode).

    No `_probe_`: PYNQ never discovers this device; construct it explicitly.
    """

    def __init__(self, regs: RegisterAccess, base_addr: int = SIM_PHYS_ADDR,
                 length: int = rm.ADDR_SPAN, tag: str = "pynq-kv-sim") -> None:
        super().__init__(tag)
        if base_addr < 0 or base_addr % 4 or length <= 0 or length % 4:
            raise ValueError(f"bad register window {base_addr:#x}+{length:#x}")
        self.capabilities = {"REGISTER_RW": True}
        self.regs = regs
        self.base_addr = base_addr
        self.length = length
        self.name = "pynq-kv simulated overlay"
        # What an Overlay would have left on the device; nothing here reads them.
        self.ip_dict: dict = {}
        self.mem_dict: dict = {}

    def _offset(self, address: int, length: int) -> int:
        offset = address - self.base_addr
        if length <= 0 or length % 4 or offset % 4 or offset < 0 or offset + length > self.length:
            raise ValueError(
                f"access of {length} bytes at {address:#x} is not word-aligned inside the "
                f"simulated window {self.base_addr:#x}+{self.length:#x}")
        return offset

    def read_registers(self, address: int, length: int) -> bytes:
        offset = self._offset(address, length)
        out = bytearray()
        for word_offset in range(offset, offset + length, 4):
            value = self.regs.read32(word_offset)
            try:
                value = _check_word(value)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"register double returned {value!r} at {word_offset:#x}: "
                                 f"{exc}") from None
            out += value.to_bytes(4, sys.byteorder)
        return bytes(out)

    def write_registers(self, address: int, data: bytes) -> None:
        data = bytes(data)
        offset = self._offset(address, len(data))
        for i in range(0, len(data), 4):
            self.regs.write32(offset + i, int.from_bytes(data[i:i + 4], sys.byteorder))

    def __repr__(self) -> str:
        return f"<SimulatedDevice {self.tag} {self.base_addr:#x}+{self.length:#x} -> {self.regs!r}>"


def ip_description(device: pynq.Device, phys_addr: int = SIM_PHYS_ADDR,
                   addr_range: int = rm.ADDR_SPAN, name: str = SIM_IP_NAME,
                   vlnv: str = KV_ENGINE_VLNV) -> dict:
    """The ip_dict entry an Overlay would hold for the engine, without a .hwh.

    Same keys as pynqmetadata's runtime ip_dict view (what `Overlay.ip_dict` holds on PYNQ 4.0):
    DefaultIP itself reads phys_addr, addr_range, device, interrupts, gpio, registers+fullpath.
    `registers` is empty, as for an IP packaged without a register description, so
    `register_map` is unavailable (as on a board with such an IP).
    """
    return {
        "fullpath": name,
        "type": vlnv,
        "bdtype": None,
        "state": None,
        "phys_addr": phys_addr,
        "addr_range": addr_range,
        "mem_id": "s_axil",
        "memtype": "REGISTER",
        "gpio": {},
        "interrupts": {},
        "parameters": {},
        "registers": {},
        "driver": None,
        "device": device,
    }


def open_simulated_ip(regs: RegisterAccess, *, phys_addr: int = SIM_PHYS_ADDR,
                      addr_range: int = rm.ADDR_SPAN, name: str = SIM_IP_NAME,
                      vlnv: str = KV_ENGINE_VLNV, ignore_version: bool = False) -> KVEngineIP:
    """The engine IP driver on a `SimulatedDevice` forwarding to `regs`, bound as a board binds it.

    The description goes through PYNQ's own driver assignment (`_assign_drivers`, which looks the
    VLNV up in the `bindto` registry) and attribute access of an overlay (`_IPMap`), so the
    driver is chosen and built by the same code `pynq.Overlay` runs. No bitstream, no .hwh, no
    BOARD variable, no device probing. `vlnv` and `ignore_version` are there to check the
    binding rules (another version of the IP binds only with ignore_version=True).
    """
    device = SimulatedDevice(regs, base_addr=phys_addr, length=addr_range)
    description = ip_description(device, phys_addr, addr_range, name, vlnv)
    tree = {"ip": {name: description}, "hierarchies": {}, "interrupts": {}, "gpio": {},
            "memories": {}, "device": device}
    _assign_drivers(tree, ignore_version, device)
    device.ip_dict = {name: description}
    ip = getattr(_IPMap(tree), name)
    if not isinstance(ip, KVEngineIP):
        raise TypeError(f"PYNQ bound {description['type']} to {type(ip).__name__}, not KVEngineIP "
                        f"(another driver registered for it, or a version mismatch)")
    return ip


@contextmanager
def simulated_active_device(device: pynq.Device) -> Iterator[pynq.Device]:
    """Make `device` PYNQ's `Device.active_device` inside the block, then restore the previous one.

    For code that creates `pynq.MMIO(addr, length)` or drivers without naming a device. Does not
    probe: if no device was active before, none is afterwards.
    """
    missing = object()
    previous = pynq.Device.__dict__.get("_active_device", missing)
    pynq.Device.active_device = device
    try:
        yield device
    finally:
        if previous is missing:
            if "_active_device" in pynq.Device.__dict__:
                delattr(pynq.Device, "_active_device")
        else:
            pynq.Device.active_device = previous
