"""The RTL Ethernet front-end of kv_top, as the host sees it: settings and counters through the
register map (docs/registers.md FE_*), on a board, an Alveo card or the Verilated kv_top alike."""

from __future__ import annotations

from typing import Any

from . import regmap as rm
from .mailbox import RegisterAccess
from .net.eth import ip_bytes, ip_str, mac_bytes, mac_str


class Frontend:
    """The RTL Ethernet front-end of kv_top: its settings and counters through the register map.

    Settings are the FE_* registers of docs/registers.md (MAC, IPv4 address, memcached UDP
    port); counters are the FE_COUNTER block, each read LO then HI like the engine's.
    """

    def __init__(self, regs: RegisterAccess) -> None:
        self.regs = regs

    @property
    def mac(self) -> str:
        hi, lo = self.regs.read32(rm.REG_FE_MAC_HI) & 0xFFFF, self.regs.read32(rm.REG_FE_MAC_LO)
        return mac_str((hi << 32 | lo).to_bytes(6, "big"))

    @mac.setter
    def mac(self, mac: str) -> None:
        value = int.from_bytes(mac_bytes(mac), "big")
        self.regs.write32(rm.REG_FE_MAC_LO, value & 0xFFFF_FFFF)
        self.regs.write32(rm.REG_FE_MAC_HI, value >> 32)

    @property
    def ip(self) -> str:
        return ip_str(self.regs.read32(rm.REG_FE_IP).to_bytes(4, "big"))

    @ip.setter
    def ip(self, ip: str) -> None:
        self.regs.write32(rm.REG_FE_IP, int.from_bytes(ip_bytes(ip), "big"))

    @property
    def udp_port(self) -> int:
        return self.regs.read32(rm.REG_FE_UDP_PORT) & 0xFFFF

    @udp_port.setter
    def udp_port(self, port: int) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port <= 0xFFFF:
            raise ValueError(f"a UDP port is 1..65535, got {port!r}")
        self.regs.write32(rm.REG_FE_UDP_PORT, port)

    @property
    def data_w(self) -> int:
        """The MAC stream width in bits (64: 10G, 512: 100G)."""
        return self.regs.read32(rm.REG_FE_DATA_W)

    def counters(self) -> dict[str, int]:
        out = {}
        for index, name in enumerate(rm.FE_COUNTER_NAMES):
            lo = self.regs.read32(rm.REG_FE_COUNTER + 8 * index)
            hi = self.regs.read32(rm.REG_FE_COUNTER + 8 * index + 4)
            out[name] = hi << 32 | lo
        return out

    def clear_counters(self) -> None:
        self.regs.write32(rm.REG_FE_CTRL, 1)

    def settings(self) -> dict[str, Any]:
        return {"mac": self.mac, "ip": self.ip, "udp_port": self.udp_port, "data_w": self.data_w}
