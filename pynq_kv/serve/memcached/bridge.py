"""The virtual board on a UDP socket: host datagrams <-> the Verilated kv_top's Ethernet port.

`start_board_bridge` serves memcached clients with the RTL data plane of the appliance's
virtual board (pynq_kv.board): each datagram is wrapped into a frame from its client's IPv4
address and port, the board answers, and the reply frames' payloads go back to the sender.
Admission and the reply budget are the board's own (its FE_ADMIT table, programmed with serve's
table before the first datagram and again after every reload), so they run in the RTL exactly
as on a board; the bridge only drops what cannot be put on an IPv4 wire. The board keeps its
own counters; the bridge counts what it forwards or drops. Its latency (the "udp" histogram) is
timed by the UDP server's protocol it inherits: datagram in to the last reply's sendto, the
board's time included.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Optional

from ...admission import Admission, source_ipv4
from ...appliance import Appliance
from ...board import MAX_UDP_PAYLOAD, BoardBackend, BoardError, VirtualBoard
from ...frontend import Frontend
from .server import UdpServer, start_udp_server


class BoardBridge(UdpServer):
    """UDP on the host ↔ the virtual board's Ethernet port; counters are the board's own."""

    _programmed: Optional[VirtualBoard] = None  # the board serve's table was last put on

    def _board(self) -> VirtualBoard:
        backend = self.appliance.engine.backend
        if not isinstance(backend, BoardBackend):
            raise BoardError("the appliance's engine does not run on a virtual board")
        board = backend.board
        if board is not self._programmed:  # a new board (start, or a reload): its reset table
            Frontend(board.device).program_admission(self.admission)
            self._programmed = board
        return board

    def handle(self, data: bytes, addr: Any) -> list[bytes]:
        source = source_ipv4(addr[0])
        if source is None:  # an IPv6 client: the virtual wire, like the RTL, is IPv4 only
            self.counters["drop_not_ipv4"] += 1
            return []
        self.counters["rx_datagrams"] += 1
        if len(data) > MAX_UDP_PAYLOAD:
            self.counters["drop_over_mtu"] += 1  # no IP fragmentation on the virtual wire
            return []
        replies = self._board().exchange(data, addr[1], str(ipaddress.IPv4Address(source)))
        self.counters["tx_datagrams"] += len(replies)
        return replies

    def tier(self) -> None:
        """None: the board's RTL data plane answers every datagram itself (its writes reach a
        host tier through the engine's change log, not through this bridge)."""
        return None

    def stats(self) -> dict[str, Any]:
        bridge = {name: self.counters[name] for name in
                  ("drop_not_ipv4", "rx_datagrams", "tx_datagrams", "drop_over_mtu",
                   "internal_errors")}
        out: dict[str, Any] = {"bridge": bridge}
        try:
            out["board"] = self._board().counters()
        except BoardError:
            pass
        return out


async def start_board_bridge(appliance: Appliance, host: str = "127.0.0.1", port: int = 11211, *,
                             admission: Optional[Admission] = None) -> UdpServer:
    """Serve the virtual board's memcached front-end on a UDP socket of this host, the board's
    admission table set to `admission` (serve's; None: the one a loopback bind gets)."""
    return await start_udp_server(appliance, host, port, admission=admission,
                                  server_class=BoardBridge)
