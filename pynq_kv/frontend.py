"""The RTL Ethernet front-end of kv_top, as the host sees it: settings and counters through the
register map (docs/registers.md FE_*), on a board, an Alveo card or the Verilated kv_top alike."""

from __future__ import annotations

import ipaddress
from typing import Any

from . import regmap as rm
from .admission import Admission, AdmissionEntry, AdmissionError
from .mailbox import RegisterAccess
from .net.eth import ip_bytes, ip_str, mac_bytes, mac_str


class Frontend:
    """The RTL Ethernet front-end of kv_top: its settings and counters through the register map.

    Settings are the FE_* registers of docs/registers.md (MAC, IPv4 address, memcached UDP
    port, the admission table); counters are the FE_COUNTER block, each read LO then HI like
    the engine's.
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

    @property
    def admit_entries(self) -> int:
        """How many entries the hardware's admission table has (kv_top's ADMIT_ENTRIES)."""
        return self.regs.read32(rm.REG_FE_ADMIT_ENTRIES)

    def program_admission(self, admission: Admission) -> None:
        """Put an admission table in force (frontend.md §10): the entries in order, unused ones
        cleared, and the default, written then committed with one FE_CTRL.ADMIT_COMMIT, so every
        datagram is decided by the old table or the new one, never a mix. A table longer than
        the hardware's raises AdmissionError before anything is written."""
        capacity = self.admit_entries
        if len(admission.entries) > capacity:
            raise AdmissionError(f"{len(admission.entries)} admission entries, the front-end's "
                                 f"table holds {capacity}")
        words = [(int(e.network.network_address),
                  rm.FE_ADMIT_CTRL_VALID | int(e.allow) << rm.FE_ADMIT_CTRL_ALLOW_SHIFT
                  | e.network.prefixlen << rm.FE_ADMIT_CTRL_LEN_SHIFT
                  | e.budget << rm.FE_ADMIT_CTRL_BUDGET_SHIFT) for e in admission.entries]
        words += [(0, 0)] * (capacity - len(words))
        self.regs.write32(rm.REG_FE_ADMIT_DEFAULT,
                          int(admission.default_allow) << rm.FE_ADMIT_DEFAULT_ALLOW_SHIFT
                          | admission.default_budget << rm.FE_ADMIT_DEFAULT_BUDGET_SHIFT)
        for i, (addr, ctrl) in enumerate(words):
            self.regs.write32(rm.REG_FE_ADMIT_ADDR + 4 * i, addr)
            self.regs.write32(rm.REG_FE_ADMIT_CTRL + 4 * i, ctrl)
        self.regs.write32(rm.REG_FE_CTRL, rm.FE_CTRL_ADMIT_COMMIT)

    def admission(self) -> Admission:
        """The table as last written (after program_admission, the one in force)."""
        entries = []
        for i in range(self.admit_entries):
            ctrl = self.regs.read32(rm.REG_FE_ADMIT_CTRL + 4 * i)
            if not ctrl & rm.FE_ADMIT_CTRL_VALID:
                continue
            length = (ctrl & rm.FE_ADMIT_CTRL_LEN) >> rm.FE_ADMIT_CTRL_LEN_SHIFT
            addr = self.regs.read32(rm.REG_FE_ADMIT_ADDR + 4 * i)
            entries.append(AdmissionEntry(ipaddress.IPv4Network((addr, length), strict=False),
                                          bool(ctrl & rm.FE_ADMIT_CTRL_ALLOW),
                                          (ctrl & rm.FE_ADMIT_CTRL_BUDGET) >> rm.FE_ADMIT_CTRL_BUDGET_SHIFT))
        default = self.regs.read32(rm.REG_FE_ADMIT_DEFAULT)
        return Admission(tuple(entries), bool(default & rm.FE_ADMIT_DEFAULT_ALLOW),
                         (default & rm.FE_ADMIT_DEFAULT_BUDGET) >> rm.FE_ADMIT_DEFAULT_BUDGET_SHIFT)

    def counters(self) -> dict[str, int]:
        out = {}
        for index, name in enumerate(rm.FE_COUNTER_NAMES):
            lo = self.regs.read32(rm.REG_FE_COUNTER + 8 * index)
            hi = self.regs.read32(rm.REG_FE_COUNTER + 8 * index + 4)
            out[name] = hi << 32 | lo
        return out

    def clear_counters(self) -> None:
        self.regs.write32(rm.REG_FE_CTRL, rm.FE_CTRL_CLR_COUNTERS)

    def settings(self) -> dict[str, Any]:
        return {"mac": self.mac, "ip": self.ip, "udp_port": self.udp_port, "data_w": self.data_w}
