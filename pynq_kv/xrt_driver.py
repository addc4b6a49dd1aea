"""The Alveo path: kv.xclbin loaded through XRT's Python bindings, the engine driven through
the kernel's register map (the same mailbox the PYNQ driver drives on a Zynq).

`pyxrt` comes with an XRT install (/opt/xilinx/xrt/python), not from PyPI; PYNQ 3.1+ no longer
drives Alveo cards. The kernel is user-managed (kernel.xml hwControlProtocol="user_managed",
written by hw/vivado/flow.py), so its registers are reached with XRT's register API:
`pyxrt.ip(device, uuid, "kernel:{instance}")` where the bindings have it, else the older
`pyxrt.kernel(device, uuid, name, cu_access_mode.exclusive)` whose `read_register` /
`write_register` older XRT releases bind. XRT releases whose bindings have neither get a
DriverUnavailable that says so. Only stand-ins of pyxrt have run this code (tests/test_overlay.py):
no Alveo card was available.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from .errors import DriverUnavailable, ManifestError
from .mailbox import MailboxBackend

_MASK32 = 0xFFFF_FFFF


def _normalized(platform: str) -> str:
    """A platform name as both spellings XRT and v++ use compare: xilinx:u55c:... == xilinx_u55c_..."""
    return platform.replace(":", "_").replace(".", "_").lower()


class XrtRegisters:
    """read32/write32 (pynq_kv.mailbox.RegisterAccess) over an XRT register handle.

    Holds the device and the handle so that closing it releases both (XRT frees a device and
    its exclusive context when the last Python reference goes).
    """

    def __init__(self, device: Any, handle: Any, name: str) -> None:
        self.device: Optional[Any] = device
        self.handle: Optional[Any] = handle
        self.name = name

    def _open_handle(self) -> Any:
        if self.handle is None:
            raise DriverUnavailable(f"the XRT handle of {self.name} is closed")
        return self.handle

    def read32(self, offset: int) -> int:
        return int(self._open_handle().read_register(offset)) & _MASK32

    def write32(self, offset: int, value: int) -> None:
        self._open_handle().write_register(offset, int(value) & _MASK32)

    def close(self) -> None:
        self.handle = None
        self.device = None


class XrtBackend(MailboxBackend):
    """KVEngine's backend on an Alveo card: the mailbox over XRT register reads and writes."""

    def __init__(self, regs: XrtRegisters) -> None:
        self.xrt = regs
        super().__init__(regs, name="xrt")

    def close(self) -> None:
        super().close()
        self.xrt.close()


def import_pyxrt() -> Any:
    """XRT's Python bindings, or DriverUnavailable saying where they come from."""
    try:
        import pyxrt
    except ImportError as exc:
        raise DriverUnavailable(
            "XRT's Python bindings (pyxrt) are not importable: install XRT and source "
            "/opt/xilinx/xrt/setup.sh (pyxrt is not on PyPI), or use the simulated overlay "
            "(backend='model')") from exc
    return pyxrt


def open_registers(xclbin_path: Path, manifest: dict[str, Any], device_index: int = 0) -> XrtRegisters:
    """Check the xclbin against the manifest, load it on card `device_index`, open the kernel.

    The xclbin's platform and kernel are checked before the card is touched; if anything fails
    after the card was opened, the handles are dropped before the error is raised.
    """
    pyxrt = import_pyxrt()
    try:
        xclbin = pyxrt.xclbin(os.fspath(xclbin_path))
    except RuntimeError as exc:
        raise ManifestError(f"XRT cannot read {xclbin_path}: {exc}; rebuild it with "
                            f"make -C hw overlay BOARD={manifest['board']}") from exc
    platform = manifest.get("platform")
    built_for = str(xclbin.get_xsa_name())
    if platform and _normalized(built_for) != _normalized(platform):
        raise ManifestError(
            f"{xclbin_path} was built for platform {built_for!r}, its manifest names {platform!r}: "
            f"rebuild it with make -C hw overlay BOARD={manifest['board']}")
    top, instance = manifest["top"], manifest["instance"]
    kernels = [k.get_name() for k in xclbin.get_kernels()]
    if top not in kernels:
        raise ManifestError(
            f"{xclbin_path} holds the kernels {', '.join(kernels) or '(none)'}, not {top} "
            f"(manifest 'top'): rebuild it with make -C hw overlay BOARD={manifest['board']}")
    name = f"{top}:{{{instance}}}"
    try:
        device = pyxrt.device(device_index)
    except RuntimeError as exc:
        raise DriverUnavailable(f"no Alveo card at XRT device index {device_index} "
                                f"(xbutil examine lists them): {exc}") from exc
    try:
        uuid = device.load_xclbin(xclbin)
        if hasattr(pyxrt, "ip"):
            handle = pyxrt.ip(device, uuid, name)
        elif hasattr(pyxrt.kernel, "read_register"):
            handle = pyxrt.kernel(device, uuid, top, pyxrt.kernel.cu_access_mode.exclusive)
        else:
            raise DriverUnavailable(
                "this XRT's pyxrt binds neither xrt::ip nor kernel.read_register, so it cannot "
                f"reach {name}'s registers: use an XRT whose Python bindings have one of them")
    except RuntimeError as exc:
        raise DriverUnavailable(f"XRT could not load {xclbin_path} on device {device_index}: "
                                f"{exc}") from exc
    return XrtRegisters(device, handle, name)
